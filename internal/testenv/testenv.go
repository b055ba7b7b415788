// Package testenv holds what the test harnesses that start real daemons (sshd, systemd,
// dockerd, Slurm) share: finding the programs a suite needs, skipping loudly without them or
// failing under CI, and a buffer a daemon writes while the test reads it. Only tests import it.
package testenv

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Programs finds each of names on PATH, else in dirs, and returns their paths by name. When
// one is missing the suite skips (SkipSuite), saying so and how to install it, except under
// CI (CI=true), where a missing program is a broken .ci/run and fails.
func Programs(t testing.TB, suite, install string, names, dirs []string) map[string]string {
	t.Helper()
	found := map[string]string{}
	var missing []string
	for _, name := range names {
		p, err := LookPath(install, name)
		if err != nil && !Absent(install) {
			for _, dir := range dirs {
				if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
					p, err = filepath.Join(dir, name), nil
					break
				}
			}
		}
		if err != nil {
			missing = append(missing, name)
			continue
		}
		found[name] = p
	}
	if len(missing) > 0 {
		SkipSuite(t, suite, install, "needs "+strings.Join(missing, ", "))
	}
	return found
}

// SkipShort skips t under go test -short, the inner loop: suite starts real daemons
// (sshd, Slurm, systemd, dockerd) or a library of real processes, and takes seconds a test.
// The pure tests of the same packages still run.
func SkipShort(t testing.TB, suite string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the " + suite + " suite starts real daemons or processes")
	}
}

// SkipSuite skips t, one test of suite (e.g. "SSH integration", "Slurm"), for a missing
// prerequisite: why says what is missing, install how to get it ("apt-get install
// openssh-server"). Under CI (CI=true) it fails instead: .ci/run installs everything, so a
// missing prerequisite there is a broken .ci/run. The message carries a marker that
// scripts/test collects (ParseSkip) into one summary line naming each skipped suite and its
// package, so that a run without -v says what it did not test.
func SkipSuite(t testing.TB, suite, install, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("the %s suite: %s (%s): under CI=true .ci/run must provide it", suite, why, install)
	}
	t.Skip(fmt.Sprintf("SKIPPING the %s suite: %s %s%s]", suite, why, installMark, install))
}

const installMark = "[install: "

var skipRE = regexp.MustCompile(`SKIPPING the (.+?) suite: .*` + regexp.QuoteMeta(installMark) + `([^\]]*)\]`)

// ParseSkip finds SkipSuite's marker in a line of test output and returns the suite and its
// install line.
func ParseSkip(line string) (suite, install string, ok bool) {
	m := skipRE.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// AbsentEnv names the environment variable that simulates a machine without some
// prerequisites: a comma-separated list of Debian packages (GPUTRIAGE_TEST_ABSENT=
// openssh-server,slurmd) whose programs LookPath and Programs do not find.
const AbsentEnv = "GPUTRIAGE_TEST_ABSENT"

// Absent says whether install (a package name, or an "apt-get install ..." line) names a
// package listed in $GPUTRIAGE_TEST_ABSENT.
func Absent(install string) bool {
	absent := strings.Split(os.Getenv(AbsentEnv), ",")
	for _, pkg := range strings.Fields(install) {
		if pkg != "" && slices.Contains(absent, pkg) {
			return true
		}
	}
	return false
}

// LookPath is exec.LookPath, except that a program of a package listed in
// $GPUTRIAGE_TEST_ABSENT is not found. install names the package as Absent takes it.
func LookPath(install, name string) (string, error) {
	if Absent(install) {
		return "", fmt.Errorf("%s: %s lists %s", name, AbsentEnv, install)
	}
	return exec.LookPath(name)
}

// Need finds name, a program of install, or skips t as one test of suite (SkipSuite).
func Need(t testing.TB, suite, install, name string) string {
	t.Helper()
	p, err := LookPath(install, name)
	if err != nil {
		SkipSuite(t, suite, install, "no "+name+" on PATH")
	}
	return p
}

// HangGuard bounds a wait for an event that a working test sees in milliseconds: a daemon
// ready, a process started or gone. It only keeps a broken test from hanging; it asserts
// nothing of speed, and is long enough for a machine loaded with a CPU hog on every core.
const HangGuard = time.Minute

// Scale stretches d, a bound a test puts on work it expects to be quick (the slack after a
// timeout, a refusal that must not wait for one), by how loaded the machine is as measured
// now: d × (1 + runnable tasks per CPU core), the runnable tasks being the larger of the
// 1-minute load average and those runnable this instant (/proc/loadavg). A quiet machine
// gives about d; a CPU hog on every core about 3 d. The bound still catches what it is
// there for (a hang, a wait for a timeout much longer than d) without asking that the
// machine be quiet. Without /proc/loadavg, d.
func Scale(d time.Duration) time.Duration {
	b, err := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if err != nil || len(f) < 4 {
		return d
	}
	load, _ := strconv.ParseFloat(f[0], 64)
	if r, _, ok := strings.Cut(f[3], "/"); ok {
		if n, err := strconv.Atoi(r); err == nil {
			load = max(load, float64(n))
		}
	}
	return time.Duration(float64(d) * (1 + load/float64(runtime.NumCPU())))
}

// SyncBuffer is a bytes.Buffer safe to read (String) while another goroutine writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Children are pid's children, found by scanning /proc for their parent PID: the children
// file of /proc/PID/task is not reliable while processes start.
func Children(pid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if n, err := strconv.Atoi(filepath.Base(filepath.Dir(s))); err == nil {
				kids = append(kids, n)
			}
		}
	}
	return kids
}

// ChildOf is one child of pid (0 when it has none yet).
func ChildOf(pid int) int {
	if kids := Children(pid); len(kids) > 0 {
		return kids[0]
	}
	return 0
}

// StartReady starts cmd, a program that writes "ready PID" on its stdout once in place, and
// returns that PID (the program's own, in whatever PID namespace it runs). It is killed when
// the test ends.
func StartReady(t testing.TB, cmd *exec.Cmd) int {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	pid, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "ready")))
	if !strings.HasPrefix(line, "ready") || err != nil {
		t.Fatalf("%s did not start: %q", filepath.Base(cmd.Path), line)
	}
	return pid
}

// WaitFor polls cond every 10 ms until it holds: a process's state in /proc (re-parented,
// turned zombie, its child started) has no event to wait on. The minute is no assertion of
// speed, only a bound on a test that would otherwise hang; a loaded machine takes seconds
// for what a quiet one does at once.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(HangGuard); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// StopGroup stops a daemon started in a process group of its own (pgid, its PID): SIGTERM to
// the group, SIGKILL five seconds later if done (closed once the daemon is reaped) is not
// closed by then; it returns once done is closed.
func StopGroup(pgid int, done <-chan struct{}) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
		return
	case <-time.After(5 * time.Second):
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
	<-done
}
