package probe

import (
	"strings"
	"testing"
)

// TestSMIDirsAreTheProbes: the directories FindSMI and NoDriver look in for nvidia-smi are
// those the probe looks in, in its order, and those its "not found" line names.
func TestSMIDirsAreTheProbes(t *testing.T) {
	var loop, said []string
	for _, d := range SMIDirs {
		loop = append(loop, d+"/nvidia-smi")
		said = append(said, d)
	}
	at := strings.Index(script, "for _c in ")
	if at < 0 {
		t.Fatal("probe.sh has no loop over nvidia-smi's directories")
	}
	for _, l := range loop {
		i := strings.Index(script[at:], l)
		if i < 0 {
			t.Fatalf("probe.sh does not look for %s after the ones before it", l)
		}
		at += i
	}
	if !strings.Contains(script, "not found on PATH or in "+strings.Join(said[:len(said)-1], ", ")+", "+said[len(said)-1]) {
		t.Errorf("probe.sh's not-found line does not name %v", said)
	}
}
