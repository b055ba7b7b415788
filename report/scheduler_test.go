package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// schedulerFleet is four Slurm nodes: node1 drained by gputriage, node2 drained by an admin
// whose reason holds a newline, an escape and a host name, node3 idle (no reason) and node4
// clean without a scheduler note.
func schedulerFleet() []Host {
	hosts := []Host{cleanFleetHost("node1"), cleanFleetHost("node2"), cleanFleetHost("node3"), cleanFleetHost("node4")}
	hosts[0].Scheduler = &Scheduler{Name: "slurm", State: "drained", Reason: "gputriage: leftover PID 20629",
		ReasonUser: "root", ReasonTime: "2026-12-01T00:54:42"}
	hosts[1].Scheduler = &Scheduler{Name: "slurm", State: "draining", Reason: "gpu lost on node2\n\x1b[31mnode3|drained",
		ReasonUser: "alice", ReasonTime: "2026-12-01T00:58:19"}
	hosts[2].Scheduler = &Scheduler{Name: "slurm", State: "idle"}
	return hosts
}

// TestSchedulerReason: a drained node's reason is shown under its header in text and Markdown
// (sanitized, one line), the node is detailed even without findings, and a node without a
// reason shows nothing.
func TestSchedulerReason(t *testing.T) {
	hosts := schedulerFleet()
	text := render(t, Text, hosts, Options{Width: 120})
	for _, want := range []string{
		"node1  OK (1 note)\n  slurm: drained: gputriage: leftover PID 20629 (root, 2026-12-01T00:54:42)\n",
		`slurm: draining: gpu lost on node2\n\x1b[31mnode3|drained (alice, 2026-12-01T00:58:19)`,
		"hosts without problems: node[3-4]",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "slurm: idle") || strings.Contains(text, "\x1b") {
		t.Errorf("text shows a reasonless node or a raw escape:\n%s", text)
	}
	md := render(t, Markdown, hosts, Options{})
	if !strings.Contains(md, "### node1\n\n**OK**\n\nslurm: drained: gputriage: leftover PID 20629 (root, 2026-12-01T00:54:42)\n\n") ||
		!strings.Contains(md, `gpu lost on node2\\n\\x1b\[31mnode3\|drained`) {
		t.Errorf("Markdown lacks the reasons:\n%s", md)
	}
}

func TestSchedulerJSON(t *testing.T) {
	out := render(t, JSON, schedulerFleet(), Options{})
	var doc struct {
		Hosts []struct {
			Host      string
			Scheduler *struct {
				Name       string  `json:"name"`
				State      string  `json:"state"`
				Reason     *string `json:"reason"`
				ReasonUser *string `json:"reason_user"`
				ReasonTime *string `json:"reason_time"`
			} `json:"scheduler"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	s := doc.Hosts[0].Scheduler
	if s == nil || s.Name != "slurm" || s.State != "drained" || s.Reason == nil || *s.Reason != "gputriage: leftover PID 20629" ||
		*s.ReasonUser != "root" || *s.ReasonTime != "2026-12-01T00:54:42" {
		t.Errorf("node1 scheduler %+v", s)
	}
	if s := doc.Hosts[1].Scheduler; s == nil || *s.Reason != "gpu lost on node2\n\x1b[31mnode3|drained" {
		t.Errorf("node2's reason does not decode to the exact string: %+v", s)
	}
	if s := doc.Hosts[2].Scheduler; s == nil || s.State != "idle" || s.Reason != nil {
		t.Errorf("node3 scheduler %+v", s)
	}
	if doc.Hosts[3].Scheduler != nil || strings.Count(out, `"scheduler"`) != 3 {
		t.Errorf("a host no scheduler chose has a scheduler object:\n%s", out)
	}
}

func TestSchedulerRedacted(t *testing.T) {
	out := render(t, Text, schedulerFleet(), Options{Width: 120, Redact: true})
	if strings.Contains(out, "alice") || strings.Contains(out, "node2") || !strings.Contains(out, "slurm: draining: gpu lost on host-2") {
		t.Errorf("the reason's user or host name survived --redact:\n%s", out)
	}
}
