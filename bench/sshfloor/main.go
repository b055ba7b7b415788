// Command sshfloor is the SSH floor of a sweep, for bench/fleet: it runs one command on every
// host of a simfleetd fleet through sshexec, the same SSH client as gputriage, with nothing
// else: no probe input, no parsing, no diagnosis, no report. The command runs nvidia-smi, which
// simfleetd hosts answer with a few KiB of recorded output after their host-side time; output
// is read up to 64 KiB, as far as gputriage reads a host that sends no capture.
//
//	sshfloor -dir DIR [-fanout 64] [-timeout 10s]
//
// It prints how many hosts answered; bench/fleet takes its CPU from its rusage.
package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/sshexec"
)

func main() {
	a := simfleet.ParseClientArgs("sshfloor")
	targets := make([]sshexec.Target, len(a.Hosts))
	for i, h := range a.Hosts {
		targets[i] = sshexec.Target{Name: h.Name, HostName: h.Addr, Port: h.Port, User: "root",
			IdentityFiles: []string{filepath.Join(a.Dir, "id_ed25519")}, IdentitiesOnly: true,
			KnownHostsFiles: []string{filepath.Join(a.Dir, "known_hosts")}}
	}
	answered := 0
	for _, r := range sshexec.Run(context.Background(), targets, sshexec.Options{
		Command: "nvidia-smi", Fanout: a.Fanout, Timeout: a.Timeout, MaxOutput: 64 << 10}) {
		if r.Err == nil {
			answered++
		}
	}
	fmt.Printf("%d of %d hosts answered\n", answered, len(a.Hosts))
}
