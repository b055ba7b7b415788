package systemdtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The harness boots a real systemd that runs and stops a unit, keeps a real journal, and
// leaves nothing behind: no cgroup, no process, no /dev/log on the machine.
func TestSystemdRunsStopsAndCleansUp(t *testing.T) {
	_, devLogBefore := os.Lstat("/dev/log")
	s := Start(t, Config{Name: "gpu-sd", Journal: true, Units: map[string]string{
		"sleeper.service": "[Unit]\nDefaultDependencies=no\n[Service]\nExecStart=/bin/sleep 600\n",
	}})
	s.WaitFor(t, "sleeper active", 10*time.Second, func() bool { return s.Property(t, "sleeper.service", "ActiveState") == "active" })
	pid := s.MainPID(t, "sleeper.service")
	if out, err := s.Run("cat", fmt.Sprintf("/proc/%d/cgroup", pid)); err != nil || !strings.Contains(out, "0::/system.slice/sleeper.service\n") {
		t.Errorf("the unit's cgroup, seen in the namespace: %q (%v)", out, err)
	}
	if out, err := s.Run("uname", "-n"); err != nil || out != "gpu-sd\n" {
		t.Errorf("host name %q (%v)", out, err)
	}
	if out, err := s.Run("systemctl", "stop", "--", "sleeper.service"); err != nil {
		t.Fatalf("systemctl stop: %v: %s", err, out)
	}
	if st := s.Property(t, "sleeper.service", "ActiveState"); st != "inactive" {
		t.Errorf("after stop: %s", st)
	}
	if out, err := s.Run("logger", "-t", "gputriage-harness", "--", "hello journal"); err != nil {
		t.Fatalf("logger: %v: %s", err, out)
	}
	s.WaitFor(t, "the line in the journal", 10*time.Second, func() bool {
		out, _ := s.Run("journalctl", "-q", "--no-pager", "-o", "cat", "-t", "gputriage-harness")
		return out == "hello journal\n"
	})
	if _, err := os.Lstat("/dev/log"); (err == nil) != (devLogBefore == nil) {
		t.Errorf("the machine's /dev/log changed: %v", err)
	}
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.PID))
	if err != nil {
		t.Fatal(err)
	}
	cg := s.cgroup
	s.Stop()
	if _, err := os.Stat(cg); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind (%v)", cg, err)
	}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	for _, l := range links {
		if got, _ := os.Readlink(l); got == ns {
			b, _ := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(l)), "stat"))
			t.Errorf("%s is still in systemd's PID namespace after Stop: %s", filepath.Dir(filepath.Dir(l)), b)
		}
	}
}
