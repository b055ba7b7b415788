package probe_test

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// boxShm gives the box a /dev/shm of its own: no other test's or job's file reaches it.
const boxShm = "mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm || exit 97\n"

// inBox runs script (sh, with args as $1...) as PID 1 of a PID and mount namespace of its
// own, with /proc of that namespace and an empty /dev/shm (a tmpfs) mounted first: the probe
// run in it sees only the processes and /dev/shm files the test made, so what another test
// package or CI job does on this machine meanwhile (processes that come, go, change owner or
// reuse a PID; files in /dev/shm; processes in cgroups of units) cannot reach the capture.
// Cgroups are the host's: a process the box moves into one is read there. stdin feeds the
// script; it returns its stdout, and fails the test when the script fails. Root only
// (canBox).
func inBox(t *testing.T, smiDir, stdin, script string, args ...string) []byte {
	t.Helper()
	if !canBox() {
		t.Skip("needs root, setpriv and unshare (Linux): the probe runs in a box of its own")
	}
	argv := append([]string{"-p", "-m", "-f", "--kill-child", "--propagation", "private", "--mount-proc",
		"sh", "-c", boxShm + script, "sh"}, args...)
	cmd := exec.Command("unshare", argv...)
	cmd.SysProcAttr = testenv.DieWithTest(false)
	cmd.Dir = "/"
	cmd.Env = os.Environ()
	if smiDir != "" {
		cmd.Env = append(cmd.Env, "PATH="+smiDir+":"+os.Getenv("PATH"))
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("box: %v: %s", err, stderr.String())
	}
	return out
}

// canBox: this test may make a box (inBox) and run processes as another user in it.
func canBox() bool {
	for _, prog := range []string{"unshare", "setpriv"} {
		if _, err := exec.LookPath(prog); err != nil {
			return false
		}
	}
	return os.Getuid() == 0 && runtime.GOOS == "linux"
}
