package simfleet_test

import (
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

func TestSyntheticCaptureParses(t *testing.T) {
	s, err := parse.Parse(simfleet.SyntheticCapture(5000, 100000))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Processes) != 5000 || len(s.Shm.Entries) != 100000 || s.Truncated || len(s.GPUs) != 8 {
		t.Errorf("processes %d, shm entries %d, truncated %v, GPUs %d", len(s.Processes), len(s.Shm.Entries), s.Truncated, len(s.GPUs))
	}
	for _, n := range s.Notes {
		t.Errorf("note %+v", n)
	}
}
