package parse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

const k8sNonce = "0123456789abcdef0123456789abcdef"

// k8sProbeCapture is a minimal capture the probe could have sent: a header, one section, done.
func k8sProbeCapture(extra string) []byte {
	p := "@@gputriage " + k8sNonce + " "
	return []byte("gputriage-capture v2 nonce=" + k8sNonce + "\n" +
		p + "begin host limit=65536\nprobe_version=2\nhostname=node-a\nuid=0\ntimeout=1\n" + p + "rc=0\n" + p + "end host\n" +
		extra + p + "done\n")
}

func k8sPodsJSON(t testing.TB, pods ...K8sPod) []byte {
	b, err := json.Marshal(K8sPods{Node: "node-a", Pods: pods})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var hostileName = "evil\x1b[31m\n@@k8s end pods\n@@k8s done\n| a | b |" + strings.Repeat("x", 40)

func TestK8sBlockRoundTrip(t *testing.T) {
	pod := K8sPod{UID: "6f1c7a0e-1b2c-4d5e-8f90-123456789abc", Namespace: hostileName, Name: "train-0", Phase: "Running",
		OwnerKind: "Job", OwnerName: "train", Containers: []K8sContainer{{Name: "main", ID: "containerd://" + strings.Repeat("ab", 32)}}}
	res := []byte(`{"pods":[{"namespace":"ns","name":"train-0","containers":[{"name":"main","devices":[{"resource":"nvidia.com/gpu","ids":["GPU-1"]}]}]}]}`)
	raw, ok := AppendK8s(k8sProbeCapture(""), K8sBlock{Node: "node\na", Pods: k8sPodsJSON(t, pod), PodResources: res})
	if !ok {
		t.Fatal("AppendK8s refused a complete capture")
	}
	s, err := Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if s.K8s == nil || !s.K8s.PodsKnown || s.K8s.Node != "node\na" || len(s.K8s.Pods) != 1 || s.K8s.Resources == nil {
		t.Fatalf("K8s = %+v", s.K8s)
	}
	if got := s.K8s.Pods[0]; got.Namespace != hostileName || got.Containers[0].ID != pod.Containers[0].ID {
		t.Errorf("pod = %+v", got)
	}
	if r := s.K8s.Resources.PodResources("ns", "train-0"); r == nil || r.Containers[0].Devices[0].IDs[0] != "GPU-1" {
		t.Errorf("resources = %+v", s.K8s.Resources)
	}
	if s.Truncated || len(s.Notes) != 0 {
		t.Errorf("truncated %v, notes %v", s.Truncated, s.Notes)
	}
}

// Nothing the node sends makes a block: not one after its done line (AppendK8s cuts it, and
// a capture without the client's block has none), not one before it, not one without the
// nonce.
func TestK8sBlockUnforgeable(t *testing.T) {
	forged := string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Node: "x", Pods: k8sPodsJSON(t, K8sPod{UID: "u", Name: "forged"})}))
	_, block, _ := strings.Cut(forged, "@@gputriage "+k8sNonce+" done\n")
	p := "@@gputriage " + k8sNonce + " "
	cases := map[string][]byte{
		"inside a section": k8sProbeCapture(p + "begin smi-apps limit=1\n" + block + p + "rc=0\n" + p + "end smi-apps\n"),
		"between sections": k8sProbeCapture(block),
		"wrong nonce":      []byte(strings.Replace(forged, "gputriage-k8s v1 nonce="+k8sNonce, "gputriage-k8s v1 nonce=ffff", 1)),
	}
	for name, raw := range cases {
		if s, _ := Parse(raw); s.K8s != nil {
			t.Errorf("%s: a block was read: %+v", name, s.K8s)
		}
	}
	// The node printed a block of its own after its done line: the client's append drops it.
	nodeSent := []byte(forged)
	out := mustAppend(t, nodeSent, K8sBlock{Node: "real", Pods: k8sPodsJSON(t)})
	s, _ := Parse(out)
	if s.K8s == nil || s.K8s.Node != "real" || len(s.K8s.Pods) != 0 || bytes.Contains(out, []byte("forged")) {
		t.Errorf("the node's block survived the client's append: %+v\n%s", s.K8s, out)
	}
	if got := CutAtDone(nodeSent); !bytes.Equal(got, k8sProbeCapture("")) {
		t.Errorf("CutAtDone kept %q", got)
	}
}

func mustAppend(t testing.TB, raw []byte, b K8sBlock) []byte {
	out, ok := AppendK8s(raw, b)
	if !ok {
		t.Fatal("AppendK8s refused")
	}
	return out
}

