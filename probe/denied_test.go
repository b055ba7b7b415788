//go:build linux

package probe_test

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// TestProbeNamesDeniedPIDs runs the real probe as user nobody, who may not read other users'
// fd directories, in a box of its own (inBox) beside two processes of root's: the namespace's
// init (sh) and a sleep. The fds section's denied line counts what could not be read and names
// exactly those two PIDs, never one nobody may read, such as the probe's own. The namespace keeps
// other tests' processes out, so a PID that changes owner or is reused mid-scan cannot reach it.
func TestProbeNamesDeniedPIDs(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	smiDir := t.TempDir()
	if err := os.Chmod(smiDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{}); err != nil {
		t.Fatal(err)
	}
	// PID 1 is root's sh, PID 2 its mount of /dev/shm (gone by the scan), PID 3 root's sleep;
	// the probe runs as nobody from PID 4 on. The sh waits for the probe, so PID 1 lives
	// through the whole scan.
	box := "sleep 3600 &\nsetpriv --reuid=65534 --regid=65534 --clear-groups sh -s\n"
	raw := inBox(t, smiDir, "set -- 0123456789abcdef0123456789abcdef\n"+probe.Script, box)
	s, err := parse.Parse(raw)
	if s == nil {
		t.Fatalf("parse: %v", err)
	}
	d := s.FDsDenied
	if d == nil || fmt.Sprint(d.PIDs) != "[1 3]" || d.Links < 2 {
		t.Fatalf("denied %+v: want the links of root's PIDs 1 and 3, and no other PID", d)
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
