// Package podrestest serves the kubelet's PodResources v1 API (List, GetAllocatableResources,
// Get) over gRPC on a unix socket in a test's temporary directory, answering the allocations
// the test sets: the same wire protocol the kubelet speaks, for the client that reads the
// real socket (kube/podres).
package podrestest

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server is a PodResources server on a unix socket.
type Server struct {
	podresv1.UnimplementedPodResourcesListerServer
	// Socket is the path of its unix socket.
	Socket string

	mu          sync.Mutex
	pods        []*podresv1.PodResources
	allocatable []*podresv1.ContainerDevices
	calls       int
}

// Start serves on a socket in t.TempDir() until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{Socket: filepath.Join(t.TempDir(), "kubelet.sock")}
	l, err := net.Listen("unix", s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	podresv1.RegisterPodResourcesListerServer(g, s)
	go g.Serve(l) //nolint:errcheck // ends with Stop
	t.Cleanup(g.Stop)
	return s
}

// GPU is one allocation of devices of resource nvidia.com/gpu to a container.
func GPU(container string, ids ...string) *podresv1.ContainerResources {
	return &podresv1.ContainerResources{Name: container, Devices: []*podresv1.ContainerDevices{
		{ResourceName: "nvidia.com/gpu", DeviceIds: ids}}}
}

// SetPod sets pod namespace/name's containers, replacing what it had.
func (s *Server) SetPod(namespace, name string, containers ...*podresv1.ContainerResources) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := &podresv1.PodResources{Namespace: namespace, Name: name, Containers: containers}
	for i, o := range s.pods {
		if o.Namespace == namespace && o.Name == name {
			s.pods[i] = p
			return
		}
	}
	s.pods = append(s.pods, p)
}

// SetAllocatable sets what GetAllocatableResources answers.
func (s *Server) SetAllocatable(devs ...*podresv1.ContainerDevices) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allocatable = devs
}

// Calls is how many List calls it answered.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// List answers every pod set.
func (s *Server) List(context.Context, *podresv1.ListPodResourcesRequest) (*podresv1.ListPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return &podresv1.ListPodResourcesResponse{PodResources: append([]*podresv1.PodResources(nil), s.pods...)}, nil
}

// GetAllocatableResources answers the devices set by SetAllocatable.
func (s *Server) GetAllocatableResources(context.Context, *podresv1.AllocatableResourcesRequest) (*podresv1.AllocatableResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &podresv1.AllocatableResourcesResponse{Devices: append([]*podresv1.ContainerDevices(nil), s.allocatable...)}, nil
}

// Get answers one pod, or NotFound as the kubelet does.
func (s *Server) Get(_ context.Context, r *podresv1.GetPodResourcesRequest) (*podresv1.GetPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pods {
		if p.Namespace == r.PodNamespace && p.Name == r.PodName {
			return &podresv1.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s not found in namespace %s", r.PodName, r.PodNamespace)
}