// A capture cut before done gets no block; a block cut, duplicated, malformed or too large is
// noted, and what it cannot prove is not claimed (PodsKnown, Resources).
func TestK8sBlockDamaged(t *testing.T) {
	if _, ok := AppendK8s([]byte("gputriage-capture v2 nonce="+k8sNonce+"\n"), K8sBlock{Pods: []byte("{}")}); ok {
		t.Error("AppendK8s appended to a capture without done")
	}
	full := string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Node: "n", Pods: k8sPodsJSON(t, K8sPod{UID: "u"}), PodResourcesFail: "exec: no such file"}))
	podsSec := full[strings.Index(full, "@@k8s begin pods"):strings.Index(full, "@@k8s begin podresources-error")]
	var many []K8sPod
	for i := range K8sMaxPods + 1 {
		many = append(many, K8sPod{UID: fmt.Sprint(i)})
	}
	cases := []struct {
		name, raw string
		known     bool
		note      string
	}{
		{"cut", full[:strings.Index(full, "@@k8s end pods")], false, "ends before its final marker"},
		{"twice", strings.Replace(full, podsSec, podsSec+podsSec, 1), false, "2 times"},
		{"unknown field", string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: []byte(`{"node":"n","pods":[],"x":1}`)})), false, "unknown field"},
		{"two documents", string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: []byte(`{"pods":[]} {}`)})), false, "more than one"},
		{"too large", string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: bytes.Repeat([]byte(" "), K8sMaxSectionBytes+1)})), false, "larger than"},
		{"too many pods", string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: k8sPodsJSON(t, many...)})), true, "no pod is judged gone"},
		{"podresources failed", full, true, "exec: no such file"},
		{"podresources absent", string(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: k8sPodsJSON(t)})), true, "no answer from the node's kubelet"},
	}
	for _, c := range cases {
		s, _ := Parse([]byte(c.raw))
		if s.K8s == nil {
			t.Errorf("%s: no block", c.name)
			continue
		}
		if s.K8s.PodsKnown != c.known || s.K8s.Resources != nil {
			t.Errorf("%s: PodsKnown %v Resources %v", c.name, s.K8s.PodsKnown, s.K8s.Resources)
		}
		if !hasK8sNote(s.Notes, c.note) {
			t.Errorf("%s: notes %v lack %q", c.name, s.Notes, c.note)
		}
	}
	s, _ := Parse([]byte(cases[5].raw))
	if !s.K8s.PodsCut || len(s.K8s.Pods) != K8sMaxPods {
		t.Errorf("too many pods: cut %v, %d pods", s.K8s.PodsCut, len(s.K8s.Pods))
	}
}

func TestK8sResourcesBounded(t *testing.T) {
	ids := make([]string, K8sMaxDeviceIDs+1)
	for i := range ids {
		ids[i] = fmt.Sprintf("GPU-%d", i)
	}
	doc, _ := json.Marshal(K8sResources{Pods: []K8sPodResources{{Namespace: "a", Name: "b",
		Containers: []K8sContainerResources{{Name: "c", Devices: []K8sDevices{{Resource: "nvidia.com/gpu", IDs: ids}}}}}}})
	s, _ := Parse(mustAppend(t, k8sProbeCapture(""), K8sBlock{Pods: k8sPodsJSON(t), PodResources: doc}))
	r := s.K8s.Resources
	if r == nil || !r.Cut || len(r.Pods[0].Containers[0].Devices[0].IDs) != K8sMaxDeviceIDs {
		t.Fatalf("resources %+v", r)
	}
	if !hasK8sNote(s.Notes, "no GPU allocation is judged") {
		t.Errorf("notes %v", s.Notes)
	}
}

func hasK8sNote(notes []Note, sub string) bool {
	for _, n := range notes {
		if n.Code == NoteK8s && strings.Contains(n.Message, sub) {
			return true
		}
	}
	return false
}

// FuzzK8sBlock: any bytes after a real capture's done line parse without panic, within the
// bounds, and never claim more pods than the bound.
func FuzzK8sBlock(f *testing.F) {
	f.Add(string(mustAppend(f, k8sProbeCapture(""), K8sBlock{Node: "n", Pods: k8sPodsJSON(f, K8sPod{UID: "u", Containers: []K8sContainer{{Name: "c"}}}),
		PodResources: []byte(`{"pods":[{"namespace":"a","name":"b","containers":[{"name":"c","devices":[{"resource":"r","ids":["GPU-1"]}]}]}]}`)})))
	f.Add(string(mustAppend(f, k8sProbeCapture(""), K8sBlock{PodResourcesFail: "x"})))
	f.Add(string(k8sProbeCapture("")) + "gputriage-k8s v1 nonce=" + k8sNonce + " node=\n@@k8s begin pods\n@@k8s begin pods\n")
	f.Fuzz(func(t *testing.T, raw string) {
		s, _ := Parse([]byte(raw))
		if s.K8s == nil {
			return
		}
		if len(s.K8s.Pods) > K8sMaxPods {
			t.Fatalf("%d pods", len(s.K8s.Pods))
		}
		for _, p := range s.K8s.Pods {
			if len(p.Containers) > K8sMaxContainers || len(p.Name) > k8sMaxString {
				t.Fatalf("pod %+v out of bounds", p)
			}
		}
		if r := s.K8s.Resources; r != nil {
			for _, p := range r.Pods {
				for _, c := range p.Containers {
					for _, d := range c.Devices {
						if len(d.IDs) > K8sMaxDeviceIDs {
							t.Fatalf("%d ids", len(d.IDs))
						}
					}
				}
			}
		}
	})
}

// A pods section whose client could not list the pods before the probe says so: the reader
// keeps the pods, marks the list, and notes why no pod will be judged gone.
func TestK8sBlockBeforeUnknown(t *testing.T) {
	doc, err := json.Marshal(K8sPods{Node: "node-a", Pods: []K8sPod{}, BeforeUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := AppendK8s(k8sProbeCapture(""), K8sBlock{Node: "node-a", Pods: doc})
	if !ok {
		t.Fatal("AppendK8s refused a complete capture")
	}
	s, _ := Parse(raw)
	if s.K8s == nil || !s.K8s.PodsKnown || !s.K8s.PodsBeforeUnknown {
		t.Fatalf("K8s = %+v", s.K8s)
	}
	if len(s.Notes) == 0 || !strings.Contains(s.Notes[0].Message, "could not be listed before the probe ran") {
		t.Errorf("notes %v", s.Notes)
	}
}
