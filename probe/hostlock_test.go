package probe_test

import (
	"os"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// TestMain runs this package's tests holding the lock of the packages whose tests see the
// whole machine (testenv.RunHostExclusive).
func TestMain(m *testing.M) { os.Exit(testenv.RunHostExclusive(m)) }
