// Package podfacts turns the API's pods on a node into the pods section of the Kubernetes
// block a client appends to the node's capture (parse.K8sPods, docs/capture.md).
package podfacts

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gputriage/gputriage/parse"
)

// EncodePods is the pods section's JSON for node: each pod of pods that runs on node, with
// its owner and its containers' ids (init and ephemeral containers too: any may hold a GPU).
// before, when not nil, is the API's listing taken before the probe ran and pods the one
// after: a pod of before that pods no longer has is kept, marked gone during the probe.
func EncodePods(node string, pods, before []corev1.Pod) []byte {
	return Marshal(Pods(node, pods, before))
}

// Marshal is doc's JSON.
func Marshal(doc parse.K8sPods) []byte {
	b, err := json.Marshal(doc)
	if err != nil { // the document holds strings, bools and slices only
		panic(err)
	}
	return b
}

// Pods is the pods section's document for EncodePods.
func Pods(node string, pods, before []corev1.Pod) parse.K8sPods {
	doc := parse.K8sPods{Node: node, Pods: []parse.K8sPod{}}
	after := map[string]bool{}
	for i := range pods {
		after[string(pods[i].UID)] = true
	}
	for i := range before {
		if !after[string(before[i].UID)] {
			pods = append(pods[:len(pods):len(pods)], before[i])
		}
	}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != node {
			continue
		}
		kind, name := Owner(p)
		kp := parse.K8sPod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase),
			OwnerKind: kind, OwnerName: name, Deleting: p.DeletionTimestamp != nil, Containers: []parse.K8sContainer{},
			GoneDuringProbe: before != nil && !after[string(p.UID)]}
		if p.DeletionTimestamp != nil {
			by := p.DeletionTimestamp.UTC()
			kp.DeleteBy = &by
		}
		for _, sts := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
			for _, cs := range sts {
				kp.Containers = append(kp.Containers, parse.K8sContainer{Name: cs.Name, ID: cs.ContainerID})
			}
		}
		doc.Pods = append(doc.Pods, kp)
	}
	return doc
}

// Owner is the pod's controller as people name it: a ReplicaSet named "<deployment>-<hash>"
// is named as its Deployment, from the names alone, without asking the API for the
// ReplicaSet (the Deployment controller names every ReplicaSet so; a ReplicaSet made by hand
// under another name stays a ReplicaSet). Job, StatefulSet, DaemonSet and any other kind
// are named as they are; "" when the pod has no controller.
func Owner(p *corev1.Pod) (kind, name string) {
	for _, ref := range p.OwnerReferences {
		if ref.Controller == nil || !*ref.Controller {
			continue
		}
		if ref.Kind == "ReplicaSet" {
			if hash := p.Labels["pod-template-hash"]; hash != "" {
				if d, ok := strings.CutSuffix(ref.Name, "-"+hash); ok && d != "" {
					return "Deployment", d
				}
			}
		}
		return ref.Kind, ref.Name
	}
	return "", ""
}
