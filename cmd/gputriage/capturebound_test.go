package main

import (
	"testing"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/triage"
)

// TestCaptureBoundHoldsEverySection: a host whose probe fills every section to the client's own
// bound sends a whole capture, never one the client cuts (and then reads as truncated): the
// bound on one host's output holds every section at its limit, a base64 section's grown by a
// third and a newline every 76 characters, with their markers and rc trailers.
func TestCaptureBoundHoldsEverySection(t *testing.T) {
	total := 0
	for _, name := range parse.SectionNames() {
		n := parse.SectionLimit(name) + 64 // the rc trailer travels inside the bound
		if parse.IsBase64Section(name) {
			n = n * 4 / 3 * 77 / 76
		}
		total += n + 256
	}
	if total >= triage.MaxCaptureBytes {
		t.Errorf("every section at its limit is %d bytes, over the capture bound of %d", total, triage.MaxCaptureBytes)
	}
}
