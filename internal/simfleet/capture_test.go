package simfleet_test

import (
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

// A busy host at the client's caps on records (parse.RecordCap) parses whole, without a note.
func TestSyntheticCaptureParses(t *testing.T) {
	s, err := parse.Parse(simfleet.SyntheticCapture(parse.RecordCap("procs"), parse.RecordCap("shm-ls")))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Processes) != parse.RecordCap("procs") || len(s.Shm.Entries) != parse.RecordCap("shm-ls") || s.Truncated || len(s.GPUs) != 8 {
		t.Errorf("processes %d, shm entries %d, truncated %v, GPUs %d", len(s.Processes), len(s.Shm.Entries), s.Truncated, len(s.GPUs))
	}
	for _, n := range s.Notes {
		t.Errorf("note %+v", n)
	}
}
