// Package podres asks a node's kubelet which devices it allocated to each pod, through its
// PodResources v1 API (k8s.io/kubelet/pkg/apis/podresources/v1) on the kubelet's unix socket,
// and answers in the podresources section's JSON (parse.K8sResources, docs/capture.md). It
// is the node side of `gputriage-agent podresources` (cmd/gputriage-agent), run in the
// gputriage agent pod.
package podres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gputriage/gputriage/parse"
)

// DefaultSocket is where the kubelet serves the PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// Limits bound one List: the largest answer read from the kubelet, and how long it may take.
type Limits struct {
	MaxMessageBytes int
	Timeout         time.Duration
}

// DefaultLimits are the kubelet's own client's message bound (16 MiB) and 10 s.
var DefaultLimits = Limits{MaxMessageBytes: 16 << 20, Timeout: 10 * time.Second}

// List asks the kubelet on socketPath for its allocations and returns them as the
// podresources section's JSON: each pod's containers with their devices (CPUs and memory
// left out), at most parse.K8sMaxSectionBytes.
func List(ctx context.Context, socketPath string, lim Limits) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socketPath,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(lim.MaxMessageBytes)))
	if err != nil {
		return nil, fmt.Errorf("podresources: %w", err)
	}
	defer conn.Close()
	resp, err := podresv1.NewPodResourcesListerClient(conn).List(ctx, &podresv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("podresources List on %s: %w", socketPath, err)
	}
	b, err := json.Marshal(Encode(resp))
	if err != nil {
		return nil, err
	}
	if len(b) > parse.K8sMaxSectionBytes {
		return nil, fmt.Errorf("podresources: the kubelet's answer is %d bytes as JSON, more than the %d the capture takes", len(b), parse.K8sMaxSectionBytes)
	}
	return b, nil
}

// Encode is the kubelet's answer in the podresources section's shape, whole: the reader cuts
// it at the block's bounds, and so knows it was cut. A container with dynamic resources (DRA claims) is marked Dynamic: its devices are
// not all in Devices.
func Encode(resp *podresv1.ListPodResourcesResponse) parse.K8sResources {
	out := parse.K8sResources{Pods: []parse.K8sPodResources{}}
	for _, p := range resp.GetPodResources() {
		pr := parse.K8sPodResources{Namespace: p.GetNamespace(), Name: p.GetName(), Containers: []parse.K8sContainerResources{}}
		for _, c := range p.GetContainers() {
			cr := parse.K8sContainerResources{Name: c.GetName(), Devices: []parse.K8sDevices{}, Dynamic: len(c.GetDynamicResources()) > 0}
			for _, d := range c.GetDevices() {
				cr.Devices = append(cr.Devices, parse.K8sDevices{Resource: d.GetResourceName(), IDs: d.GetDeviceIds()})
			}
			pr.Containers = append(pr.Containers, cr)
		}
		out.Pods = append(out.Pods, pr)
	}
	return out
}
