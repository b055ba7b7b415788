// Command sshbare is the bare SSH floor of a sweep, for bench/fleet: a plain
// golang.org/x/crypto/ssh client, without sshexec, doing per host what a sweep cannot do with
// less: dial, the same key exchange (x/crypto's defaults, as sshexec), the Ed25519 host key
// checked against the fleet's known_hosts file (x/crypto/ssh/knownhosts, read once), publickey
// authentication with the fleet's key, one session running `sh -s` with the probe's two
// nvidia-smi queries on stdin, and stdout read to its end (at most 64 KiB, as far as gputriage
// reads a host that sends no capture, so that a host sending 50 MiB costs both the same).
// Every phase is bounded by the per-host deadline, which closes the connection.
//
//	sshbare -dir DIR [-fanout 64] [-timeout 10s]
//
// It prints how many hosts answered; bench/fleet takes its CPU from its rusage.
package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/gputriage/gputriage/internal/simfleet"
)

// queries is what the shell is fed: the probe's two nvidia-smi queries (bench/vspdsh's).
const queries = "nvidia-smi --query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,compute_mode,driver_version,memory.reserved,mig.mode.current --format=csv,nounits\n" +
	"nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,nounits\n"

const maxOutput = 64 << 10

func main() {
	a := simfleet.ParseClientArgs("sshbare")
	cfg, err := clientConfig(a.Dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sshbare:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	answered := 0
	slots := make(chan struct{}, a.Fanout)
	var wg sync.WaitGroup
	for _, h := range a.Hosts {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if err := probe(cfg, net.JoinHostPort(h.Addr, strconv.Itoa(h.Port)), a.Timeout); err == nil {
				mu.Lock()
				answered++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	fmt.Printf("%d of %d hosts answered\n", answered, len(a.Hosts))
}

// clientConfig reads the fleet's key and known_hosts once for every host.
func clientConfig(dir string) (*ssh.ClientConfig, error) {
	pem, err := os.ReadFile(filepath.Join(dir, "id_ed25519"))
	if err != nil {
		return nil, err
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, err
	}
	check, err := knownhosts.New(filepath.Join(dir, "known_hosts"))
	if err != nil {
		return nil, err
	}
	return &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: check, HostKeyAlgorithms: []string{ssh.KeyAlgoED25519}}, nil
}

// probe runs the queries on one host and reads its output; the deadline closes the connection.
func probe(cfg *ssh.ClientConfig, addr string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	c, chans, reqs, err := ssh.NewClientConn(conn, addr, cfg)
	if err != nil {
		return err
	}
	client := ssh.NewClient(c, chans, reqs)
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		return err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := sess.StdoutPipe()
	if err != nil {
		return err
	}
	if err := sess.Start("sh -s"); err != nil {
		return err
	}
	go func() {
		_, _ = io.WriteString(stdin, queries)
		_ = stdin.Close()
	}()
	n, err := io.Copy(io.Discard, io.LimitReader(stdout, maxOutput+1))
	if err != nil {
		return err
	}
	if n > maxOutput {
		return fmt.Errorf("more than %d bytes of output", maxOutput)
	}
	return sess.Wait()
}
