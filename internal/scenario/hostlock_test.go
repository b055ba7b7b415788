package scenario_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// TestMain runs this package's tests holding the lock of the packages whose tests see the
// whole machine (testenv.RunHostExclusive), with the mark of the processes its stages start in
// its environment (stagedMark).
func TestMain(m *testing.M) {
	os.Setenv("GPUTRIAGE_STAGED_BY", strconv.Itoa(os.Getpid()))
	os.Exit(testenv.RunHostExclusive(m))
}
