package parse

import (
	"reflect"
	"strings"
	"testing"
)

// TestParseV2LaunchEnv: "env NAME=VALUE" fields fill Process.Launch; a value the probe would
// not send (not digits, too long, a run id with other bytes) is an error and left out, a name
// it does not read is ignored, and a name given twice contests the block.
func TestParseV2LaunchEnv(t *testing.T) {
	i := func(n int) *int { return &n }
	tests := []struct {
		name   string
		fields []string
		want   *LaunchEnv
		err    bool
	}{
		{"a rank", []string{"env TORCHELASTIC_RUN_ID=5c3d9a1e-7f2b-4e0a-9d3c-1b2a3c4d5e6f", "env TORCHELASTIC_RESTART_COUNT=2", "env LOCAL_RANK=1", "env GROUP_RANK=0"},
			&LaunchEnv{RunID: "5c3d9a1e-7f2b-4e0a-9d3c-1b2a3c4d5e6f", RestartCount: i(2), LocalRank: i(1), GroupRank: i(0)}, false},
		{"LOCAL_RANK alone", []string{"env LOCAL_RANK=0"}, &LaunchEnv{LocalRank: i(0)}, false},
		{"none", nil, nil, false},
		{"a rank that is not digits", []string{"env LOCAL_RANK=-1"}, nil, true},
		{"seven digits", []string{"env LOCAL_RANK=1234567"}, nil, true},
		{"a run id with a space", []string{"env TORCHELASTIC_RUN_ID=a b"}, nil, true},
		{"a run id too long", []string{"env TORCHELASTIC_RUN_ID=" + strings.Repeat("a", 129)}, nil, true},
		{"another variable", []string{"env AWS_SECRET_ACCESS_KEY=x"}, nil, true},
	}
	for _, tt := range tests {
		procs, contested, err := ParseProcsV2(strings.NewReader(procV2(5, "python3", tt.fields...)), nil, 100)
		if len(procs) != 1 || len(contested) != 0 || (err != nil) != tt.err || !reflect.DeepEqual(procs[0].Launch, tt.want) {
			t.Errorf("%s: procs %+v contested %v err %v", tt.name, procs, contested, err)
		}
	}
	procs, contested, _ := ParseProcsV2(strings.NewReader(procV2(5, "python3", "env LOCAL_RANK=0", "env LOCAL_RANK=1")+procV2(6, "python3")), nil, 100)
	if len(procs) != 1 || procs[0].PID != 6 || !reflect.DeepEqual(contested, []int{5}) {
		t.Errorf("a variable given twice: procs %+v contested %v", procs, contested)
	}
}
