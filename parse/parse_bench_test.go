package parse_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

// BenchmarkParse parses every fixture and a synthetic capture of a crowded host (5,000
// processes holding /dev/nvidia*, 100,000 entries under /dev/shm). docs/performance.md has
// the figures and the command.
func BenchmarkParse(b *testing.B) {
	files, err := filepath.Glob("../fixtures/*.capture")
	if err != nil || len(files) == 0 {
		b.Fatalf("no fixtures: %v", err)
	}
	type input struct {
		name string
		raw  []byte
	}
	var inputs []input
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		inputs = append(inputs, input{strings.TrimSuffix(filepath.Base(f), ".capture"), raw})
	}
	inputs = append(inputs, input{"synthetic-5000x100000", simfleet.SyntheticCapture(5000, 100000)})
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in.raw)))
			for b.Loop() {
				if _, err := parse.Parse(in.raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
