package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/report"
)

const outSecret = "s3cretOUTvalue0123456789"

// TestWatchMasksSecrets: a holder's program (a process title that carries its command line),
// a host's error and what a round waits for are masked in watch's lines, screen and JSON Lines,
// unless --show-secrets.
func TestWatchMasksSecrets(t *testing.T) {
	holder := &Holder{HolderKey: HolderKey{PID: 42, Start: 1}, Program: "ray::IDLE --api-key " + outSecret,
		MiB: map[int]int64{0: 1000}, GPUs: []int{0}}
	gpu := 0
	s := Status{Reachable: true, Time: time.Now(), Holders: []Holder{*holder}, Worst: -1,
		Waiting: "PID 42 (wandb login " + outSecret + ") to exit"}
	evs := []Event{{Kind: Appeared, Holder: holder}, {Kind: Released, Holder: holder, GPU: &gpu, MiB: 1000},
		{Kind: Unreachable, Err: "banner: HF_TOKEN=" + outSecret}}
	for _, mode := range []string{"lines", "json", "screen"} {
		for _, show := range []bool{false, true} {
			var b strings.Builder
			clean := maskedText
			if show {
				clean = report.Sanitize
			}
			o := output{w: &b, errw: &b, mode: mode, labels: []string{"gpu1"}, notes: map[string]bool{}, said: map[int]string{},
				rounds: map[int]int{}, clean: clean, masks: !show}
			o.note(0, "note: --token "+outSecret)
			o.round(0, time.Now(), s, evs, []*Status{&s})
			if got := strings.Contains(b.String(), outSecret); got != show {
				t.Errorf("%s, show-secrets %v: secret shown %v:\n%s", mode, show, got, b.String())
			}
		}
	}
	if !strings.Contains(holder.Program, outSecret) || !strings.Contains(s.Waiting, outSecret) {
		t.Error("masking changed the caller's round")
	}
}
