//go:build !unix

package sshexec

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

// signalGroup can only kill the command itself where there are no process groups.
func signalGroup(p *os.Process, _ bool) { _ = p.Kill() }

func startFdpass(context.Context, string, string) (net.Conn, *proxyProc, error) {
	return nil, nil, errors.New("ProxyUseFdpass is not supported on this system")
}
