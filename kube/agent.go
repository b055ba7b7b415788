package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputriage/gputriage/sshexec"
)

// agentPod finds the agent on node: a pod of the agent namespace with AgentLabel, scheduled
// there (spec.nodeName), Running, not being deleted, with the agent container running; the
// first by name when there are several. With none, it says how to get one, or that the node
// does not exist.
func (k *Cluster) agentPod(hctx, ctx context.Context, node string, timeout time.Duration) (string, *sshexec.Error) {
	if err := CheckNode(node); err != nil {
		return "", &sshexec.Error{Phase: sshexec.PhaseResolve, Kind: sshexec.KindConfig, Message: err.Error()}
	}
	list, err := k.cs.listPods(hctx, k.ns, metav1.ListOptions{LabelSelector: AgentLabel, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return "", k.ctxError(hctx, ctx, sshexec.PhaseConnect, "finding the gputriage agent pod", timeout, err)
	}
	var ready []string
	for i := range list.Items {
		if p := &list.Items[i]; agentRunning(p) {
			ready = append(ready, p.Name)
		}
	}
	if len(ready) > 0 {
		slices.Sort(ready)
		return ready[0], nil
	}
	if _, err := k.cs.getNode(hctx, node); apierrors.IsNotFound(err) {
		return "", &sshexec.Error{Phase: sshexec.PhaseResolve, Kind: sshexec.KindNameLookup,
			Message: fmt.Sprintf("no node %s in the cluster of context %s", node, k.context)}
	}
	return "", &sshexec.Error{Phase: sshexec.PhaseConnect, Kind: sshexec.KindUnreachable, Err: errNoAgent, Message: NoAgentMessage(node, k.ns)}
}

// NoAgentMessage says that node runs no agent, and the two ways on: install the agent, or
// probe the node once through a node debug pod (docs/kubernetes.md).
func NoAgentMessage(node, ns string) string {
	return fmt.Sprintf("no gputriage agent pod running on node %s (namespace %s, label %s): install contrib/k8s/agent.yaml (docs/kubernetes.md), or probe the node without it: %s",
		node, ns, AgentLabel, DebugRoute(node))
}

// DebugRoute is the command line that probes node without the agent, through kubectl debug's
// node profile: the host's own sh (chroot /host) runs the probe gputriage probe-script prints,
// and the capture it writes is triaged with --replay.
func DebugRoute(node string) string {
	return fmt.Sprintf("gputriage probe-script | kubectl debug node/%s --profile=sysadmin -i --quiet --image=%s -- chroot /host sh -s > %s.capture && gputriage --replay %s.capture",
		node, DebugImage, node, node)
}

// DebugImage is the image of the debug route: any image with chroot will do.
const DebugImage = "busybox:1.37"

// agentRunning reports whether p can run the probe: Running, not being deleted, with an agent
// container that is running (or has no status yet).
func agentRunning(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == AgentContainer {
			return cs.State.Running != nil
		}
	}
	return slices.ContainsFunc(p.Spec.Containers, func(c corev1.Container) bool { return c.Name == AgentContainer })
}

// ctxError is an API failure, or the host's deadline or Ctrl-C when that is why it failed.
func (k *Cluster) ctxError(hctx, ctx context.Context, phase, what string, timeout time.Duration, err error) *sshexec.Error {
	switch {
	case ctx.Err() != nil:
		return &sshexec.Error{Phase: phase, Kind: sshexec.KindInterrupted, Message: "interrupted during " + phase + ": " + what}
	case hctx.Err() != nil:
		return &sshexec.Error{Phase: phase, Kind: sshexec.KindTimeout, Err: err,
			Message: fmt.Sprintf("%s: the API server did not answer within the %s host timeout", what, timeout)}
	}
	return k.apiError(phase, what, err)
}

// isAuth: the server refused the credentials, or RBAC does not allow the request.
func isAuth(err error) bool {
	return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) || strings.Contains(err.Error(), "forbidden")
}
