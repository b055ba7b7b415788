package main

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// The fixtures read like the incidents they record: the previous deployment's leftover on
// ct200 and the healthy vLLM workers on busy have run for hours, not 0 s.
func TestFixtureAges(t *testing.T) {
	for name, minSeconds := range map[string]int64{"ct200": 2 * 3600, "busy": 5 * 3600} {
		out, errOut, _ := cli(t, nil, "--replay", filepath.Join(repoRoot(t), "fixtures", name+".capture"), "--format", "json")
		var doc struct {
			Hosts []struct {
				Processes []struct {
					PID            int    `json:"pid"`
					ElapsedSeconds *int64 `json:"elapsed_seconds"`
				} `json:"processes"`
			} `json:"hosts"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 1 || len(doc.Hosts[0].Processes) == 0 {
			t.Fatalf("%s: %v\n%s%s", name, err, out, errOut)
		}
		for _, p := range doc.Hosts[0].Processes {
			if p.ElapsedSeconds == nil {
				t.Errorf("%s: PID %d has no age", name, p.PID)
			} else if *p.ElapsedSeconds < minSeconds {
				t.Errorf("%s: PID %d has run %d s, want at least %d", name, p.PID, *p.ElapsedSeconds, minSeconds)
			}
		}
	}
}
