package main

import (
	"regexp"
	"strings"
	"testing"
)

// TestUsageErrorsNameWhatWasGiven: each usage error about flags that do not go together
// names the flags the command line gave, and no other: `--local --save DIR` is no error at
// all (it saves this machine's capture), and `--local -x gpu01` never hears of --dry-run.
func TestUsageErrorsNameWhatWasGiven(t *testing.T) {
	flag := regexp.MustCompile(`--[a-z][a-z-]*|-x\b`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--dry-run", "--local"}, "--dry-run goes with host names, not --local"},
		{[]string{"--dry-run", "--replay", "x"}, "--dry-run goes with host names, not --replay"},
		{[]string{"--save", "d", "--replay", "x"}, "--save keeps the captures of a probe, and --replay probes nothing"},
		{[]string{"-x", "gpu01", "--local"}, "-x goes with host names, not --local"},
		{[]string{"--replay", "x", "--local"}, "give only one of --replay and --local"},
		{[]string{"--local", "gpu01"}, "give only one of --local and host names"},
		{[]string{"--replay", "x", "--local", "gpu01"}, "give only one of --replay, --local and host names"},
		{[]string{"collect", "--local"}, "collect needs --save DIR"},
		{[]string{"collect", "gpu01"}, "collect needs --save DIR"},
		{[]string{"collect", "--save", "d"}, "nothing to collect: give host names, k8s/NODE, -w HOSTS, -f FILE, --slurm-*, --k8s-selector or --local"},
		{[]string{"fix", "--wait", "0s", "gpu01"}, "fix: --wait must be positive, got 0s"},
		{[]string{"fix", "--timeout", "-1s", "gpu01"}, "fix: --timeout must be positive, got -1s"},
		{[]string{"fix", "--kill-after", "-1s", "gpu01"}, "fix: --kill-after must not be negative, got -1s"},
	} {
		out, stderr, code := cli(t, nil, tc.args...)
		line, _, _ := strings.Cut(stderr, "\n")
		if code != exitUsage || out != "" || line != "gputriage: "+tc.want {
			t.Errorf("gputriage %s: exit %d, stderr %q; want 2 and %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
		typed := " " + strings.Join(tc.args, " ") + " "
		// "needs --save DIR" and "nothing to ...: give ..." say what is missing, to no one's
		// blame.
		said, _, _ := strings.Cut(strings.Replace(strings.TrimPrefix(line, "gputriage: "), "needs --save", "", 1), ": give ")
		for _, f := range flag.FindAllString(said, -1) {
			if !strings.Contains(typed, " "+f+" ") {
				t.Errorf("gputriage %s: the message names %s, which was not given: %q", strings.Join(tc.args, " "), f, line)
			}
		}
	}
}
