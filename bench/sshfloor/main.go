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
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/sshexec"
)

func main() {
	dir := flag.String("dir", "", "the fleet's directory (simfleetd -dir)")
	fanout := flag.Int("fanout", 64, "hosts at once")
	timeout := flag.Duration("timeout", 10*time.Second, "per-host deadline")
	flag.Parse()
	hosts, err := simfleet.ReadManifest(filepath.Join(*dir, "manifest.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sshfloor:", err)
		os.Exit(2)
	}
	targets := make([]sshexec.Target, len(hosts))
	for i, h := range hosts {
		targets[i] = sshexec.Target{Name: h.Name, HostName: h.Addr, Port: h.Port, User: "root",
			IdentityFiles: []string{filepath.Join(*dir, "id_ed25519")}, IdentitiesOnly: true,
			KnownHostsFiles: []string{filepath.Join(*dir, "known_hosts")}}
	}
	answered := 0
	for _, r := range sshexec.Run(context.Background(), targets, sshexec.Options{
		Command: "nvidia-smi", Fanout: *fanout, Timeout: *timeout, MaxOutput: 64 << 10}) {
		if r.Err == nil {
			answered++
		}
	}
	fmt.Printf("%d of %d hosts answered\n", answered, len(hosts))
}
