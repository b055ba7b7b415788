package dockertest

import (
	"os"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// TestMain runs this package's tests holding the lock of the packages whose tests see the
// whole machine (testenv.RunHostExclusiveLive): its containers hold GPU devices. Under -short
// it has no test that starts one, and takes no lock.
func TestMain(m *testing.M) { os.Exit(testenv.RunHostExclusiveLive(m)) }
