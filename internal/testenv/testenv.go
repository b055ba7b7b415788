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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Programs finds each of names on PATH, else in dirs, and returns their paths by name. When
// one is missing the suite skips, saying so and how to install it, except under CI
// (CI=true), where a missing program is a broken .ci/run and fails.
func Programs(t testing.TB, suite, install string, names, dirs []string) map[string]string {
	t.Helper()
	found := map[string]string{}
	var missing []string
	for _, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
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
		msg := fmt.Sprintf("the %s suite needs %s: %s", suite, strings.Join(missing, ", "), install)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPING the " + suite + " suite: " + msg)
	}
	return found
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
// turned zombie, its child started) has no event to wait on. The 20 s are no assertion of
// speed, only a bound on a test that would otherwise hang.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
