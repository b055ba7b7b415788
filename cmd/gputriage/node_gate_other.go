//go:build !linux

package main

import (
	"context"

	"github.com/gputriage/gputriage/diagnose"
)

// idleNodeFacts: the gate reads /proc, which only Linux has; elsewhere it always doubts and
// node-check runs the probe.
func idleNodeFacts(_ context.Context, f *diagnose.IdleFacts) {
	f.Unseen = append(f.Unseen, "not Linux: /proc cannot be read")
}
