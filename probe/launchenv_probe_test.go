//go:build linux

package probe_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// TestProbeLaunchEnv: of a GPU holder's environment the probe sends only the torchrun agent's
// variables, each checked; nothing else leaves the host (a secret beside them, the value that
// tries to forge an entry with a newline), nothing of an ancestor's environment or of a process
// that holds no GPU, and no entry the 256 KiB bound cut short.
func TestProbeLaunchEnv(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	pad := func(name string, n int) string { return name + "=" + strings.Repeat("a", n) }
	leafEnv := []string{
		"A=x\nTORCHELASTIC_RUN_ID=forged",
		"SECRET_TOKEN=hunter2-s3cret",
		"LOCAL_RANK=3",
		"TORCHELASTIC_RESTART_COUNT=1234567",
		"TORCHELASTIC_RUN_ID=run-42",
	}
	used := 0
	for _, e := range leafEnv {
		used += len(e) + 1
	}
	// GROUP_RANK=12 starts where the bound leaves room for "GROUP_RANK=1" only.
	pads := []string{pad("PAD1", 100_000), pad("PAD2", 100_000)} // a string is at most 128 KiB
	for _, p := range pads {
		used += len(p) + 1
	}
	pads = append(pads, pad("PAD3", 262144-used-len("GROUP_RANK=1")-len("PAD3=")-1))
	leafEnv = append(append(leafEnv, pads...), "GROUP_RANK=12")

	// In a box of its own (inBox), so that no other process's fds on /dev/shm files can crowd
	// the holder's out of the fds section: PID 3 is the ancestor sh, PID 4 the leaf (env, then
	// sleep), PID 5 the holder of a deleted /dev/shm file that holds no GPU (described, its
	// environ unread), PID 6 its rm. Until the leaf runs sleep the box's sh starts nothing and
	// waits with builtins alone, so that each PID is the one said (a minute of the kernel's
	// uptime bounds the wait only against a hang).
	const leaf, ancestor, holder = 4, 3, 5
	box := `read -r t0 _ </proc/uptime
waiting() { read -r t _ </proc/uptime; [ $((${t%.*} - ${t0%.*})) -lt 60 ] || { echo "box: $1 did not start" >&2; exit 95; }; }
TORCHELASTIC_RUN_ID=ancestor-run LOCAL_RANK=5 sh -c 'env -i "$@" & wait' sh "$@" sleep 600 &
until read -r c </proc/4/comm 2>/dev/null && [ "$c" = sleep ]; do waiting leaf; done
TORCHELASTIC_RUN_ID=shm-holder-run sh -c 'exec 3<>/dev/shm/gt-launchenv && rm /dev/shm/gt-launchenv && exec sleep 600' &
while [ -e /dev/shm/gt-launchenv ] || ! read -r c </proc/5/comm 2>/dev/null || [ "$c" != sleep ]; do waiting holder; done
sh -s
`
	raw := inBox(t, smiListing(t, 0, leaf), "set -- 00112233445566778899aabbccddeeff\n"+probe.Script, box, leafEnv...)
	for _, secret := range []string{"hunter2", "forged", "ancestor-run", "shm-holder-run", "SECRET_TOKEN", "PAD1", "1234567"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the capture holds %q", secret)
		}
	}
	s, _ := parseAndDiagnose(t, raw)
	three := 3
	if p := proc(s, leaf); p == nil || p.Comm != "sleep" || !reflect.DeepEqual(p.Launch, &parse.LaunchEnv{RunID: "run-42", LocalRank: &three}) {
		t.Errorf("leaf %d: %+v", leaf, p)
	}
	if sh := proc(s, ancestor); sh == nil || !sh.ParentOnly || sh.Launch != nil {
		t.Errorf("ancestor %d: %+v", ancestor, sh)
	}
	if p := proc(s, holder); p == nil || p.ParentOnly || len(p.Shm) == 0 || p.Launch != nil {
		t.Errorf("holder of a deleted /dev/shm file %d: %+v", holder, p)
	}
}
