package report

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/explain"
)

// The Next lines name the triaged host so that they still run as printed: a host with
// characters a shell would read (a bracketed IPv6 address is a glob) is quoted.
func TestNextCommandsQuoteTheHost(t *testing.T) {
	ex := explain.Explanation{Family: "torch-oom", Title: "t", Meaning: "m",
		Next: []string{"gputriage HOST", "ps -p 1   # on HOST"}}
	for host, want := range map[string]string{
		"gpu07":            "gputriage gpu07",
		"admin@[::1]:2222": "gputriage 'admin@[::1]:2222'",
		"it's":             `gputriage 'it'\''s'`,
	} {
		got := nextCommands(ex, []Host{{Name: host}})
		if got[0] != want {
			t.Errorf("%q: got %q, want %q", host, got[0], want)
		}
		out, err := exec.Command("sh", "-c", "set -f; printf '%s\\n' "+strings.TrimPrefix(got[0], "gputriage ")).Output()
		if err != nil || strings.TrimSuffix(string(out), "\n") != host {
			t.Errorf("%q: the shell reads %q (%v)", host, out, err)
		}
	}
}
