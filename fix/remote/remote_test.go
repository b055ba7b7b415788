package remote

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/fix"
)

// TestConfirm: the operator types the host's name for one host, the number of hosts for a
// fleet; anything else, or no terminal without --yes, applies nothing.
func TestConfirm(t *testing.T) {
	target := []fix.Target{{Kind: fix.KindKill, PID: 42}}
	one := fix.Plan{Hosts: []fix.HostPlan{{Host: "gpu-idle"}, {Host: "gpu-a", Targets: target}}}
	two := fix.Plan{Hosts: []fix.HostPlan{{Host: "gpu-a", Targets: target}, {Host: "gpu-b", Targets: target}}}
	errUsage := errors.New("usage")
	for _, c := range []struct {
		plan     fix.Plan
		yes, tty bool
		typed    string
		ok       bool
		err      error
		prompt   string
	}{
		{one, false, true, "gpu-a\n", true, nil, "type the host name gpu-a"},
		{one, false, true, "gpu-idle\n", false, nil, "type the host name gpu-a"},
		{one, false, true, "1\n", false, nil, "type the host name gpu-a"},
		{two, false, true, "2\n", true, nil, "type 2 (the number of hosts)"},
		{two, false, true, "gpu-a", false, nil, "type 2 (the number of hosts)"},
		{two, false, false, "2\n", false, errUsage, ""},
		{two, true, false, "", true, nil, ""},
	} {
		var stderr strings.Builder
		r := &Runner{Yes: c.yes, Terminal: c.tty, Stdin: strings.NewReader(c.typed), Stderr: &stderr,
			Usagef: func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{errUsage}, a...)...) }}
		ok, err := r.confirm(c.plan)
		if ok != c.ok || !errors.Is(err, c.err) || (err == nil) != (c.err == nil) || !strings.Contains(stderr.String(), c.prompt) {
			t.Errorf("yes %v, terminal %v, typed %q: ok %v, err %v, want %v, %v; stderr %q, want %q",
				c.yes, c.tty, c.typed, ok, err, c.ok, c.err, stderr.String(), c.prompt)
		}
	}
}

// TestWorse: a target not stopped (1) outranks a host not reached (3), which outranks success.
func TestWorse(t *testing.T) {
	for _, c := range [][3]int{{OK, OK, OK}, {OK, HostFailed, HostFailed}, {HostFailed, Incomplete, Incomplete},
		{Incomplete, OK, Incomplete}, {OK, Internal, Internal}} {
		if got := worse(c[0], c[1]); got != c[2] {
			t.Errorf("worse(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
	if failedCode(true, OK) != HostFailed || failedCode(true, Incomplete) != Incomplete || failedCode(false, OK) != OK {
		t.Error("failedCode: a host not probed makes a success exit 3, and only a success")
	}
}
