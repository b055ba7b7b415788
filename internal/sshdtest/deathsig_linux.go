package sshdtest

import "syscall"

// dieWithParent makes a child die with the test binary (go test's -timeout kills it).
func dieWithParent() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
