package report

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// factsDoc is the part of the JSON document the typed facts live in.
type factsDoc struct {
	Hosts []struct {
		Findings []struct {
			Code    string           `json:"code"`
			Fix     []string         `json:"fix"`
			Reasons []map[string]any `json:"reasons"`
			Actions []struct {
				Kind   string `json:"kind"`
				Target string `json:"target"`
				PIDs   []int  `json:"pids"`
				Frees  struct {
					GPUMiB   map[string]int64 `json:"gpu_mib"`
					ShmBytes int64            `json:"shm_bytes"`
				} `json:"frees"`
				Steps []struct {
					Line string  `json:"line"`
					Note *string `json:"note"`
				} `json:"steps"`
			} `json:"actions"`
			Checks []struct {
				Line string  `json:"line"`
				Note *string `json:"note"`
			} `json:"checks"`
			Shm []map[string]any `json:"shm"`
		} `json:"findings"`
	} `json:"hosts"`
}

func decodeFacts(t *testing.T, out string) factsDoc {
	t.Helper()
	var d factsDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	return d
}

// TestJSONFacts: the incident's findings carry their typed facts in JSON beside the words:
// reasons with codes, the one kill of PID 20629 with what it frees, the checks, and the
// deleted files.
func TestJSONFacts(t *testing.T) {
	raw, err := os.ReadFile("../fixtures/ct200.capture")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := parse.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	h := Host{Name: "ct200", Snapshot: snap, Result: diagnose.Diagnose(snap, *snap.Host.Time)}
	d := decodeFacts(t, render(t, JSON, []Host{h}, Options{}))
	seen := map[string]bool{}
	for _, f := range d.Hosts[0].Findings {
		seen[f.Code] = true
		switch f.Code {
		case diagnose.CodeLeftoverProcess, diagnose.CodeMemoryImbalance, diagnose.CodeShmDeletedMapped:
			if len(f.Actions) != 1 {
				t.Fatalf("%s actions: %+v", f.Code, f.Actions)
			}
			a := f.Actions[0]
			if a.Kind != "kill" || a.Target != "20629" || !reflect.DeepEqual(a.PIDs, []int{20629}) ||
				!reflect.DeepEqual(a.Frees.GPUMiB, map[string]int64{"0": 55286}) || a.Frees.ShmBytes != 48<<20 {
				t.Errorf("%s action %+v", f.Code, a)
			}
			if len(a.Steps) != 2 || a.Steps[0].Line != "kill 20629" || a.Steps[0].Note != nil {
				t.Errorf("%s steps %+v", f.Code, a.Steps)
			}
			if len(f.Checks) != 1 || f.Fix[len(f.Fix)-1] != f.Checks[0].Line {
				t.Errorf("%s checks %+v, fix %q", f.Code, f.Checks, f.Fix)
			}
		}
		switch f.Code {
		case diagnose.CodeLeftoverProcess:
			var codes []any
			for _, r := range f.Reasons {
				codes = append(codes, r["code"])
			}
			if !reflect.DeepEqual(codes, []any{"shm-deleted", "orphaned"}) {
				t.Errorf("reasons %v", f.Reasons)
			}
			if r := f.Reasons[0]; r["strong"] != true || r["pid"] != float64(20629) || len(r["paths"].([]any)) != 12 {
				t.Errorf("first reason %v", r)
			}
		case diagnose.CodeShmDeletedMapped:
			if len(f.Shm) != 12 {
				t.Fatalf("shm files %v", f.Shm)
			}
			s := f.Shm[0]
			if s["path"] != "/dev/shm/Qwen3.6-27B/model-00001-of-00012.safetensors" || s["bytes"] != float64(4<<20) ||
				s["deleted"] != true || s["mapped"] != true || !reflect.DeepEqual(s["pids"], []any{float64(20629)}) {
				t.Errorf("first shm file %v", s)
			}
		}
	}
	if !seen[diagnose.CodeLeftoverProcess] || !seen[diagnose.CodeShmDeletedMapped] || !seen[diagnose.CodeMemoryImbalance] {
		t.Errorf("findings %v", seen)
	}
}

