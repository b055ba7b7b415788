//go:build !linux

package sshdtest

import "syscall"

// dieWithParent: only Linux has a parent-death signal (and sshdtest's namespaces).
func dieWithParent() *syscall.SysProcAttr { return nil }
