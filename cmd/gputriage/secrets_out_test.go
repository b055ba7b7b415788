package main

import (
	"strings"
	"testing"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/nodecheck"
	"github.com/gputriage/gputriage/report"
)

const outSecret = "s3cretOUTvalue0123456789"

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
