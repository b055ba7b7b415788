package podfacts

import (
	"encoding/json"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gputriage/gputriage/parse"
)

func owned(kind, name string, labels map[string]string) metav1.ObjectMeta {
	yes := true
	return metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{
		{Kind: "Node", Name: "not-a-controller"},
		{Kind: kind, Name: name, Controller: &yes},
	}}
}

func TestOwner(t *testing.T) {
	cases := []struct {
		meta       metav1.ObjectMeta
		kind, name string
	}{
		{owned("ReplicaSet", "vllm-7d9f8b6c5d", map[string]string{"pod-template-hash": "7d9f8b6c5d"}), "Deployment", "vllm"},
		{owned("ReplicaSet", "by-hand", map[string]string{"pod-template-hash": "7d9f8b6c5d"}), "ReplicaSet", "by-hand"},
		{owned("ReplicaSet", "x-7d9f8b6c5d", nil), "ReplicaSet", "x-7d9f8b6c5d"},
		{owned("Job", "train", nil), "Job", "train"},
		{owned("StatefulSet", "db", nil), "StatefulSet", "db"},
		{owned("DaemonSet", "dcgm", nil), "DaemonSet", "dcgm"},
		{metav1.ObjectMeta{}, "", ""},
	}
	for _, c := range cases {
		p := corev1.Pod{ObjectMeta: c.meta}
		if k, n := Owner(&p); k != c.kind || n != c.name {
			t.Errorf("Owner(%v) = %s %s, want %s %s", c.meta.OwnerReferences, k, n, c.kind, c.name)
		}
	}
}

func TestEncodePods(t *testing.T) {
	now := metav1.Now()
	on := func(node, name string) corev1.Pod {
		p := corev1.Pod{ObjectMeta: owned("Job", "train", nil), Spec: corev1.PodSpec{NodeName: node}}
		p.Name, p.Namespace, p.UID = name, "ml", types.UID("uid-"+name)
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", ContainerID: "containerd://abc"}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "init", ContainerID: "containerd://def"}}
		return p
	}
	gone := on("n1", "b")
	gone.DeletionTimestamp = &now
	var doc parse.K8sPods
	if err := json.Unmarshal(EncodePods("n1", []corev1.Pod{on("n1", "a"), on("n2", "x"), gone}, nil), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Node != "n1" || len(doc.Pods) != 2 {
		t.Fatalf("doc = %+v", doc)
	}
	a := doc.Pods[0]
	want := parse.K8sPod{UID: "uid-a", Namespace: "ml", Name: "a", Phase: "Running", OwnerKind: "Job", OwnerName: "train",
		Containers: []parse.K8sContainer{{Name: "init", ID: "containerd://def"}, {Name: "main", ID: "containerd://abc"}}}
	if a.UID != want.UID || a.OwnerKind != "Job" || len(a.Containers) != 2 || a.Containers[1] != want.Containers[1] || a.Deleting {
		t.Errorf("pod a = %+v", a)
	}
	if !doc.Pods[1].Deleting || doc.Pods[1].DeleteBy == nil || !doc.Pods[1].DeleteBy.Equal(now.Time) {
		t.Errorf("pod b: deleting %v by %v, want by %v", doc.Pods[1].Deleting, doc.Pods[1].DeleteBy, now)
	}
	if string(EncodePods("n9", nil, nil)) != `{"node":"n9","pods":[]}` {
		t.Errorf("empty = %s", EncodePods("n9", nil, nil))
	}
}

// A pod the API listed before the probe and not after is kept, marked gone during the probe;
// a pod in both listings, or one listed only after, is not; without a listing before, none is.
func TestEncodePodsGoneDuringProbe(t *testing.T) {
	pod := func(name string) corev1.Pod {
		p := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
		p.Name, p.Namespace, p.UID = name, "ml", types.UID("uid-"+name)
		return p
	}
	read := func(b []byte) map[string]bool {
		var doc parse.K8sPods
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, p := range doc.Pods {
			m[p.Name] = p.GoneDuringProbe
		}
		return m
	}
	before := []corev1.Pod{pod("stays"), pod("deleted")}
	after := []corev1.Pod{pod("stays"), pod("new")}
	got := read(EncodePods("n1", after, before))
	if want := map[string]bool{"stays": false, "new": false, "deleted": true}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pods = %v, want %v", got, want)
	}
	if got := read(EncodePods("n1", after, nil)); fmt.Sprint(got) != fmt.Sprint(map[string]bool{"stays": false, "new": false}) {
		t.Errorf("without a listing before: %v", got)
	}
}

// Listings that together pass parse.K8sMaxPods: every pod the API still lists comes first and
// is read; only pods gone during the probe are cut, and the cut list proves no pod gone.
func TestEncodePodsMergedPastBound(t *testing.T) {
	pod := func(name string) corev1.Pod {
		p := corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}}
		p.Name, p.Namespace, p.UID = name, "ml", types.UID("uid-"+name)
		return p
	}
	var before, after []corev1.Pod
	for i := range parse.K8sMaxPods {
		before = append(before, pod(fmt.Sprint("old-", i)))
		if i < parse.K8sMaxPods-10 {
			after = append(after, pod(fmt.Sprint("new-", i)))
		}
	}
	const n = "0123456789abcdef0123456789abcdef"
	head := "gputriage-capture v2 nonce=" + n + "\n@@gputriage " + n + " begin host limit=100\nhostname=x\n\n@@gputriage " + n + " rc=0\n@@gputriage " + n + " end host\n@@gputriage " + n + " done\n"
	raw, ok := parse.AppendK8s([]byte(head), parse.K8sBlock{Node: "n1", Pods: EncodePods("n1", after, before)})
	if !ok {
		t.Fatal("no block")
	}
	c, err := parse.SplitCapture(raw)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := parse.ParseK8s(raw, c)
	if k == nil || !k.PodsCut || len(k.Pods) != parse.K8sMaxPods {
		t.Fatalf("block %+v", k)
	}
	for i := range after {
		if p := k.Pod(string(after[i].UID)); p == nil || p.GoneDuringProbe {
			t.Fatalf("a pod the API still lists was cut or marked: %s", after[i].Name)
		}
	}
}
