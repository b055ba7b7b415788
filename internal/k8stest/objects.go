package k8stest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// GPUResource is the extended resource a GPU node advertises (NVIDIA's device plugin's).
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// CreateNode creates a node that kwok manages, advertising gpus GPUs (capacity and
// allocatable nvidia.com/gpu, label nvidia.com/gpu.present=true) when gpus > 0, and waits until
// kwok has made it Ready.
func (l *Lab) CreateNode(name string, gpus int) *corev1.Node {
	l.t.Helper()
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("512Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	labels := map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
	if gpus > 0 {
		res[GPUResource] = resource.MustParse(strconv.Itoa(gpus))
		labels["nvidia.com/gpu.present"] = "true"
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{Capacity: res, Allocatable: res.DeepCopy()},
	}
	if _, err := l.Client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		l.t.Fatalf("k8stest: create node %s: %v", name, err)
	}
	var got *corev1.Node
	l.waitFor("node "+name+" Ready", func() bool {
		n, err := l.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				got = n
				return true
			}
		}
		return false
	})
	return got
}

// NewPod returns a pod to create: namespace/name bound to node, one container of each name
// given ("main" when none), each with a placeholder image kwok never pulls.
func NewPod(namespace, name, node string, containers ...string) *corev1.Pod {
	if len(containers) == 0 {
		containers = []string{"main"}
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "gputriage-lab/none"})
	}
	return pod
}

// CreatePod creates pod (its namespace too, when missing) and waits until kwok has made it
// Running; it returns the pod as the API then has it (UID, container IDs, IP).
func (l *Lab) CreatePod(pod *corev1.Pod) *corev1.Pod {
	l.t.Helper()
	ctx := context.Background()
	if pod.Namespace == "" {
		pod.Namespace = "default"
	}
	l.CreateNamespace(pod.Namespace)
	if _, err := l.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		l.t.Fatalf("k8stest: create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	var got *corev1.Pod
	l.waitFor("pod "+pod.Namespace+"/"+pod.Name+" Running", func() bool {
		p, err := l.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning {
			got = p
		}
		return got != nil
	})
	return got
}

// CreateNamespace creates namespace ns unless it exists.
func (l *Lab) CreateNamespace(ns string) {
	l.t.Helper()
	_, err := l.Client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		l.t.Fatalf("k8stest: create namespace %s: %v", ns, err)
	}
}

// DaemonSetPod creates, on node, the pod that the DaemonSet namespace/name would have there:
// the lab runs no controller manager, so a DaemonSet (contrib/k8s's agent) makes no pods of
// its own. The pod carries the template's labels and containers and the DaemonSet as its
// controlling owner; it is returned once Running.
func (l *Lab) DaemonSetPod(namespace, name, node string) *corev1.Pod {
	l.t.Helper()
	ds, err := l.Client.AppsV1().DaemonSets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		l.t.Fatalf("k8stest: get daemonset %s/%s: %v", namespace, name, err)
	}
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(),
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Namespace, pod.Name = namespace, name+"-"+node
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet",
		Name: ds.Name, UID: ds.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
	pod.Spec.NodeName = node
	return l.CreatePod(pod)
}

// Apply applies every object of a multi-document YAML file (contrib/k8s/*.yaml) as AdminUser,
// in file order, by server-side apply: applying again updates in place.
func (l *Lab) Apply(path string) {
	l.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := l.apply(b); err != nil {
		l.t.Fatalf("k8stest: apply %s: %v", path, err)
	}
}

func (l *Lab) apply(manifest []byte) error {
	dc, err := discovery.NewDiscoveryClientForConfig(l.Config)
	if err != nil {
		return err
	}
	groups, err := restmapper.GetAPIGroupResources(dc)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	dyn, err := dynamic.NewForConfig(l.Config)
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var obj unstructured.Unstructured
		if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			continue // an empty document
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if obj.GetNamespace() == "" {
				obj.SetNamespace("default")
			}
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		body, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := true
		_, err = ri.Patch(context.Background(), obj.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "gputriage-k8stest", Force: &force})
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
}
