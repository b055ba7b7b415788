//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/gputriage/gputriage/internal/testenv"
)

// openPTY opens a real pseudo-terminal: the controlling side and the terminal a program reads.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	var n uint32
	unlock := int32(0)
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlocking the pty: %v", e)
	}
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("naming the pty: %v", e)
	}
	pts, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return ptm, pts
}

// At a terminal with nothing piped in, explain says what it waits for before it waits; then
// it explains what was typed once Ctrl-D ends it.
func TestExplainAtTerminalSaysItWaits(t *testing.T) {
	ptm, pts := openPTY(t)
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer errR.Close()
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		defer errW.Close()
		done <- run(context.Background(), []string{"explain"}, pts, &out, errW, func(string) string { return "" }, isTerminal)
	}()
	hint := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(errR).ReadString('\n')
		hint <- l
	}()
	select {
	case l := <-hint:
		if !strings.Contains(l, "paste the error text") || !strings.Contains(l, "Ctrl-D") || !strings.Contains(l, "--file") {
			t.Errorf("stderr says %q", l)
		}
	case <-time.After(testenv.HangGuard):
		t.Fatal("explain waits at a terminal without saying so")
	}
	if _, err := ptm.WriteString("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n\x04"); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitOK || !strings.Contains(out.String(), "torch-oom") {
			t.Errorf("exit %d:\n%s", code, out.String())
		}
	case <-time.After(testenv.HangGuard):
		t.Fatal("explain did not finish after Ctrl-D")
	}
}
