package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

// core is the part of the API gputriage asks: nodes and pods of core/v1, and pods/exec. It is a
// REST client over a scheme of core/v1 alone rather than client-go's clientset, whose scheme
// registers every API group: that took the binary from 13 to 76 MB and a replay's resident
// memory from 11 to 37 MiB, on laptops that never reach a cluster (docs/performance.md).
type core struct{ rc *rest.RESTClient }

// coreAPI is what Cluster asks of core: the REST client above, or a test's fake API.
type coreAPI interface {
	listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error)
	listNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	getNode(ctx context.Context, name string) (*corev1.Node, error)
	execRequest(ns, name string, opts *corev1.PodExecOptions) *rest.Request
}

var (
	coreScheme = runtime.NewScheme()
	coreCodecs = serializer.NewCodecFactory(coreScheme)
	coreParams = runtime.NewParameterCodec(coreScheme)
)

func init() {
	if err := corev1.AddToScheme(coreScheme); err != nil {
		panic(err) // a scheme of one static group cannot fail to build
	}
}

// newCore is a core/v1 client for cfg (which it does not change).
func newCore(cfg *rest.Config) (core, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/api"
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.NegotiatedSerializer = coreCodecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	return core{rc}, err
}

// listPods lists the pods of namespace ns ("" for every namespace).
func (c core) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	var l corev1.PodList
	err := c.rc.Get().Namespace(ns).Resource("pods").VersionedParams(&opts, coreParams).Do(ctx).Into(&l)
	return &l, err
}

// listNodes lists the nodes.
func (c core) listNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	var l corev1.NodeList
	err := c.rc.Get().Resource("nodes").VersionedParams(&opts, coreParams).Do(ctx).Into(&l)
	return &l, err
}

// getNode gets one node.
func (c core) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	var n corev1.Node
	err := c.rc.Get().Resource("nodes").Name(name).Do(ctx).Into(&n)
	return &n, err
}

// execRequest is the pods/exec request of opts in pod ns/name.
func (c core) execRequest(ns, name string, opts *corev1.PodExecOptions) *rest.Request {
	return c.rc.Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").VersionedParams(opts, coreParams)
}
