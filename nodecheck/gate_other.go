//go:build !linux

package nodecheck

import (
	"context"
)

// idleNodeFacts: the gate reads /proc, which only Linux has; elsewhere it always doubts and
// node-check runs the probe.
func idleNodeFacts(_ context.Context, f *IdleFacts) {
	f.Unseen = append(f.Unseen, "not Linux: /proc cannot be read")
}
