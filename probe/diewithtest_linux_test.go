package probe_test

import "syscall"

// dieWithTest makes a process the test starts die with the test binary: a test killed by go
// test's -timeout leaves no stray process holding the live-test lock or the tester's pipes.
func dieWithTest() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
