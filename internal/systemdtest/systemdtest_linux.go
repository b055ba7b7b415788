package systemdtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// Binary is Debian's systemd.
const Binary = "/lib/systemd/systemd"

// LabTarget is the target systemd boots into: it wants every unit of Config.Units.
const LabTarget = "gputriage-lab.target"

// Config describes one systemd.
type Config struct {
	Name string // the namespace's host name (uname -n)
	// Units are unit files by name ("sglang-old.service"), written to /run/systemd/system
	// there; LabTarget wants each of them.
	Units map[string]string
	// Journal starts systemd-journald with its sockets (storage volatile, in the namespace's
	// /run/log/journal), so that logger and journalctl there are the real ones.
	Journal bool
}

// Systemd is a running systemd.
type Systemd struct {
	PID    int    // systemd, PID 1 of its namespaces, as the test sees it
	Dir    string // the unit files, as written
	pidNS  string // its PID namespace, as /proc/PID/ns/pid names it
	cgroup string // its cgroup v2 directory, the root of its cgroup namespace
	cmd    *exec.Cmd
	done   chan struct{}
	log    *testenv.SyncBuffer
	once   sync.Once
	t      testing.TB
}

// need finds what a systemd lab needs, or skips the test saying what is missing; under CI
// (CI=true) a missing piece is a broken .ci/run and fails instead.
func need(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t, "systemd")
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	const install = "apt-get install systemd util-linux bsdutils"
	for _, p := range []string{Binary, "/lib/systemd/systemd-journald"} {
		if _, err := os.Stat(p); err != nil || testenv.Absent(install) {
			missing = append(missing, p)
		}
	}
	for _, name := range []string{"unshare", "nsenter", "systemctl", "journalctl", "logger", "mknod"} {
		if _, err := testenv.LookPath(install, name); err != nil {
			missing = append(missing, name)
		}
	}
	root, err := scenario.CgroupV2Root()
	if err != nil {
		missing = append(missing, "a cgroup v2 hierarchy")
	}
	if len(missing) > 0 {
		testenv.SkipSuite(t, "systemd", install, "needs "+strings.Join(missing, ", "))
	}
	return root
}

var seq atomic.Int32

// Start boots a systemd and waits until it reports itself running; it is stopped at cleanup.
func Start(t testing.TB, c Config) *Systemd {
	t.Helper()
	root := need(t)
	s := &Systemd{Dir: t.TempDir(), done: make(chan struct{}), log: &testenv.SyncBuffer{}, t: t}
	if err := s.writeUnits(c); err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	own, err := ownCgroup()
	if err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	s.cgroup = filepath.Join(root, own, fmt.Sprintf("gputriage-systemdtest-%d-%d", os.Getpid(), seq.Add(1)))
	if err := os.Mkdir(s.cgroup, 0o755); err != nil {
		t.Fatalf("systemdtest: cgroup: %v", err)
	}
	t.Cleanup(s.Stop)
	// The shell moves itself into the new cgroup, then becomes unshare: the cgroup namespace
	// it makes is rooted there. Its child, PID 1 of the new PID namespace, sets up the
	// namespace and becomes systemd; --kill-child ties it to unshare.
	s.cmd = exec.Command("sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, s.cgroup,
		"unshare", "-C", "-u", "-p", "-m", "-f", "--kill-child", "--mount-proc", "--propagation", "private",
		"sh", "-c", bootScript, "sh", c.Name, s.Dir)
	s.cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "container=gputriage-lab"}
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("systemdtest: %v", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	s.WaitFor(t, "systemd as PID 1 of the namespace", 10*time.Second, func() bool {
		s.PID = testenv.ChildOf(s.cmd.Process.Pid)
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", s.PID))
		s.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.PID))
		return s.PID != 0 && strings.HasSuffix(exe, "/systemd")
	})
	s.WaitFor(t, "systemd running", 30*time.Second, func() bool {
		out, _ := s.Run("systemctl", "is-system-running")
		return out == "running\n" || out == "degraded\n"
	})
	return s
}

