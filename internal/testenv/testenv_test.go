package testenv

import (
	"fmt"
	"testing"
)

// recorder is a testing.TB that notes what Skip and Fatal were told.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Skip(args ...any)          { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any)         { r.fatal = fmt.Sprint(args...) }
func (r *recorder) Fatalf(f string, a ...any) { r.Fatal(fmt.Sprintf(f, a...)) }

// A suite skipped for a missing program says so in words scripts/test's summary reads back
// (suite and install line), and fails under CI; $GPUTRIAGE_TEST_ABSENT makes an installed
// program missing, so that a run simulates a machine without it.
func TestSkipSuite(t *testing.T) {
	t.Setenv("CI", "")
	t.Setenv(AbsentEnv, "coreutils,other")
	r := &recorder{}
	if p := Need(r, "coreutils", "apt-get install coreutils", "true"); p != "" || r.skipped == "" {
		t.Fatalf("Need found %q with coreutils absent (skip %q)", p, r.skipped)
	}
	if suite, install, ok := ParseSkip("    x_test.go:9: " + r.skipped); !ok || suite != "coreutils" || install != "apt-get install coreutils" {
		t.Errorf("%q reads back as %q %q %v", r.skipped, suite, install, ok)
	}
	t.Setenv(AbsentEnv, "")
	if p := Need(&recorder{}, "coreutils", "apt-get install coreutils", "true"); p == "" {
		t.Error("Need did not find true")
	}
	t.Setenv("CI", "true")
	r = &recorder{}
	SkipSuite(r, "Slurm", "apt-get install slurmd", "needs slurmd")
	if r.fatal == "" {
		t.Errorf("under CI: fatal %q, skipped %q", r.fatal, r.skipped)
	}
}
