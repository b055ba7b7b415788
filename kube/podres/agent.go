package podres

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

// AgentUsage is the agent binary's help (cmd/gputriage-agent).
const AgentUsage = `Usage: gputriage-agent podresources [--socket PATH]
       gputriage-agent version

Run on a Kubernetes node, in the gputriage agent pod (contrib/k8s): prints as JSON the
devices the node's kubelet allocated to each pod (its PodResources v1 List), for the client
to append to the node's capture. Not meant to be run by hand.

  --socket PATH   the kubelet's pod-resources socket (default: $` + SocketEnv + ` when set,
                  else ` + DefaultSocket + `)
`

// Agent runs `gputriage-agent ARGS...`: `podresources [--socket PATH]`. The exit status is
// 0 when the answer was printed, 1 when the kubelet could not be asked, 2 on a usage error.
func Agent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("podresources", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", Socket(os.Getenv), "")
	if len(args) < 1 || args[0] != "podresources" || fs.Parse(args[1:]) != nil || fs.NArg() > 0 {
		fmt.Fprint(stderr, AgentUsage)
		return 2
	}
	b, err := List(ctx, *socket, DefaultLimits)
	if err != nil {
		fmt.Fprintf(stderr, "gputriage-agent: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0
}

// SocketEnv names the environment variable that gives the agent's default socket: for a
// kubelet whose root directory is not /var/lib/kubelet (k0s, microk8s and others), when the
// agent's mount of it is not at DefaultSocket's directory.
const SocketEnv = "GPUTRIAGE_PODRESOURCES_SOCKET"

// Socket is the default socket: getenv(SocketEnv) when set and not empty, else DefaultSocket.
func Socket(getenv func(string) string) string {
	if s := getenv(SocketEnv); s != "" {
		return s
	}
	return DefaultSocket
}
