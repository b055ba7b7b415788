package probe_test

import (
	"bytes"
	"github.com/gputriage/gputriage/internal/testenv"
	"os/exec"
	"regexp"
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/probe"
)

// volatile are what changes from one run of the probe to the next on an idle machine: the
// clock and the uptime in the host section.
var volatile = regexp.MustCompile(`(?m)^(time|uptime)=.*$`)

// TestMinifiedProbeSameCapture runs the probe as written and minified on this machine (a fake
// idle 8-GPU nvidia-smi first on PATH) and compares the captures byte for byte, but for the
// clock and uptime. The original runs before and after the minified one; when those two
// differ (another process came or went meanwhile) the three runs are made again, up to five
// times. Run it under the host lock: it starts the probe's processes.
func TestMinifiedProbeSameCapture(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	if testing.Short() {
		t.Skip("runs the probe")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	src, min := []byte(probe.Unminified()), []byte(probe.Script)
	if len(min) > len(src)*3/4 {
		t.Errorf("minified probe is %d bytes of %d", len(min), len(src))
	}
	smi := t.TempDir()
	if err := simfleet.WriteIdleSMI(smi); err != nil {
		t.Fatal(err)
	}
	run := func(script []byte) []byte {
		cmd := exec.Command("sh", "-s")
		cmd.Stdin = bytes.NewReader(append([]byte("set -- 00112233445566778899aabbccddeeff 5\n"), script...))
		cmd.Env = []string{"PATH=" + smi + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL=C"}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("probe: %v\n%s", err, out)
		}
		return out
	}
	norm := func(b []byte) []byte { return volatile.ReplaceAll(b, []byte("$1=#")) }
	for range 5 {
		orig1, mini, orig2 := norm(run(src)), norm(run(min)), norm(run(src))
		if !bytes.Equal(orig1, orig2) {
			continue // the machine changed between the runs
		}
		if !bytes.Equal(mini, orig1) {
			t.Errorf("the minified probe's capture differs from the original's:\n--- original\n%s\n--- minified\n%s", orig1, mini)
		}
		return
	}
	t.Skip("five pairs of runs of the original probe differed from each other: the machine is not still enough to compare")
}
