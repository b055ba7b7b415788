package parse

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestArgvPaths: a checked model path counts only when it is a whole argument, or a whole
// "--flag=PATH" argument's value: the probe also splits arguments at newlines.
func TestArgvPaths(t *testing.T) {
	gone := PathCheck{Path: "/gone"}
	tests := []struct {
		name string
		argv []string
		want []PathCheck
	}{
		{"flag and value", []string{"vllm", "--model", "/gone"}, []PathCheck{gone}},
		{"flag=value", []string{"vllm", "--model=/gone"}, []PathCheck{gone}},
		{"inside an argument", []string{"vllm", "--chat-template", "x\n--model\n/gone"}, nil},
		{"flag=value inside an argument", []string{"vllm", "--prompt", "x\n--model=/gone"}, nil},
		{"no argv", nil, nil},
	}
	for _, tt := range tests {
		if got := argvPaths([]PathCheck{gone}, tt.argv); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestProcsLeftOut: when more processes hold GPUs or deleted /dev/shm files than the probe
// describes (an unprivileged user can start thousands holding one deleted file), the ones
// left out are noted, not dropped silently.
func TestProcsLeftOut(t *testing.T) {
	build := func(holders int) string {
		var fds, procs strings.Builder
		for pid := 100; pid < 100+holders; pid++ {
			fmt.Fprintf(&fds, "/proc/%d/fd\t3\t/dev/shm/x (deleted)\x00", pid)
			if pid < 100+maxProbeProcs {
				procs.WriteString(procV2(pid, "sleep"))
			}
		}
		fds.WriteString("/proc/9000/fd\t4\t/dev/nvidia0\x00denied 0")
		return captureV2(sec64("fds", fds.String(), 0), sec("procs", 0, procs.String(), 0))
	}
	for _, tt := range []struct {
		holders int
		note    string
	}{
		{maxProbeProcs - 1, ""},
		{maxProbeProcs + 5, "section procs describes at most 2000 processes: 6 more that use GPUs or deleted /dev/shm files were left out"},
	} {
		s, err := Parse([]byte(build(tt.holders)))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, n := range s.Notes {
			if n.Code == NoteSectionTruncated {
				got = append(got, n.Message)
			}
		}
		if want := []string{tt.note}; tt.note == "" && len(got) > 0 || tt.note != "" && !reflect.DeepEqual(got, want) {
			t.Errorf("%d holders: notes %q, want %q", tt.holders, got, tt.note)
		}
	}
}
