package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gputriage/gputriage/kube/podfacts"
	"github.com/gputriage/gputriage/sshexec"
)

// The Kubernetes block the client appends to a node's capture after the probe's output (the
// design's shape; package parse reads it): the node's pods as the API lists them, and the
// kubelet's device allocations as the agent reads them. The node's output comes first and
// is bounded to leave BlockMax, so the block is always the capture's last bytes and a
// capture with it stays within the client's bound.
const (
	SectionMax = 1 << 20                  // bound of each JSON document
	BlockMax   = 2*SectionMax + 4<<10     // the block with its framing
	blockBegin = "gputriage-k8s v1 node=" // then the node's name, base64
)

// PodResourcesCommand is the agent's command that prints the kubelet's allocations.
var PodResourcesCommand = []string{"gputriage", "k8s-agent", "podresources"}

// block is the Kubernetes block for node, and notes on what it lacks: pods the API would
// not list, allocations the agent could not read.
func (k *Cluster) block(ctx context.Context, node, pod string) ([]byte, []string) {
	var notes []string
	b := &bytes.Buffer{}
	fmt.Fprintf(b, "%s%s\n", blockBegin, base64.StdEncoding.EncodeToString([]byte(node)))
	if pods, err := k.podsJSON(ctx, node); err != nil {
		notes = append(notes, "pods on the node: "+errText(err))
	} else {
		section(b, "pods", pods)
	}
	if alloc, err := k.podResources(ctx, pod); err != nil {
		notes = append(notes, "the kubelet's GPU allocations (gputriage k8s-agent podresources): "+errText(err))
	} else {
		section(b, "podresources", alloc)
	}
	b.WriteString("@@k8s done\n")
	return b.Bytes(), notes
}

func section(b *bytes.Buffer, name string, doc []byte) {
	fmt.Fprintf(b, "@@k8s begin %s\n%s\n@@k8s end %s\n", name, bytes.TrimRight(doc, "\n"), name)
}

// podsJSON lists node's pods in every namespace and encodes them (podfacts.EncodePods).
func (k *Cluster) podsJSON(ctx context.Context, node string) ([]byte, error) {
	list, err := k.cs.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	doc := podfacts.EncodePods(node, list.Items)
	if len(doc) > SectionMax {
		return nil, fmt.Errorf("%d pods make %d bytes, more than the %d a capture holds: left out", len(list.Items), len(doc), SectionMax)
	}
	return doc, nil
}

// podResources runs PodResourcesCommand in the agent, bounded: its JSON, or why there is none.
func (k *Cluster) podResources(ctx context.Context, pod string) ([]byte, error) {
	out := &capped{limit: SectionMax, stop: func() {}}
	errOut := &capped{limit: 4 << 10}
	code, err := k.streamBounded(ctx, pod, PodResourcesCommand, nil, out, errOut)
	doc, cut := out.close()
	stderr, _ := errOut.close()
	switch {
	case err != nil:
		return nil, err
	case cut:
		return nil, fmt.Errorf("more than %d bytes: left out", SectionMax)
	case code != 0 || len(bytes.TrimSpace(doc)) == 0:
		msg := fmt.Sprintf("exit status %d", code)
		if head := sshexec.StderrHead(stderr); head != "" {
			msg += ": " + head
		}
		return nil, fmt.Errorf("%s", msg)
	}
	return doc, nil
}
