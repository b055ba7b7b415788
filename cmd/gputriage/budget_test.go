package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/triage"
)

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestHostBudget replays a saved sweep of eight hosts, each of which answered a well-formed
// capture with every section at the client's bound (31 MiB each). What the client keeps of
// each host once it is diagnosed (report.Host: the snapshot's report view and the result) is
// at most 256 KiB, and each host's part of a report, in every format, at most 512 KiB: the
// result folds what is beyond its bounds (and says so), so eight such hosts cost about as
// much as one. Before, they kept 2.0 GiB and made a 720 MiB JSON report.
func TestHostBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	const hosts = 8
	dir := t.TempDir()
	raw := simfleet.LimitCapture(parse.SectionNames()...)
	for i := range hosts {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("gpu%02d.capture", i)), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	raw = nil
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapAlloc
	hs, err := triage.Replay(dir, &triage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m)
	kept := int64(m.HeapAlloc) - int64(before)
	t.Logf("%d hosts at every section's bound: %d KiB kept in all after diagnosis", len(hs), kept>>10)
	if len(hs) != hosts {
		t.Fatalf("%d hosts, want %d", len(hs), hosts)
	}
	if kept > hosts*256<<10 {
		t.Errorf("%d KiB kept for %d hosts, want at most 256 KiB each", kept>>10, hosts)
	}
	for name, render := range map[string]func(io.Writer, []report.Host, report.Options) error{
		"text": report.Text, "markdown": report.Markdown, "json": report.JSON, "prometheus": report.Prometheus} {
		var w countWriter
		if err := render(&w, hs, report.Options{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s report: %d KiB", name, w.n>>10)
		if w.n > hosts*512<<10 {
			t.Errorf("%s report of %d hosts: %d KiB, want at most 512 KiB a host", name, hosts, w.n>>10)
		}
	}
	runtime.KeepAlive(hs)
}

// TestSweepMemoryInFlight sweeps eight hosts that each answer a well-formed capture with every
// section at the client's bound (31 MiB), over SSH, with the built CLI as a process of its own,
// at --fanout 1 and 4: its peak resident memory (rusage's, taken by peakRSS: a forked child's
// count starts from its own small copy, not from this test's memory) stays within
// the sweep's budget, --fanout hosts in flight at 64 MiB each plus 256 KiB kept per host and
// the process's base (triage.SweepMemoryLimit), with 32 MiB for what the runtime does not count
// (the binary's text, thread stacks). Before, --fanout 1 peaked at 301 MiB and --fanout 8 at
// 858 MiB (docs/performance.md).
func TestSweepMemoryInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	const hosts = 8
	dir := t.TempDir()
	fl, err := simfleet.Start(simfleet.Config{Hosts: hosts, Captures: [][]byte{simfleet.LimitCapture(parse.SectionNames()...)}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	bin := buildGputriage(t) // the binary a user runs, not this test binary (which links the labs)
	for _, fanout := range []int{1, 4} {
		args, _ := json.Marshal([]string{"-f", fl.HostsFile, "-F", fl.SSHConfig, "--fanout", strconv.Itoa(fanout), "--timeout", "5m", "--format", "json"})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var argv []string
		if err := json.Unmarshal(args, &argv); err != nil {
			t.Fatal(err)
		}
		hwm := filepath.Join(dir, "hwm")
		cmd := exec.CommandContext(ctx, "python3", append([]string{"-c", peakRSS, hwm, bin}, argv...)...)
		cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "USER=root"}
		var out countWriter
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		cancel()
		if cmd.ProcessState == nil {
			t.Fatalf("--fanout %d: %v", fanout, err)
		}
		if code := cmd.ProcessState.ExitCode(); code != exitOK && code != exitFindings {
			t.Fatalf("--fanout %d: exit %d: %s", fanout, code, errb.String())
		}
		kb, err := os.ReadFile(hwm)
		if err != nil {
			t.Skipf("the CLI's peak memory is not known (no /proc/self/status?): %v", err)
		}
		var rss int64
		if _, err := fmt.Sscanf(string(kb), "%d kB", &rss); err != nil {
			t.Fatalf("VmHWM %q: %v", kb, err)
		}
		rss <<= 10
		limit := triage.SweepMemoryLimit(fanout, hosts) + 32<<20
		t.Logf("--fanout %d: peak RSS %d MiB (budget %d MiB), JSON report %d KiB", fanout, rss>>20, limit>>20, out.n>>10)
		if out.n < hosts<<10 {
			t.Errorf("--fanout %d: a report of %d bytes for %d hosts", fanout, out.n, hosts)
		}
		if rss > limit {
			t.Errorf("--fanout %d: peak RSS %d MiB, want at most %d MiB", fanout, rss>>20, limit>>20)
		}
	}
}

// peakRSS is python3 -c peakRSS HWM PROGRAM ARG...: it runs PROGRAM in a child of its own
// (fork, then exec: the child's peak is counted from python's copy, not from the Go test's,
// which os/exec's vfork would share) and writes the child's peak resident memory ("N kB") to
// HWM, exiting with the child's status.
const peakRSS = `import os, sys
hwm, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, ru = os.wait4(pid, 0)
open(hwm, "w").write("%d kB" % ru.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
`
