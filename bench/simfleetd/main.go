// Command simfleetd serves a simulated fleet of GPU hosts (internal/simfleet) in its own
// process, so that a benchmark charges the server's CPU to the server, not to the client.
//
//	simfleetd -hosts 1000 -rtt 50ms -bad 0.1 -run-probe -dir /tmp/fleet
//	simfleetd -hosts 64 -rtt 10ms -host-time 150ms -dir /tmp/fleet
//
// It writes hosts, ssh_config, known_hosts, id_ed25519 and manifest.json into -dir, prints
// "ready DIR" on stdout, and serves until its stdin closes, it gets SIGINT or SIGTERM, or
// -lifetime passes, whichever comes first.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
)

func main() { os.Exit(run()) }

func run() int {
	hosts := flag.Int("hosts", 100, "number of simulated hosts")
	rtt := flag.Duration("rtt", 50*time.Millisecond, "simulated round-trip time")
	bad := flag.Float64("bad", 0, "share of misbehaving hosts (0..1)")
	dir := flag.String("dir", "", "directory for the client files (required)")
	fixtures := flag.String("fixtures", "fixtures/*.capture", "captures to serve (glob)")
	lifetime := flag.Duration("lifetime", 10*time.Minute, "stop after this long in any case")
	hostTime := flag.Duration("host-time", 0, "host-side time before each host answers")
	runProbe := flag.Bool("run-probe", false, "answer the probe by running it here (sh, this machine's /proc, a fake idle 8-GPU nvidia-smi), once per distinct input")
	garbage := flag.Int("garbage-bytes", 50<<20, "bytes a garbage host sends")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "simfleetd: -dir is required")
		return 2
	}
	files, err := filepath.Glob(*fixtures)
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "simfleetd: no captures match %s\n", *fixtures)
		return 2
	}
	var caps [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(os.Stderr, "simfleetd: %v\n", err)
			return 2
		}
		caps = append(caps, b)
	}
	cfg := simfleet.Config{Hosts: *hosts, RTT: *rtt, BadShare: *bad, Captures: caps, Dir: *dir,
		HostTime: *hostTime, RunProbe: *runProbe, GarbageBytes: *garbage}
	if *runProbe {
		cfg.SMIDir = filepath.Join(*dir, "smi")
		if err := simfleet.WriteIdleSMI(cfg.SMIDir); err != nil {
			fmt.Fprintf(os.Stderr, "simfleetd: %v\n", err)
			return 1
		}
	}
	fl, err := simfleet.Start(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "simfleetd: %v\n", err)
		return 1
	}
	defer fl.Close()
	fmt.Printf("ready %s\n", *dir)

	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-stdinClosed:
	case <-sig:
	case <-time.After(*lifetime):
		fmt.Fprintln(os.Stderr, "simfleetd: lifetime over, stopping")
	}
	return 0
}
