package k8stest

import "syscall"

// deathsig puts a daemon in a process group of its own (Stop signals the group) and makes it
// die with the test binary (go test's -timeout kills it).
func deathsig() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
