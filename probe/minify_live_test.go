//go:build linux

package probe_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/probe"
)

// volatile are what changes from one run of the probe to the next on an idle machine: the
// clock and the uptime in the host section.
var volatile = regexp.MustCompile(`(?m)^(time|uptime)=.*$`)

// TestMinifiedProbeSameCapture runs the probe as written and minified on this machine (a fake
// idle 8-GPU nvidia-smi first on PATH) and compares the captures byte for byte, but for the
// clock and uptime. The three runs (the original before and after the minified one) are made
// one after another in one box (inBox): no process of another test or job, and no file it
// puts in /dev/shm, can come or go between them, so on a busy machine the two runs of the
// original are still the same and the comparison is made, not skipped. When they differ
// anyway, the three runs are made again, up to five times.
func TestMinifiedProbeSameCapture(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
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
	dir := t.TempDir()
	for i, script := range [][]byte{src, min, src} {
		in := append([]byte("set -- 00112233445566778899aabbccddeeff 5\n"), script...)
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), in, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Each run's output, then a line of its own between runs: a capture ends in a newline.
	const sep = "@@gputriage-test-next-run\n"
	runs := `export PATH="$1:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin" LC_ALL=C
for i in 0 1 2; do sh -s <"$2/$i" 2>&1 || exit; printf '` + sep + `'; done
`
	norm := func(b []byte) []byte { return volatile.ReplaceAll(b, []byte("$1=#")) }
	for range 5 {
		out := bytes.Split(norm(inBox(t, "", "", runs, smi, dir)), []byte(sep))
		if len(out) != 4 {
			t.Fatalf("%d runs of the probe, want 3", len(out)-1)
		}
		orig1, mini, orig2 := out[0], out[1], out[2]
		if !bytes.Contains(orig1, []byte("\nprobe_version=")) {
			t.Fatalf("the probe printed no capture:\n%s", orig1)
		}
		if !bytes.Equal(orig1, orig2) {
			t.Logf("the two runs of the original differ:\n--- first\n%s\n--- second\n%s", orig1, orig2)
			continue
		}
		if !bytes.Equal(mini, orig1) {
			t.Errorf("the minified probe's capture differs from the original's:\n--- original\n%s\n--- minified\n%s", orig1, mini)
		}
		return
	}
	t.Skip("five pairs of runs of the original probe differed from each other: the machine is not still enough to compare")
}