// writeUnits writes the lab target and c's units into s.Dir.
func (s *Systemd) writeUnits(c Config) error {
	wants := slices.Sorted(func(yield func(string) bool) {
		for name := range c.Units {
			if !yield(name) {
				return
			}
		}
	})
	if c.Journal {
		wants = append(wants, "systemd-journald.socket", "systemd-journald-dev-log.socket", "systemd-journald.service")
	}
	files := map[string]string{LabTarget: "[Unit]\nDescription=gputriage lab\nDefaultDependencies=no\nWants=" + strings.Join(wants, " ") + "\n"}
	for name, text := range c.Units {
		if name == LabTarget || !filepath.IsLocal(name) || strings.Contains(name, "/") {
			return fmt.Errorf("unit name %q", name)
		}
		files[name] = text
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bootScript runs as PID 1 of the new namespaces ($1 the host name, $2 the unit directory):
// its own /run with the units, journald's volatile storage and sshd's privilege separation
// directory; its own /dev; the cgroup v2 hierarchy as its cgroup namespace sees it; the host
// name in /etc/hostname too (systemd sets it from there when it boots); then systemd.
const bootScript = `set -e
hostname "$1"
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/systemd/system /run/systemd/journald.conf.d /run/sshd /run/gt-dev
cp "$2"/* /run/systemd/system/
printf '[Journal]\nStorage=volatile\n' >/run/systemd/journald.conf.d/gputriage-lab.conf
d=/run/gt-dev
mount -t tmpfs -o mode=755 tmpfs "$d"
` + scenario.DevNodes + `mkdir "$d/pts" "$d/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$d/pts"
ln -s pts/ptmx "$d/ptmx"
mount -t tmpfs -o mode=1777,size=8g tmpfs "$d/shm"
mount --move "$d" /dev
echo "$1" >/run/gt-hostname
mount --bind /run/gt-hostname /etc/hostname
exec ` + Binary + ` --system --unit=` + LabTarget + ` --log-target=console
`

// ownCgroup is this process's cgroup v2 path ("0::" line of /proc/self/cgroup).
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok && strings.HasPrefix(p, "/") && !strings.Contains(p, "..") {
			return p, nil
		}
	}
	return "", errors.New("no cgroup v2 path in /proc/self/cgroup")
}

// Enter is the command prefix that runs a command inside systemd's PID, mount and cgroup
// namespaces.
func (s *Systemd) Enter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(s.PID), "-p", "-m", "-C", "-u", "--"}
}

// Run runs a command inside the namespaces and returns its output (stdout and stderr).
func (s *Systemd) Run(args ...string) (string, error) {
	argv := append(s.Enter(), args...)
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	return string(out), err
}

// Property is a unit's property as its manager reports it (systemctl show -P).
func (s *Systemd) Property(t testing.TB, unit, prop string) string {
	t.Helper()
	out, err := s.Run("systemctl", "show", "-P", prop, "--", unit)
	if err != nil {
		t.Fatalf("systemdtest: systemctl show -P %s %s: %v: %s", prop, unit, err, out)
	}
	return strings.TrimSpace(out)
}

// MainPID is the unit's main process as the namespace sees it (0 when it has none).
func (s *Systemd) MainPID(t testing.TB, unit string) int {
	t.Helper()
	n, err := strconv.Atoi(s.Property(t, unit, "MainPID"))
	if err != nil {
		t.Fatalf("systemdtest: MainPID of %s: %v", unit, err)
	}
	return n
}

// WaitFor polls cond every 50 ms until it holds, failing the test with systemd's output
// after within, or at once if systemd exits.
func (s *Systemd) WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testenv.Scale(within)) // a loaded machine takes longer
	for !cond() {
		select {
		case <-s.done:
			t.Fatalf("systemdtest: systemd exited while waiting for %s:\n%s", what, s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemdtest: no %s after %v:\n%s", what, within, s.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log is what systemd wrote to its console so far.
func (s *Systemd) Log() string { return s.log.String() }

// Stop kills systemd with SIGKILL through unshare (and with it every process of its PID
// namespace: its units' and any joined sshd's), waits until its cgroup is empty and removes
// it. A failed test gets systemd's output first. Called at cleanup; calling it earlier is fine.
func (s *Systemd) Stop() {
	s.once.Do(func() {
		if s.t.Failed() {
			s.t.Logf("systemdtest: systemd's console:\n%s", s.log.String())
		}
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		// The namespace's processes are gone once its init is reaped (the kernel kills and
		// waits for them first); the machine's init reaps it after unshare is gone.
		within := testenv.Scale(10 * time.Second)
		deadline := time.Now().Add(within)
		for s.inNamespace() || populated(s.cgroup) {
			if time.Now().After(deadline) {
				s.t.Errorf("systemdtest: systemd %d or its cgroup's processes outlived SIGKILL by %s", s.PID, within)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		scenario.RemoveCgroups(s.cgroup)
		if _, err := os.Stat(s.cgroup); err == nil {
			s.t.Errorf("systemdtest: cgroup %s is left behind", s.cgroup)
		}
	})
}

// inNamespace reports whether systemd's PID still names a process in its PID namespace (a
// zombie too).
func (s *Systemd) inNamespace() bool {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", s.PID))
	return err == nil && s.pidNS != "" && ns == s.pidNS
}

// populated reports whether a cgroup v2 directory or one below it still has processes.
func populated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	return err == nil && bytes.Contains(b, []byte("populated 1"))
}
