package main

import (
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/nodecheck"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/watch"
)

const outSecret = "s3cretOUTvalue0123456789"

// TestWatchMasksSecrets: a holder's program (a process title that carries its command line),
// a host's error and what a round waits for are masked in watch's lines, screen and JSON Lines,
// unless --show-secrets.
func TestWatchMasksSecrets(t *testing.T) {
	holder := &watch.Holder{HolderKey: watch.HolderKey{PID: 42, Start: 1}, Program: "ray::IDLE --api-key " + outSecret,
		MiB: map[int]int64{0: 1000}, GPUs: []int{0}}
	gpu := 0
	s := watch.Status{Reachable: true, Time: time.Now(), Holders: []watch.Holder{*holder}, Worst: -1,
		Waiting: "PID 42 (wandb login " + outSecret + ") to exit"}
	evs := []watch.Event{{Kind: watch.Appeared, Holder: holder}, {Kind: watch.Released, Holder: holder, GPU: &gpu, MiB: 1000},
		{Kind: watch.Unreachable, Err: "banner: HF_TOKEN=" + outSecret}}
	for _, mode := range []string{"lines", "json", "screen"} {
		for _, show := range []bool{false, true} {
			var b strings.Builder
			o := watchOutput{w: &b, errw: &b, mode: mode, labels: []string{"gpu1"}, notes: map[string]bool{}, said: map[int]string{},
				rounds: map[int]int{}, clean: hostText(show), masks: !show}
			o.note(0, "note: --token "+outSecret)
			o.round(0, time.Now(), s, evs, []*watch.Status{&s})
			if got := strings.Contains(b.String(), outSecret); got != show {
				t.Errorf("%s, show-secrets %v: secret shown %v:\n%s", mode, show, got, b.String())
			}
		}
	}
	if !strings.Contains(holder.Program, outSecret) || !strings.Contains(s.Waiting, outSecret) {
		t.Error("masking changed the caller's round")
	}
}

// TestFixPlanMasksSecrets: the plan fix shows masks the credentials in a target's program and
// in what it says instead of signalling a holder.
func TestFixPlanMasksSecrets(t *testing.T) {
	p := fix.Plan{Hosts: []fix.HostPlan{{Host: "gpu1", BootID: strings.Repeat("a", 32),
		Targets: []fix.Target{{Kind: fix.KindKill, PID: 42, Program: "VLLM::EngineCore --api-key " + outSecret, Finding: "leftover-process"}},
		Explained: []fix.Explained{{PID: 43, Program: "docker login -p " + outSecret, Why: "HF_TOKEN=" + outSecret,
			Instead: "ask", Steps: []string{"curl -H 'Authorization: Bearer " + outSecret + "' http://h"}}}}}}
	for _, show := range []bool{false, true} {
		var b strings.Builder
		fix.WritePlan(&b, p, fix.How{}, hostText(show))
		if got := strings.Contains(b.String(), outSecret); got != show {
			t.Errorf("show-secrets %v: secret shown %v:\n%s", show, got, b.String())
		}
	}
}

// TestDrainReasonMasksSecrets: node-check's problems are masked before their lines and the
// drain reason are made: a program named by a token-shaped process title is not in the
// reason sinfo -R shows every user.
func TestDrainReasonMasksSecrets(t *testing.T) {
	const tok = "hf_abcdefghijklmnopqrstuvwxyz0123"
	problems := []nodecheck.Problem{{Code: "leftover-process", Title: "PID 42 (" + tok + ") holds GPU 0", PID: 42, Program: tok, GPU: 0, MiB: 1000}}
	masked := report.MaskSecretsIn(problems)
	if r := nodecheck.DrainReason(masked); strings.Contains(r, tok[:12]) || strings.Contains(masked[0].Title, tok) {
		t.Errorf("drain reason %q, title %q", r, masked[0].Title)
	}
	if !strings.Contains(nodecheck.DrainReason(problems), tok[:12]) {
		t.Error("the unmasked reason does not hold the token: the test proves nothing")
	}
}
