// Command nodecheck measures what `gputriage node-check` costs on an idle node, and which part
// of it costs what. An idle node is a private PID and mount namespace (its own /proc, holding a
// handful of processes, and an empty /dev/shm) with a fake nvidia-smi serving an idle 8-GPU
// host. Each variant runs RUNS times (default 21), alternating; it prints the median wall time
// and CPU time (user+sys of the process and every process it waited for, from wait4) of:
//
//	floor       unshare + mount + sh -c true: the namespace set-up, paid by every variant
//	smi         the fake nvidia-smi's two queries (a real nvidia-smi costs what the driver does)
//	go-start    gputriage --version: the Go runtime's start and exit
//	probe       the probe alone: sh -s with the probe script, as node-check runs it
//	full        gputriage node-check --full-probe: probe, parse, diagnose, judge
//	node-check  gputriage node-check: the idle gate (nvidia-smi's two queries, /proc's fds
//	            and maps, /dev/shm), which proves this node clean without the probe
//
// Usage (root): go build -o /tmp/gputriage ./cmd/gputriage && go run ./bench/nodecheck /tmp/gputriage [RUNS]
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/probe"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodecheck GPUTRIAGE-BINARY [RUNS]")
		os.Exit(2)
	}
	bin, runs := os.Args[1], 21
	if len(os.Args) > 2 {
		runs, _ = strconv.Atoi(os.Args[2])
	}
	dir, err := os.MkdirTemp("", "gputriage-nodecheck-bench-")
	check(err)
	defer os.RemoveAll(dir)
	var gpus []scenario.GPU
	for i := 0; i < 8; i++ {
		gpus = append(gpus, scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-0000000%d-1111-2222-3333-444444444444", i),
			Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			TotalMiB: 81559, UsedMiB: 1, ReservedMiB: 532, Driver: "550.90.07"})
	}
	check(scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: gpus}))
	probeIn := filepath.Join(dir, "probe.in")
	check(os.WriteFile(probeIn, probe.Input("0123456789abcdef0123456789abcdef", 12), 0o600))
	smi := filepath.Join(dir, "nvidia-smi")
	variants := []struct{ name, cmd string }{
		{"floor", "true"},
		{"smi", smi + " --query-gpu=index,memory.used --format=csv,nounits >/dev/null; " + smi + " --query-compute-apps=pid,used_memory --format=csv,nounits >/dev/null"},
		{"go-start", bin + " --version >/dev/null"},
		{"probe", "sh -s <" + probeIn + " >/dev/null"},
		{"full", bin + " node-check --full-probe >/dev/null"},
		{"node-check", bin + " node-check >/dev/null"},
	}
	// The gated row must be the gate's answer, not the probe's: -v says which ran.
	if out := run(dir, bin+" node-check -v 2>&1 >/dev/null"); !strings.Contains(out, "idle gate: clean") {
		fmt.Fprintf(os.Stderr, "node-check did not take the idle gate on the idle node: %s", out)
		os.Exit(1)
	}
	fmt.Printf("load average at the start: %s", loadavg())
	wall := map[string][]time.Duration{}
	cpu := map[string][]time.Duration{}
	for i := 0; i < runs; i++ {
		for _, v := range variants {
			w, c := measure(dir, v.cmd)
			wall[v.name] = append(wall[v.name], w)
			cpu[v.name] = append(cpu[v.name], c)
		}
	}
	fmt.Printf("%d runs each, load average at the end: %s", runs, loadavg())
	fmt.Printf("%-11s %10s %10s\n", "variant", "wall ms", "CPU ms")
	for _, v := range variants {
		fmt.Printf("%-11s %10.1f %10.1f\n", v.name, ms(median(wall[v.name])), ms(median(cpu[v.name])))
	}
}

// run runs cmd once on an idle node and returns what it printed.
func run(dir, cmd string) string {
	c := idleNode(dir, cmd)
	out, _ := c.CombinedOutput()
	return string(out)
}

// idleNode is cmd to run on an idle node: a new PID and mount namespace with its own /proc
// and an empty /dev/shm, the fake nvidia-smi first on PATH.
func idleNode(dir, cmd string) *exec.Cmd {
	c := exec.Command("unshare", "-p", "-m", "-f", "--mount-proc", "sh", "-c",
		"mount -t tmpfs -o size=1g tmpfs /dev/shm && "+cmd)
	c.Env = []string{"PATH=" + dir + ":/usr/sbin:/usr/bin:/sbin:/bin", "SLURMD_NODENAME=node1"}
	return c
}

// measure runs cmd on an idle node and returns its wall and CPU time.
func measure(dir, cmd string) (wall, cpu time.Duration) {
	c := idleNode(dir, cmd)
	start := time.Now()
	out, err := c.CombinedOutput()
	wall = time.Since(start)
	if err != nil && cmd != "true" {
		// node-check exits 0 on a clean node; anything else is a broken measurement.
		fmt.Fprintf(os.Stderr, "%s: %v\n%s", cmd, err, out)
		os.Exit(1)
	}
	u := c.ProcessState.SysUsage().(*syscall.Rusage)
	return wall, time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return string(b)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
