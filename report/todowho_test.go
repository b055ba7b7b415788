package report

import (
	"testing"

	"github.com/gputriage/gputriage/diagnose"
)

// TestStepNamesProgramAndUser: every step that ends one process names its program and user,
// whatever ends it (a kill, its unit, its container, its Slurm job), and for a process that
// holds no GPU (a keeper of deleted /dev/shm files) as its finding names it.
func TestStepNamesProgramAndUser(t *testing.T) {
	named := []diagnose.Process{{PID: 42, Command: "python3 train.py", User: "alice (uid 1000)", UserName: "alice"}}
	for _, tc := range []struct {
		a    diagnose.Action
		want string
	}{
		{diagnose.Action{Kind: diagnose.ActionKill, Target: "42", PIDs: []int{42}}, "Stop PID 42 (python3 train.py, alice)"},
		{diagnose.Action{Kind: diagnose.ActionStopUnit, Target: "train.service", PIDs: []int{42}}, "Stop train.service (python3 train.py, alice)"},
		{diagnose.Action{Kind: diagnose.ActionStopContainer, Target: "docker:b708f3d89365", PIDs: []int{42}}, "Stop container docker:b708f3d89365 (python3 train.py, alice)"},
		{diagnose.Action{Kind: diagnose.ActionCancelJob, Target: "4242", PIDs: []int{42}}, "Cancel Slurm job 4242 (python3 train.py, alice)"},
		{diagnose.Action{Kind: diagnose.ActionStopUnit, Target: "train.service", PIDs: []int{42, 43}}, "Stop train.service"},
	} {
		f := diagnose.Finding{Code: diagnose.CodeShmDeletedMapped, Severity: diagnose.Warning, Actions: []diagnose.Action{tc.a}, Named: named}
		td := hostTodo([]diagnose.Finding{f})
		if got := td.items[0].lead(nil); got != tc.want+": resolves shm-deleted-mapped" {
			t.Errorf("%s %s: lead %q, want %q", tc.a.Kind, tc.a.Target, got, tc.want+": resolves shm-deleted-mapped")
		}
	}
}
