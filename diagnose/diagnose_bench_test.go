package diagnose_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

// BenchmarkDiagnose diagnoses every fixture's snapshot and the synthetic crowded host's
// (parsing is outside the timed loop).
func BenchmarkDiagnose(b *testing.B) {
	files, err := filepath.Glob("../fixtures/*.capture")
	if err != nil || len(files) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	raws := map[string][]byte{"synthetic-5000x100000": simfleet.SyntheticCapture(5000, 100000)}
	names := []string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		n := strings.TrimSuffix(filepath.Base(f), ".capture")
		raws[n] = raw
		names = append(names, n)
	}
	names = append(names, "synthetic-5000x100000")
	for _, n := range names {
		snap, err := parse.Parse(raws[n])
		if err != nil {
			b.Fatal(err)
		}
		now := time.Unix(0, 0)
		if snap.Host.Time != nil {
			now = *snap.Host.Time
		}
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				diagnose.Diagnose(snap, now)
			}
		})
	}
}
