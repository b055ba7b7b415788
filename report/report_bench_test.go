package report_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
)

func benchHost(b *testing.B, name string, raw []byte) report.Host {
	b.Helper()
	snap, err := parse.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(0, 0)
	if snap.Host.Time != nil {
		now = *snap.Host.Time
	}
	return report.Host{Name: name, Snapshot: snap, Result: diagnose.Diagnose(snap, now), Capture: raw}
}

// BenchmarkReport renders, in each format, a report of all five fixtures (one host each), a
// 1,000-host fleet report (the fixtures round robin) and the synthetic crowded host.
func BenchmarkReport(b *testing.B) {
	files, err := filepath.Glob("../fixtures/*.capture")
	if err != nil || len(files) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	var fixtures []report.Host
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		fixtures = append(fixtures, benchHost(b, strings.TrimSuffix(filepath.Base(f), ".capture"), raw))
	}
	fleet := make([]report.Host, 1000)
	for i := range fleet {
		fleet[i] = fixtures[i%len(fixtures)]
	}
	inputs := []struct {
		name  string
		hosts []report.Host
	}{
		{"fixtures", fixtures},
		{"fleet-1000", fleet},
		{"synthetic-5000x100000", []report.Host{benchHost(b, "synthetic", simfleet.SyntheticCapture(5000, 100000))}},
	}
	formats := []struct {
		name string
		fn   func(io.Writer, []report.Host, report.Options) error
	}{{"text", report.Text}, {"markdown", report.Markdown}, {"json", report.JSON}}
	for _, in := range inputs {
		for _, f := range formats {
			b.Run(f.name+"/"+in.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := f.fn(io.Discard, in.hosts, report.Options{Width: 100}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
