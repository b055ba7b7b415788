//go:build unix

package sshexec

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"
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

// startFdpass runs command as ssh runs a ProxyCommand under ProxyUseFdpass: its stdin and
// stdout are one end of a socket pair, over which it hands back a connected socket; like ssh,
// gputriage then waits for it to exit and speaks SSH over that socket. ctx bounds the wait.
// The returned proxyProc, when not nil, has to be stopped by the caller, also on error.
func startFdpass(ctx context.Context, command, shell string) (net.Conn, *proxyProc, error) {
	syscall.ForkLock.RLock() // no other command may inherit the pair before it is close-on-exec
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "fdpass"), os.NewFile(uintptr(fds[1]), "fdpass")
	p, err := startProc(command, shell, theirs, theirs)
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, nil, err
	}
	conn, err := receiveConn(ctx, ours)
	ours.Close()
	if err != nil {
		return nil, p, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		conn.Close()
		return nil, p, fmt.Errorf("the ProxyCommand passed a socket but did not exit: %w", ctx.Err())
	}
	return conn, p, nil
}

// receiveConn reads the one socket a ProxyCommand passes over f (SCM_RIGHTS).
func receiveConn(ctx context.Context, f *os.File) (net.Conn, error) {
	c, err := net.FileConn(f)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return nil, errors.New("ProxyUseFdpass: not a unix socket")
	}
	stop := context.AfterFunc(ctx, func() { _ = uc.SetReadDeadline(time.Now()) })
	defer stop()
	buf, oob := make([]byte, 1), make([]byte, syscall.CmsgSpace(4*4))
	_, oobn, _, _, err := uc.ReadMsgUnix(buf, oob)
	if err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("the ProxyCommand passed no socket (%v)", err)
	}
	msgs, _ := syscall.ParseSocketControlMessage(oob[:oobn])
	var got []int
	for i := range msgs {
		if rights, err := syscall.ParseUnixRights(&msgs[i]); err == nil {
			got = append(got, rights...)
		}
	}
	if len(got) == 0 {
		return nil, errors.New("the ProxyCommand passed no socket")
	}
	for _, extra := range got[1:] {
		_ = syscall.Close(extra)
	}
	sf := os.NewFile(uintptr(got[0]), "proxied")
	defer sf.Close()
	return net.FileConn(sf)
}
