// Command budget measures what a sweep of hosts that each answer a well-formed capture with
// every section at the client's bound (simfleet.LimitCapture, 31 MiB) costs the client: it
// serves such a capture from simulated hosts over real SSH (internal/simfleet), runs the real
// CLI against them (--format json) at several fanouts, and prints the client's wall time, peak
// RSS (from its rusage) and the report's size.
//
// Run from the repository root:
//
//	go build -o /tmp/gputriage ./cmd/gputriage && go run ./bench/budget -bin /tmp/gputriage
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

func main() {
	bin := flag.String("bin", "", "the gputriage binary to measure")
	hosts := flag.Int("hosts", 8, "hosts in the fleet")
	fanouts := flag.String("fanouts", "1,8", "fanouts to run, comma-separated")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "usage: budget -bin PATH [-hosts N] [-fanouts 1,8]")
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "gputriage-budget-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	raw := simfleet.LimitCapture(parse.SectionNames()...)
	fl, err := simfleet.Start(simfleet.Config{Hosts: *hosts, Captures: [][]byte{raw}, Dir: dir})
	if err != nil {
		panic(err)
	}
	defer fl.Close()
	fmt.Printf("%d hosts, each answering %d KiB (every section at the client's bound)\n", *hosts, len(raw)>>10)
	for _, f := range strings.Split(*fanouts, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			panic(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		cmd := exec.CommandContext(ctx, *bin, "-f", fl.HostsFile, "-F", fl.SSHConfig, "--fanout", strconv.Itoa(n),
			"--timeout", "10m", "--format", "json")
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "USER=root"}
		var out countWriter
		cmd.Stdout, cmd.Stderr = &out, io.Discard
		start := time.Now()
		if err := cmd.Start(); err != nil {
			panic(err)
		}
		hwm := make(chan int64)
		go func() { hwm <- peakOf(ctx, cmd.Process.Pid) }()
		err = cmd.Wait()
		cancel()
		fmt.Printf("--fanout %d: exit %v, %s, peak RSS %d MiB, JSON report %d KiB (%d KiB a host)\n",
			n, err, time.Since(start).Round(100*time.Millisecond), <-hwm>>10, out.n>>10, out.n / *hosts >> 10)
	}
}

// peakOf follows the peak resident memory of process pid (VmHWM, in KiB) until ctx ends or
// the process is gone, reading it every 10 ms. rusage's peak would count this program's own
// memory too: the child shares it until its exec, and the kernel keeps that peak across it.
func peakOf(ctx context.Context, pid int) int64 {
	var peak int64
	for ctx.Err() == nil {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			break
		}
		for l := range strings.Lines(string(status)) {
			var kb int64
			if _, err := fmt.Sscanf(l, "VmHWM: %d kB", &kb); err == nil {
				peak = max(peak, kb)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return peak
}
