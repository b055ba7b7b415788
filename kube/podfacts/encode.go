// Package podfacts encodes what the API says of a node's pods into the capture's Kubernetes
// block (section "pods"), in the JSON shape parse reads.
//
// This file is k8sreach's minimal encoder in the agreed shape, written until k8spods's lands:
// k8spods owns this package and replaces it.
package podfacts

import (
	"encoding/json"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// MaxPods and MaxContainers bound what is encoded, as parse bounds what it reads.
const (
	MaxPods       = 1024
	MaxContainers = 64
)

// Pods is the "pods" section.
type Pods struct {
	Node string `json:"node"`
	Pods []Pod  `json:"pods"`
}

// Pod is one pod on the node.
type Pod struct {
	UID        string      `json:"uid"`
	Namespace  string      `json:"namespace"`
	Name       string      `json:"name"`
	Phase      string      `json:"phase"`
	OwnerKind  string      `json:"owner_kind,omitempty"`
	OwnerName  string      `json:"owner_name,omitempty"`
	Deleting   bool        `json:"deleting"`
	Containers []Container `json:"containers"`
}

// Container is one container of a pod, with the ID its cgroup carries.
type Container struct {
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
}

// EncodePods encodes at most MaxPods of node's pods. A pod's controller is its owner; a
// ReplicaSet named <deployment>-<the pod's pod-template-hash label> is named as its
// Deployment, without asking the API for the ReplicaSet.
func EncodePods(node string, pods []corev1.Pod) []byte {
	out := Pods{Node: node, Pods: []Pod{}}
	for i := range pods[:min(len(pods), MaxPods)] {
		p := &pods[i]
		e := Pod{UID: string(p.UID), Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase),
			Deleting: p.DeletionTimestamp != nil, Containers: []Container{}}
		e.OwnerKind, e.OwnerName = owner(p)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if len(e.Containers) < MaxContainers {
				e.Containers = append(e.Containers, Container{Name: cs.Name, ID: cs.ContainerID})
			}
		}
		out.Pods = append(out.Pods, e)
	}
	b, _ := json.Marshal(out) // strings and bools only: cannot fail
	return b
}

// owner is p's controller, a ReplicaSet named as its Deployment.
func owner(p *corev1.Pod) (kind, name string) {
	for _, o := range p.OwnerReferences {
		if o.Controller == nil || !*o.Controller {
			continue
		}
		hash := p.Labels["pod-template-hash"]
		if d, ok := strings.CutSuffix(o.Name, "-"+hash); o.Kind == "ReplicaSet" && hash != "" && ok && d != "" {
			return "Deployment", d
		}
		return o.Kind, o.Name
	}
	return "", ""
}
