package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
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
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("gpu%02d%s", i, captureExt)), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	raw = nil
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := m.HeapAlloc
	hs, err := replayDir(dir, triager{})
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