// factsHost is a host whose typed facts carry, in every string field they have, the given
// text.
func factsHost(text string) Host {
	h := incidentHost()
	f := &h.Result.Findings[0]
	age := time.Hour
	f.Reasons = []diagnose.Reason{{Code: diagnose.ReasonOrphaned, Strong: true, PID: 20629, Unit: "u-" + text + ".service",
		State: "inactive", Result: "exit-code", Paths: []string{"/dev/shm/" + text, "--token", text}, ServedBy: "s-" + text + ".service"}}
	f.Actions = []diagnose.Action{{Kind: diagnose.ActionKill, Target: "t " + text, PIDs: []int{20629},
		Frees: diagnose.Impact{GPUMiB: map[int]int64{0: 55286}},
		Steps: []diagnose.Command{{Line: "kill 20629 " + text, Note: "n " + text}}}}
	f.Checks = []diagnose.Command{{Line: "check " + text, Note: "note " + text}}
	f.Shm = []diagnose.ShmFile{{Path: "/dev/shm/x-" + text, Owner: text + " (uid 1000)", PIDs: []int{20629}, Age: &age}}
	return h
}

// TestSecretsMaskedInFacts: a credential in any string of the typed facts is masked in every
// format, and JSON shows the masked fields; the codes are not touched.
func TestSecretsMaskedInFacts(t *testing.T) {
	hosts := []Host{factsHost("HF_TOKEN=" + secretEnv + " " + secretHF)}
	for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON} {
		for _, o := range []Options{{}, {Verbose: true}, {Redact: true}} {
			out := render(t, f, hosts, o)
			for _, s := range []string{secretEnv, secretHF} {
				if strings.Contains(out, s) {
					t.Errorf("%s %+v shows %q", name, o, s)
				}
			}
		}
	}
	d := decodeFacts(t, render(t, JSON, hosts, Options{}))
	f := d.Hosts[0].Findings[0]
	if len(f.Actions) != 1 || len(f.Checks) != 1 || len(f.Reasons) != 1 || len(f.Shm) != 1 {
		t.Fatalf("facts missing from JSON: %+v", f)
	}
	masked := []string{f.Actions[0].Target, f.Actions[0].Steps[0].Line, *f.Actions[0].Steps[0].Note, f.Checks[0].Line,
		*f.Checks[0].Note, f.Reasons[0]["unit"].(string), f.Reasons[0]["served_by"].(string), f.Shm[0]["path"].(string), f.Shm[0]["owner"].(string)}
	for _, p := range f.Reasons[0]["paths"].([]any) {
		masked = append(masked, p.(string))
	}
	for _, s := range masked {
		if strings.Contains(s, "HF_TOKEN=") && !strings.Contains(s, "HF_TOKEN=***") || strings.Contains(s, "hf_") {
			t.Errorf("not masked: %q", s)
		}
	}
	if f.Reasons[0]["code"] != "orphaned" || f.Actions[0].Kind != "kill" {
		t.Errorf("codes changed: %v %q", f.Reasons[0]["code"], f.Actions[0].Kind)
	}
}

// TestRedactFacts: a redacted report shows no host or user name in the typed facts, and
// keeps the codes even where a user is named like one.
func TestRedactFacts(t *testing.T) {
	h := factsHost("alice@ct200.corp.example")
	h.Result.Processes[0].User = "alice"
	h.Name = "orphaned@ct200" // users named like codes
	h.Snapshot.Host.User = "kill"
	h.Snapshot.Host.Hostname = "ct200.corp.example"
	for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON} {
		out := strings.ToLower(render(t, f, []Host{h}, Options{Redact: true, Verbose: true}))
		for _, s := range []string{"alice", "ct200", "corp.example"} {
			if strings.Contains(out, s) {
				t.Errorf("%s: %q survives redaction", name, s)
			}
		}
	}
	d := decodeFacts(t, render(t, JSON, []Host{h}, Options{Redact: true}))
	f := d.Hosts[0].Findings[0]
	if len(f.Actions) != 1 || len(f.Reasons) != 1 {
		t.Fatalf("facts missing from JSON: %+v", f)
	}
	if f.Reasons[0]["code"] != "orphaned" || f.Actions[0].Kind != "kill" {
		t.Errorf("redaction changed the codes: %v %q", f.Reasons[0]["code"], f.Actions[0].Kind)
	}
	if !strings.Contains(f.Actions[0].Target, "user-") || !strings.Contains(f.Actions[0].Target, "host-") {
		t.Errorf("target not redacted to placeholders: %q", f.Actions[0].Target)
	}
}
