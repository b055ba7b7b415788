//go:build !unix

package sshexec

import (
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

// signalGroup can only kill the command itself where there are no process groups.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }
