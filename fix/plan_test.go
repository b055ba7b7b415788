package fix

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// seed reads the seed incident's capture (ct200: SGLang's leftover PID 20629 beside a
// healthy server), with boot id bootID: the recorded capture predates boot_id.
func seed(t *testing.T, bootID string) (*parse.Snapshot, diagnose.Result) {
	t.Helper()
	raw, err := os.ReadFile("../fixtures/ct200.capture")
	if err != nil {
		t.Fatal(err)
	}
	s, _ := parse.Parse(raw)
	s.Host.BootID = bootID
	return s, diagnose.Diagnose(s, *s.Host.Time)
}

func TestBuildHostSeedIncident(t *testing.T) {
	s, r := seed(t, strings.Repeat("ab", 16))
	hp := BuildHost("ct200", s, r)
	if len(hp.Targets) != 1 || len(hp.Explained) != 0 {
		t.Fatalf("plan %+v, want one target", hp)
	}
	tg := hp.Targets[0]
	var p *parse.Process
	for i := range s.Processes {
		if s.Processes[i].PID == 20629 {
			p = &s.Processes[i]
		}
	}
	want := Target{Kind: KindKill, PID: 20629, StartTicks: *p.StartTicks, UID: *p.UID, ArgvSHA256: p.ArgvSHA256,
		Program: tg.Program, User: p.User, Finding: diagnose.CodeLeftoverProcess, Reasons: tg.Reasons,
		FreesMiB: map[int]int64{0: 55286}}
	if !reflect.DeepEqual(tg, want) || len(tg.Reasons) == 0 {
		t.Errorf("target %+v\nwant   %+v", tg, want)
	}
	// Every other process holding a GPU is healthy work: none is in the plan.
	for _, gp := range r.Processes {
		if gp.PID != 20629 && len(gp.GPUMemoryMiB) > 0 && tg.PID == gp.PID {
			t.Errorf("healthy pid %d in the plan", gp.PID)
		}
	}
}

// Without a boot id a PID cannot be told from the same PID after a reboot: explained, not
// planned.
func TestBuildHostNeedsBootID(t *testing.T) {
	s, r := seed(t, "")
	hp := BuildHost("ct200", s, r)
	if len(hp.Targets) != 0 || len(hp.Explained) != 1 || hp.Explained[0].PID != 20629 || !strings.Contains(hp.Explained[0].Why, "boot id") {
		t.Errorf("plan %+v", hp)
	}
}

func TestPlanJSONRoundTrip(t *testing.T) {
	s, r := seed(t, strings.Repeat("ab", 16))
	p := Plan{Version: Version, ID: "0011223344556677", Hosts: []HostPlan{BuildHost("ct200", s, r)}}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bytes.NewReader(b.Bytes()))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("read back %+v, %v", got, err)
	}
	for _, edit := range []struct{ from, to, want string }{
		{`"version": 1`, `"version": 2`, "version 2"},
		{`"pid": 20629`, `"pid": 1`, "pid 1 out of range"},
		{`"kind": "kill"`, `"kind": "stop-unit"`, "bad name"},
		{`"boot_id": "abab`, `"boot_id": "ABAB`, "boot id"},
		{`"uid":`, `"extra": 1, "uid":`, "unknown field"},
	} {
		text := strings.Replace(b.String(), edit.from, edit.to, 1)
		if _, err := Read(strings.NewReader(text)); err == nil || !strings.Contains(err.Error(), edit.want) {
			t.Errorf("%s -> %s: %v, want %q", edit.from, edit.to, err, edit.want)
		}
	}
}

// A session cut during the watch leaves "acted" lines without results: signalled targets are
// unconfirmed, refused ones refused; a target the host said nothing of is an error.
func TestParseResultsActedOnly(t *testing.T) {
	out := []byte("n1 acted 0 4242 signalled -\nn1 acted 1 4343 refused start-time-differs\nother acted 2 1 signalled -\n")
	res, err := ParseResults(out, "n1", 2)
	if err != nil || res[0].Outcome != Unconfirmed || res[0].PID != 4242 || res[1].Outcome != Refused || res[1].Detail != "start-time-differs" {
		t.Errorf("ParseResults = %+v, %v", res, err)
	}
	out = append(out, "n1 result 0 4242 stopped - 1 20 30\n"...)
	if res, err := ParseResults(out, "n1", 2); err != nil || res[0].Outcome != Stopped {
		t.Errorf("a result after its acted line: %+v, %v; want stopped", res, err)
	}
	if _, err := ParseResults(out, "n1", 3); err == nil {
		t.Error("a target the host said nothing of: no error")
	}
	if _, err := ParseResults([]byte("n1 acted 0 4242 signalled -\nn1 acted 0 4242 signalled -\n"), "n1", 1); err == nil {
		t.Error("a repeated acted line: no error")
	}
}
