package kube

import (
	"bytes"
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputriage/gputriage/kube/podfacts"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/sshexec"
)

// The Kubernetes block (parse.AppendK8s, docs/capture.md) the client appends to a node's
// capture after the probe's final marker: the node's pods as the API lists them, and the
// kubelet's device allocations as the agent reads them. The node's output is bounded as an
// SSH host's; the block adds at most BlockMax.
const BlockMax = 3 << 20 // two sections of parse.K8sMaxSectionBytes, base64, with framing

// PodResourcesCommand is the agent's command that prints the kubelet's allocations
// (cmd/gputriage-agent, in the agent image).
var PodResourcesCommand = []string{"gputriage-agent", "podresources"}

// appendBlock is raw with the Kubernetes block of node appended, and notes on what it lacks.
// A capture cut short (no final marker) gets no block.
// before is the node's pods as listed before the probe ran (listBefore, never nil): a pod
// listed then and not after is kept, marked gone during the probe (podfacts.Pods).
func (k *Cluster) appendBlock(ctx context.Context, node, pod string, raw []byte, before *podListing) ([]byte, []string) {
	var notes []string
	b := parse.K8sBlock{Node: node}
	if before.err != nil {
		notes = append(notes, "the pods on the node were not listed before the probe ("+errText(before.err)+"): no pod is judged gone on this run")
	}
	if pods, err := k.podsJSON(ctx, node, before); err != nil {
		notes = append(notes, "the pods on the node are not known: "+errText(err))
	} else {
		b.Pods = pods
	}
	if alloc, err := k.podResources(ctx, pod); err != nil {
		b.PodResourcesFail = errText(err)
	} else {
		b.PodResources = alloc
	}
	out, ok := parse.AppendK8s(raw, b)
	if !ok {
		notes = append(notes, "the probe's output has no final marker: its pods are not added")
	}
	return out, notes
}

// podListing is the API's pods on a node at one moment, or why they are not known.
type podListing struct {
	pods []corev1.Pod
	err  error
}

// listNodePods lists node's pods in every namespace.
func (k *Cluster) listNodePods(ctx context.Context, node string) *podListing {
	list, err := k.cs.listPods(ctx, metav1.NamespaceAll, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return &podListing{err: err}
	}
	return &podListing{pods: list.Items}
}

// podsJSON lists node's pods in every namespace and encodes them with the pods listed before
// the probe (podfacts.Pods); a listing before that failed is said in the document, so that
// the reader judges no pod gone.
func (k *Cluster) podsJSON(ctx context.Context, node string, before *podListing) ([]byte, error) {
	now := k.listNodePods(ctx, node)
	if now.err != nil {
		return nil, now.err
	}
	d := podfacts.Pods(node, now.pods, before.pods)
	d.BeforeUnknown = before.err != nil
	doc := podfacts.Marshal(d)
	if len(doc) > parse.K8sMaxSectionBytes {
		return nil, fmt.Errorf("%d pods make %d bytes, more than the %d a capture holds: left out", len(now.pods), len(doc), parse.K8sMaxSectionBytes)
	}
	return doc, nil
}

// podResources runs PodResourcesCommand in the agent, bounded: its JSON, or why there is none.
func (k *Cluster) podResources(ctx context.Context, pod string) ([]byte, error) {
	out := &capped{limit: parse.K8sMaxSectionBytes, stop: func() {}}
	errOut := &capped{limit: 4 << 10}
	code, err := k.streamBounded(ctx, pod, PodResourcesCommand, nil, out, errOut)
	doc, cut := out.close()
	stderr, _ := errOut.close()
	switch {
	case err != nil:
		return nil, err
	case cut:
		return nil, fmt.Errorf("more than %d bytes: left out", parse.K8sMaxSectionBytes)
	case code != 0 || len(bytes.TrimSpace(doc)) == 0:
		msg := fmt.Sprintf("exit status %d", code)
		if head := sshexec.StderrHead(stderr); head != "" {
			msg += ": " + head
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return doc, nil
}
