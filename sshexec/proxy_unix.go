//go:build unix

package sshexec

import (
	"os"
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command in a process group of its own, so that everything it
// starts can be ended with it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup sends the command's process group SIGHUP (what ssh sends its ProxyCommand), or
// SIGKILL when hard.
func signalGroup(p *os.Process, hard bool) {
	sig := syscall.SIGHUP
	if hard {
		sig = syscall.SIGKILL
	}
	_ = syscall.Kill(-p.Pid, sig)
}
