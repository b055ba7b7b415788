package kube

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GPUResource is the device plugin's resource; GPULabel is GPU feature discovery's label.
const (
	GPUResource = "nvidia.com/gpu"
	GPULabel    = "nvidia.com/gpu.present"
)

// Nodes lists what k8s/ names, sorted: the nodes the selector picks, or with none every node
// with a GPU (allocatable or capacity nvidia.com/gpu above 0, or label
// nvidia.com/gpu.present=true).
func (k *Cluster) Nodes(ctx context.Context) ([]string, error) {
	var names []string
	opts := metav1.ListOptions{LabelSelector: k.cfg.Selector, Limit: 500}
	for {
		list, err := k.cs.listNodes(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing nodes (context %s): %v", k.context, err)
		}
		for i := range list.Items {
			if n := &list.Items[i]; k.cfg.Selector != "" || HasGPU(n) {
				names = append(names, n.Name)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.Sort(names)
	return names, nil
}

// HasGPU reports whether a node says it has NVIDIA GPUs.
func HasGPU(n *corev1.Node) bool {
	for _, rl := range []corev1.ResourceList{n.Status.Allocatable, n.Status.Capacity} {
		if q, ok := rl[GPUResource]; ok && q.Sign() > 0 {
			return true
		}
	}
	return n.Labels[GPULabel] == "true"
}
