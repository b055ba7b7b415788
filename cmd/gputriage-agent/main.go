// Command gputriage-agent is the gputriage node agent's binary, for the agent image
// (contrib/k8s): it asks the node's kubelet which GPUs it allocated to each pod, for the client
// to append to the node's capture (docs/kubernetes.md). It is a binary of its own so that the
// gRPC client this needs is not linked into the laptop's gputriage.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/gputriage/gputriage/kube/podres"
)

// version, revision and modified are stamped by scripts/release.sh (-ldflags -X), as
// gputriage's are.
var version, revision, modified string

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := 0
	if len(os.Args) == 2 && os.Args[1] == "version" {
		fmt.Println(versionText())
	} else {
		code = podres.Agent(ctx, os.Args[1:], os.Stdout, os.Stderr)
	}
	stop()
	os.Exit(code)
}

// versionText is what `gputriage-agent version` prints: the stamped version, else the
// module's, and the revision when stamped.
func versionText() string {
	v := version
	if v == "" {
		v = "(devel)"
		if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
			v = bi.Main.Version
		}
	}
	s := "gputriage-agent " + v
	if revision != "" {
		s += "\nrevision:  " + revision
		if modified == "true" {
			s += " (modified)"
		}
	}
	return s
}
