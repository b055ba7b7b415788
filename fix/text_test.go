package fix

import (
	"strings"
	"testing"
	"time"
)

// The plan's text shows what the host will run, word for word: SIGCONT after SIGTERM to a
// stopped process, a unit's queued stop, and with --kill-after the SIGKILL to each target's
// PID; under --sudo, that it runs through sudo -n.
func TestWritePlanShowsWhatRuns(t *testing.T) {
	p := Plan{Hosts: []HostPlan{{Host: "gpu07", BootID: strings.Repeat("ab", 16), Targets: []Target{
		{Kind: KindKill, PID: 20629, Stopped: true, Program: "sglang.launch_server"},
		{Kind: KindStopUnit, Name: "vllm.service", PID: 4242, Program: "vllm"},
		{Kind: KindStopContainer, Name: "b708f3d89365", Runtime: "docker", PID: 777, Program: "python3"},
		{Kind: KindCancelJob, Name: "4242", PID: 31337, Program: "torchrun"},
	}}}}
	id := func(s string) string { return s }
	var b strings.Builder
	WritePlan(&b, p, How{Sudo: true, KillAfter: 30 * time.Second}, id)
	for _, want := range []string{
		"gpu07 (boot abababababab), through sudo -n:\n",
		"  kill -s TERM 20629; kill -s CONT 20629\n      then, if PID 20629 still runs 30s after the apply started: kill -s KILL 20629\n",
		"  systemctl stop --no-block -- vllm.service   (holds PID 4242)\n      then, if PID 4242 still runs 30s after the apply started: kill -s KILL 4242\n",
		"  docker stop -- b708f3d89365   (holds PID 777)\n",
		"  scancel -- 4242   (holds PID 31337)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WritePlan(&b, Plan{Hosts: []HostPlan{{Host: "old", Targets: []Target{}}}}, How{}, id)
	if want := "old (boot id not captured):\n  nothing to stop\n"; b.String() != want {
		t.Errorf("a host without a boot id: %q, want %q", b.String(), want)
	}
	b.Reset()
	WritePlan(&b, p, How{}, id)
	if strings.Contains(b.String(), "sudo") || strings.Contains(b.String(), "KILL") {
		t.Errorf("plan without --sudo or --kill-after mentions them:\n%s", b.String())
	}
}
