package testenv

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// RunHostExclusive runs a package's tests (m.Run, from its TestMain) holding a lock that
// every package whose tests see this whole machine takes: those that stage GPU-holding
// processes on it (boxes whose /dev/nvidiaN read as such from outside) and those that probe it
// whole and judge what they find (a fix lab's plan, the probe's tests). Run beside each other
// by go test, each would see the other's processes: a library situation's orphaned workers are
// leftovers, rightly, to a fix lab that probes the host. Other packages run alongside as ever.
func RunHostExclusive(m *testing.M) int {
	path := filepath.Join(os.TempDir(), "gputriage-host-tests.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644) // flock needs no write access: one user's lock file serves another
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v: running without the host lock\n", err)
		return m.Run()
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: lock %s: %v: running without it\n", path, err)
	}
	return m.Run()
}

// RunHostExclusiveLive is RunHostExclusive for a package whose every test that stages on or
// judges the whole machine is a live one, skipped under go test -short (SkipShort): then it
// runs without the lock, so that the inner loop does not wait for another package's live
// tests only to skip its own.
func RunHostExclusiveLive(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	return RunHostExclusive(m)
}
