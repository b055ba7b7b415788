//go:build !linux

package k8stest

import "syscall"

// deathsig puts a daemon in a process group of its own; only Linux kills it with the test
// binary.
func deathsig() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
