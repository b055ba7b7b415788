package testenv

import "syscall"

// DieWithTest is the SysProcAttr of a process a test starts (a daemon, a victim): it dies with
// the test binary, so a test killed by go test's -timeout leaves nothing holding a lock, a
// port or the tester's pipes; group also puts it in a process group of its own (StopGroup).
func DieWithTest(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group, Pdeathsig: syscall.SIGKILL}
}
