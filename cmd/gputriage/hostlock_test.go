package main

import (
	"os"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// TestMain runs this package's tests holding the lock of the packages whose tests see the
// whole machine (testenv.RunHostExclusive). The test binary run again as the CLI (runAsCLI)
// is a child of a test that holds the lock: it must not wait for it.
func TestMain(m *testing.M) {
	if os.Getenv("GPUTRIAGE_TEST_CLI") != "" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.RunHostExclusive(m))
}
