package probe_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

const testNonce = "0123456789abcdef0123456789abcdef"

func dur(d time.Duration) *time.Duration { return &d }

// is says whether p is known and holds v.
func is[T comparable](p *T, v T) bool { return p != nil && *p == v }

// slurmTestdata is the path of a Slurm recording kept with parse's tests (parse/testdata/slurm).
func slurmTestdata(name string) string {
	return filepath.Join("..", "parse", "testdata", "slurm", name)
}

// slurmRecording is the text of a Slurm recording of parse/testdata/slurm.
func slurmRecording(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(slurmTestdata(name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
