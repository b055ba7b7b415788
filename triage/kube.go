package triage

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/sshexec"
)

// withSelector is ts with k8s/ added when --k8s-selector picks nodes and no target is k8s/.
func (c *Config) withSelector(ts []hostlist.Target) []hostlist.Target {
	if c.Kube.Selector == "" || slices.ContainsFunc(ts, func(t hostlist.Target) bool { return t.Host == kube.Prefix }) {
		return ts
	}
	return append(slices.Clone(ts), hostlist.Target{Host: kube.Prefix})
}

// resolveNodes is the nodes a k8s/ target names: k8s/NODE that node (checked at the probe,
// where its agent is looked up), k8s/ the nodes the API lists.
func (c *Config) resolveNodes(t hostlist.Target, node string) ([]Host, error) {
	if t.User != "" || t.Port != 0 {
		return nil, usagef("%s: a Kubernetes node is reached through the API server: no user or port", t)
	}
	if node != "" {
		if err := kube.CheckNode(node); err != nil {
			return nil, usagef("%s: %v", t, err)
		}
	}
	if c.kube == nil {
		k, err := kube.Open(c.Kube)
		if err != nil {
			return nil, usagef("%s: %v", t, err)
		}
		c.kube = k
	}
	if node != "" {
		return []Host{{Label: kube.Label(node), Node: node, kube: c.kube}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(c.Timeout, time.Minute))
	defer cancel()
	names, err := c.kube.Nodes(ctx)
	if err != nil {
		return nil, usagef("%s: %v", t, err)
	}
	if len(names) == 0 {
		what := "no GPU nodes (nvidia.com/gpu allocatable, or label nvidia.com/gpu.present=true)"
		if c.Kube.Selector != "" {
			what = "no nodes match --k8s-selector " + c.Kube.Selector
		}
		return nil, usagef("%s: %s in context %s", t, what, c.kube.Context())
	}
	hs := make([]Host, len(names))
	for i, n := range names {
		hs[i] = Host{Label: kube.Label(n), Node: n, kube: c.kube}
	}
	return hs, nil
}

// kubeTarget reaches node h through its agent, running command there; the probe's output
// gets the Kubernetes block (block). The agent runs as root: --sudo's wrapper has nothing to
// add there, and the plain sh runs.
func (c *Config) kubeTarget(h Host, command string, block bool) sshexec.Target {
	if command == probeCommand(true) {
		command = probeCommand(false)
	}
	return sshexec.Target{Name: h.Label, Via: kube.NodeVia{K: h.kube, Node: h.Node, Command: command, Block: block}}
}
