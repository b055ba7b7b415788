//go:build !linux

package testenv

import "syscall"

// DieWithTest: only Linux kills a child with its parent; group still puts it in a process
// group of its own (StopGroup).
func DieWithTest(group bool) *syscall.SysProcAttr {
	if !group {
		return nil
	}
	return &syscall.SysProcAttr{Setpgid: true}
}
