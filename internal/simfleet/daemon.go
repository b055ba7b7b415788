package simfleet

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Daemon is a running bench/simfleetd: the simulated fleet in a process of its own, so that
// its CPU is not the measured client's. It serves until Stop closes its standard input.
type Daemon struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// StartDaemon starts the simfleetd binary at bin with args and waits, at most a minute, for
// the "ready" line it prints once every host listens.
func StartDaemon(bin string, args ...string) (*Daemon, error) {
	cmd := exec.Command(bin, args...)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, os.Stderr
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, err
	}
	pw.Close()
	d := &Daemon{cmd: cmd, stdin: in}
	ready := make(chan error, 1)
	go func() {
		defer pr.Close()
		var out bytes.Buffer
		buf := make([]byte, 256)
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			if bytes.Contains(out.Bytes(), []byte("ready")) {
				ready <- nil
				return
			}
			if err != nil {
				ready <- fmt.Errorf("simfleetd exited before it was ready: %s", out.String())
				return
			}
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			d.Stop()
			return nil, err
		}
	case <-time.After(time.Minute):
		d.Stop()
		return nil, errors.New("simfleetd not ready within a minute")
	}
	return d, nil
}

// PID is the daemon's process ID.
func (d *Daemon) PID() int { return d.cmd.Process.Pid }

// Stop closes the daemon's standard input, which ends it, and kills it if it has not exited
// ten seconds later.
func (d *Daemon) Stop() {
	_ = d.stdin.Close()
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

// ClientArgs are what a bench client of a running fleet is given (bench/sshfloor,
// bench/sshbare): -dir DIR [-fanout 64] [-timeout 10s], and the fleet's hosts read from it.
type ClientArgs struct {
	Dir     string
	Fanout  int
	Timeout time.Duration
	Hosts   []Host
}

// ParseClientArgs parses the command line of such a client and reads the fleet's manifest;
// it exits with status 2, naming prog, when it cannot.
func ParseClientArgs(prog string) ClientArgs {
	var a ClientArgs
	flag.StringVar(&a.Dir, "dir", "", "the fleet's directory (simfleetd -dir)")
	flag.IntVar(&a.Fanout, "fanout", 64, "hosts at once")
	flag.DurationVar(&a.Timeout, "timeout", 10*time.Second, "per-host deadline")
	flag.Parse()
	hosts, err := ReadManifest(filepath.Join(a.Dir, "manifest.json"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(2)
	}
	a.Hosts = hosts
	return a
}
