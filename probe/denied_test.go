//go:build linux

package probe_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// TestProbeNamesDeniedPIDs runs the real probe as user nobody, who may not read other users'
// fd directories, beside a process of root's: the fds section's denied line counts what could
// not be read and names whose it was, and each PID it names is another user's process (or one
// that has exited since), never one nobody may read, such as the probe's own.
func TestProbeNamesDeniedPIDs(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	rootSleeper(t)
	smiDir := t.TempDir()
	if err := os.Chmod(smiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-s")
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "PATH="+smiDir+":"+os.Getenv("PATH"))
	cmd.Stdin = strings.NewReader("set -- 0123456789abcdef0123456789abcdef\n" + probe.Script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe as nobody: %v: %s", err, stderr.String())
	}
	s, err := parse.Parse(raw)
	if s == nil {
		t.Fatalf("parse: %v", err)
	}
	d := s.FDsDenied
	if d == nil || d.Links < len(d.PIDs) || len(d.PIDs) == 0 || len(d.PIDs) > 16 {
		t.Fatalf("denied %+v: want links and 1 to 16 PIDs", d)
	}
	for _, pid := range d.PIDs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		if err != nil {
			continue // exited since
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" && f[1] == "65534" {
				t.Errorf("PID %d is nobody's own: nobody may read its fd links", pid)
			}
		}
	}
}

// rootSleeper starts a process of root's (sleep) that goes when the test ends, and returns its
// PID.
func rootSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = testenv.DieWithTest(false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}
