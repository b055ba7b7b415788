package sshdtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// Stop returns once the sshd is gone: its namespace's init exited and its address closed, so
// that the next test's sshd on the same address (each fix lab's is 127.0.0.177:2377) binds
// it, rather than exit while the old one still answers there. A host whose processes keep
// the namespace's init busy dying (a python holding /dev/shm) makes the window wide on a
// loaded machine: a lingering sshd once failed the next lab with "no namespace init under
// unshare" or a server that "did not become ready in 20s".
func TestStopFreesAddress(t *testing.T) {
	SSHDPath(t)
	dir := t.TempDir()
	_, pub := UserKey(t, dir, "ed25519")
	addr := net.JoinHostPort("127.0.0.60", "2210")
	for i := range 5 {
		s := Start(t, Config{Name: "again", Addr: "127.0.0.60", Port: 2210, AuthorizedKeys: []string{pub}})
		init := testenv.ChildOf(s.cmd.Process.Pid)
		if init == 0 {
			t.Fatalf("round %d: no sshd under unshare", i)
		}
		// Something in the namespace to take down with it, as a lab's servers are.
		args := append(s.Enter(t), "sh", "-c", "sleep 600 & sleep 600 & wait")
		held := exec.Command(args[0], args[1:]...)
		if err := held.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { held.Process.Kill(); held.Wait() })
		s.Stop()
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("round %d: %s still answers after Stop", i, addr)
		}
		if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", init)); err == nil && !bytes.Contains(stat, []byte(") Z ")) {
			t.Fatalf("round %d: sshd %d still runs after Stop: %s", i, init, stat)
		}
	}
}
