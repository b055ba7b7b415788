package podres

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
)

// AgentUsage is `gputriage k8s-agent`'s help.
const AgentUsage = `Usage: gputriage k8s-agent podresources [--socket PATH]

Run on a Kubernetes node, in the gputriage agent pod (contrib/k8s): prints as JSON the
devices the node's kubelet allocated to each pod (its PodResources v1 List), for the client
to append to the node's capture. Not meant to be run by hand.

  --socket PATH   the kubelet's pod-resources socket (default: $` + SocketEnv + ` when set,
                  else ` + DefaultSocket + `)
`

// Agent runs `gputriage k8s-agent ARGS...` when args start with "k8s-agent": ok is false
// otherwise, and the caller goes on with its own commands. The exit status is 0 when the
// answer was printed, 1 when the kubelet could not be asked, 2 on a usage error.
func Agent(ctx context.Context, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	if len(args) == 0 || args[0] != "k8s-agent" {
		return 0, false
	}
	fs := flag.NewFlagSet("k8s-agent podresources", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", Socket(os.Getenv), "")
	if len(args) < 2 || args[1] != "podresources" || fs.Parse(args[2:]) != nil || fs.NArg() > 0 {
		fmt.Fprint(stderr, AgentUsage)
		return 2, true
	}
	b, err := List(ctx, *socket, DefaultLimits)
	if err != nil {
		fmt.Fprintf(stderr, "gputriage k8s-agent: %v\n", err)
		return 1, true
	}
	fmt.Fprintf(stdout, "%s\n", b)
	return 0, true
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
