package parse

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The Kubernetes block (docs/capture.md, "The Kubernetes block"): what the client appends to
// a node's capture after the probe's final marker. The node's bytes end at the probe's first
// `done` line for the nonce (AppendK8s cuts anything after it), so nothing a node or its
// tenants send can open the block; each section's body travels base64-encoded, so nothing in
// a pod name or in the node's PodResources answer can end it.
const (
	k8sMagic  = "gputriage-k8s v1 nonce="
	k8sPrefix = "@@k8s "
	k8sDone   = "@@k8s done"
)

// The block's sections.
const (
	K8sSectionPods         = "pods"               // the API's pods on the node (K8sPods JSON)
	K8sSectionPodResources = "podresources"       // the kubelet's PodResources List (K8sResources JSON)
	K8sSectionPodResError  = "podresources-error" // why there is no podresources: text
)

// Bounds on the block, whatever it holds.
const (
	K8sMaxSectionBytes = 1 << 20 // a section's decoded JSON
	K8sMaxPods         = 1024
	K8sMaxContainers   = 64 // of a pod
	K8sMaxDeviceIDs    = 64 // of one resource of a container
	k8sMaxString       = 512
	k8sMaxErrorBytes   = 4 << 10
)

// NoteK8s is the note of a Kubernetes block that could not be read whole: a section missing,
// malformed or cut (its verdicts are then not made, and the note says why).
const NoteK8s = "k8s-facts-limited"

// K8s is what the client learnt of a Kubernetes node's pods: the API's pods on the node, and
// the devices the node's kubelet allocated to them. Pods is nil when the API's list is not
// in the block (PodsKnown false); Resources nil when the kubelet's answer is not.
type K8s struct {
	Node      string
	PodsKnown bool
	// PodsCut is set when the list held more than K8sMaxPods pods: a pod left out of it is
	// not gone.
	PodsCut bool
	// PodsBeforeUnknown is set when the client could not list the node's pods before the
	// probe ran (K8sPods.BeforeUnknown): a pod missing from the list may have been deleted
	// while the probe looked, so none is judged gone.
	PodsBeforeUnknown bool
	Pods              []K8sPod
	Resources         *K8sResources
}

// K8sPods is the pods section's JSON document.
type K8sPods struct {
	Node string   `json:"node"`
	Pods []K8sPod `json:"pods"`
	// BeforeUnknown: the client's listing from before the probe failed, so pods deleted
	// while the probe ran cannot be told from pods long gone (K8sPod.GoneDuringProbe).
	BeforeUnknown bool `json:"before_unknown,omitempty"`
}

// K8sPod is one pod as the API gave it. OwnerKind and OwnerName are its controller
// (a ReplicaSet named <deployment>-<hash> is given as its Deployment); Deleting is set once
// the API has a deletion time for it: DeleteBy, the time its grace period ends (the API's
// deletionTimestamp).
type K8sPod struct {
	UID       string     `json:"uid"`
	Namespace string     `json:"namespace"`
	Name      string     `json:"name"`
	Phase     string     `json:"phase"`
	OwnerKind string     `json:"owner_kind,omitempty"`
	OwnerName string     `json:"owner_name,omitempty"`
	Deleting  bool       `json:"deleting,omitempty"`
	DeleteBy  *time.Time `json:"delete_by,omitempty"`
	// GoneDuringProbe: the API listed the pod on the node before the probe ran and no longer
	// lists it after: it was deleted while the probe looked, so what the probe saw of it may
	// have been its containers stopping. Such a pod proves no process of its left over.
	GoneDuringProbe bool           `json:"gone_during_probe,omitempty"`
	Containers      []K8sContainer `json:"containers"`
}

// K8sContainer is one container of a pod: its name and the runtime's id as the API gives it
// ("containerd://<64 hex>"; empty before it started).
type K8sContainer struct {
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
}

// K8sResources is the podresources section's JSON document: the kubelet's allocations.
type K8sResources struct {
	Pods []K8sPodResources `json:"pods"`
	// Cut is set when the answer was cut at the block's bounds: an allocation left out of
	// it is not none.
	Cut bool `json:"-"`
}

// K8sPodResources is one pod's allocations.
type K8sPodResources struct {
	Namespace  string                  `json:"namespace"`
	Name       string                  `json:"name"`
	Containers []K8sContainerResources `json:"containers"`
}

// K8sContainerResources is one container's allocated devices, per resource. Dynamic is set
// when the kubelet names dynamic resources (DRA claims) of it too: its GPUs are then not
// all in Devices.
type K8sContainerResources struct {
	Name    string       `json:"name"`
	Devices []K8sDevices `json:"devices"`
	Dynamic bool         `json:"dynamic,omitempty"`
}

// K8sDevices is the device ids of one resource ("nvidia.com/gpu": GPU UUIDs, MIG UUIDs).
type K8sDevices struct {
	Resource string   `json:"resource"`
	IDs      []string `json:"ids"`
}

// Pod is the pod of uid, or nil.
func (k *K8s) Pod(uid string) *K8sPod {
	for i := range k.Pods {
		if k.Pods[i].UID == uid {
			return &k.Pods[i]
		}
	}
	return nil
}

// PodResources is the kubelet's allocations of pod namespace/name, or nil.
func (r *K8sResources) PodResources(namespace, name string) *K8sPodResources {
	for i := range r.Pods {
		if r.Pods[i].Namespace == namespace && r.Pods[i].Name == name {
			return &r.Pods[i]
		}
	}
	return nil
}

// CutAtDone is what the host sent of a capture: up to and including the probe's first final
// marker for the capture's nonce. A capture without one is returned whole.
func CutAtDone(raw []byte) []byte {
	c, err := SplitCapture(raw)
	if err != nil || !c.Done {
		return raw
	}
	return raw[:c.DoneEnd:c.DoneEnd]
}

// K8sBlock is what a client appends for a Kubernetes node: the node's name, the API's pods
// (the pods JSON, from kube/podfacts.EncodePods), and the kubelet's allocations (the
// podresources JSON, from `gputriage-agent podresources`) or why there are none.
type K8sBlock struct {
	Node             string
	Pods             []byte
	PodResources     []byte
	PodResourcesFail string
}

// AppendK8s appends the Kubernetes block to a capture, after cutting whatever followed the
// probe's final marker. A capture without that marker was cut short: it is returned as it
// is, without the block (a block after an incomplete capture could not be told from the
// host's bytes), and ok is false.
func AppendK8s(raw []byte, b K8sBlock) (out []byte, ok bool) {
	c, err := SplitCapture(raw)
	if err != nil || !c.Done {
		return raw, false
	}
	var w bytes.Buffer
	w.Write(raw[:c.DoneEnd])
	if c.DoneEnd > 0 && raw[c.DoneEnd-1] != '\n' {
		w.WriteByte('\n')
	}
	w.WriteString(k8sMagic + c.Nonce + " node=" + base64.StdEncoding.EncodeToString([]byte(b.Node)) + "\n")
	section := func(name string, body []byte) {
		w.WriteString(k8sPrefix + "begin " + name + "\n")
		enc := base64.StdEncoding.EncodeToString(body)
		for len(enc) > 76 {
			w.WriteString(enc[:76] + "\n")
			enc = enc[76:]
		}
		if enc != "" {
			w.WriteString(enc + "\n")
		}
		w.WriteString(k8sPrefix + "end " + name + "\n")
	}
	if b.Pods != nil {
		section(K8sSectionPods, b.Pods)
	}
	if b.PodResources != nil {
		section(K8sSectionPodResources, b.PodResources)
	} else if b.PodResourcesFail != "" {
		section(K8sSectionPodResError, []byte(b.PodResourcesFail))
	}
	w.WriteString(k8sDone + "\n")
	return w.Bytes(), true
}

// k8sReader reads a Kubernetes block into a K8s and notes.
type k8sReader struct {
	k     *K8s
	notes []Note
}

func (r *k8sReader) note(format string, args ...any) {
	r.notes = append(r.notes, Note{Code: NoteK8s, Message: fmt.Sprintf(format, args...)})
}

// ParseK8s reads the Kubernetes block of a capture split as c from raw: nil when the capture
// has none (an ordinary host), and the notes on what of it could not be read.
func ParseK8s(raw []byte, c *Capture) (*K8s, []Note) {
	if c == nil || !c.Done || c.DoneEnd > len(raw) {
		return nil, nil
	}
	rest := raw[c.DoneEnd:]
	first, rest, _ := bytes.Cut(rest, []byte("\n"))
	first = bytes.TrimSuffix(first, []byte("\r"))
	head, ok := bytes.CutPrefix(first, []byte(k8sMagic+c.Nonce+" node="))
	if !ok {
		return nil, nil
	}
	r := &k8sReader{k: &K8s{}}
	if node, err := base64.StdEncoding.DecodeString(string(head)); err == nil && len(node) <= k8sMaxString {
		r.k.Node = string(node)
	} else {
		r.note("the Kubernetes block's node name is unreadable")
	}
	secs, done := splitK8s(rest)
	if !done {
		r.note("the Kubernetes block ends before its final marker: what it holds is read as far as it goes")
	}
	seen := map[string]int{}
	for _, s := range secs {
		seen[s.name]++
	}
	for _, s := range secs {
		if seen[s.name] > 1 {
			continue
		}
		r.section(s)
	}
	for name, n := range seen {
		if n > 1 {
			r.note("the Kubernetes block holds section %s %d times: none of its copies is used", clip(name, 64), n)
		}
	}
	if !r.k.PodsKnown {
		r.note("the Kubernetes block has no readable list of the node's pods: no pod is judged gone or ended")
	}
	if seen[K8sSectionPodResources]+seen[K8sSectionPodResError] == 0 {
		r.note("the Kubernetes block has no answer from the node's kubelet about GPU allocations: no GPU allocation is judged")
	}
	return r.k, r.notes
}

// k8sSection is one section of the block: its name, its base64 text, and whether its end
// marker came.
type k8sSection struct {
	name  string
	text  []byte
	ended bool
}

// splitK8s splits the block after its header line into sections, and says whether its final
// marker came. At most 8 sections are read.
func splitK8s(rest []byte) (secs []k8sSection, done bool) {
	var cur *k8sSection
	for len(rest) > 0 && len(secs) <= 8 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		m, marker := bytes.CutPrefix(line, []byte(k8sPrefix))
		switch {
		case !marker && cur != nil:
			if len(cur.text) <= k8sMaxEncoded {
				cur.text = append(cur.text, line...)
			}
		case string(line) == k8sDone:
			if cur != nil {
				secs = append(secs, *cur)
			}
			return secs, true
		case bytes.HasPrefix(m, []byte("begin ")):
			if cur != nil {
				secs = append(secs, *cur)
			}
			cur = &k8sSection{name: string(m[len("begin "):])}
		case bytes.HasPrefix(m, []byte("end ")) && cur != nil && string(m[len("end "):]) == cur.name:
			cur.ended = true
			secs = append(secs, *cur)
			cur = nil
		}
	}
	if cur != nil {
		secs = append(secs, *cur)
	}
	return secs, false
}

// k8sMaxEncoded is the base64 text of a section at its bound.
const k8sMaxEncoded = (K8sMaxSectionBytes + 2) / 3 * 4

// section reads one section of the block into r.k.
func (r *k8sReader) section(s k8sSection) {
	name := clip(s.name, 64)
	if len(s.text) > k8sMaxEncoded {
		r.note("section %s of the Kubernetes block is larger than %d bytes: not read", name, K8sMaxSectionBytes)
		return
	}
	body, err := base64.StdEncoding.DecodeString(string(s.text))
	if len(body) > K8sMaxSectionBytes {
		r.note("section %s of the Kubernetes block is larger than %d bytes: not read", name, K8sMaxSectionBytes)
		return
	}
	if err != nil || !s.ended {
		r.note("section %s of the Kubernetes block is cut or not base64: not read", name)
		return
	}
	switch s.name {
	case K8sSectionPods:
		var doc K8sPods
		if err := strictJSON(body, &doc); err != nil {
			r.note("section pods of the Kubernetes block: %s: not read", clip(err.Error(), 200))
			return
		}
		r.k.Pods, r.k.PodsKnown = r.boundPods(doc.Pods), true
		if r.k.PodsBeforeUnknown = doc.BeforeUnknown; doc.BeforeUnknown {
			r.note("the node's pods could not be listed before the probe ran: a pod the API no longer lists may have been deleted while the probe looked, so no pod is judged gone")
		}
	case K8sSectionPodResources:
		var doc K8sResources
		if err := strictJSON(body, &doc); err != nil {
			r.note("section podresources of the Kubernetes block: %s: not read; no GPU allocation is judged", clip(err.Error(), 200))
			return
		}
		pods, cut := r.boundResources(doc.Pods)
		r.k.Resources = &K8sResources{Pods: pods, Cut: cut}
	case K8sSectionPodResError:
		r.note("the kubelet's GPU allocations are unknown (%s): no GPU allocation is judged", clip(strings.ToValidUTF8(string(body), "?"), k8sMaxErrorBytes))
	}
}

// strictJSON decodes one JSON document into v: no unknown field, nothing after it.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON document")
	}
	return nil
}

// boundPods keeps at most K8sMaxPods pods, K8sMaxContainers containers of each and
// k8sMaxString bytes of each string, and notes what it left out.
func (r *k8sReader) boundPods(pods []K8sPod) []K8sPod {
	cut := false
	if len(pods) > K8sMaxPods {
		r.note("section pods of the Kubernetes block lists %d pods: the first %d are read, and no pod is judged gone", len(pods), K8sMaxPods)
		pods, r.k.PodsCut = pods[:K8sMaxPods], true
	}
	for i := range pods {
		p := &pods[i]
		for _, s := range []*string{&p.UID, &p.Namespace, &p.Name, &p.Phase, &p.OwnerKind, &p.OwnerName} {
			cut = clipField(s) || cut
		}
		if len(p.Containers) > K8sMaxContainers {
			p.Containers, cut = p.Containers[:K8sMaxContainers], true
		}
		for j := range p.Containers {
			cut = clipField(&p.Containers[j].Name) || cut
			cut = clipField(&p.Containers[j].ID) || cut
		}
	}
	if cut {
		r.note("section pods of the Kubernetes block: strings longer than %d bytes or pods with more than %d containers were cut", k8sMaxString, K8sMaxContainers)
	}
	return pods
}

// boundResources bounds the kubelet's allocations as boundPods bounds the pods.
func (r *k8sReader) boundResources(pods []K8sPodResources) (_ []K8sPodResources, cut bool) {
	if len(pods) > K8sMaxPods {
		pods, cut = pods[:K8sMaxPods], true
	}
	for i := range pods {
		p := &pods[i]
		cut = clipField(&p.Namespace) || clipField(&p.Name) || cut
		if len(p.Containers) > K8sMaxContainers {
			p.Containers, cut = p.Containers[:K8sMaxContainers], true
		}
		for j := range p.Containers {
			c := &p.Containers[j]
			cut = clipField(&c.Name) || cut
			if len(c.Devices) > K8sMaxContainers {
				c.Devices, cut = c.Devices[:K8sMaxContainers], true
			}
			for k := range c.Devices {
				d := &c.Devices[k]
				cut = clipField(&d.Resource) || cut
				if len(d.IDs) > K8sMaxDeviceIDs {
					d.IDs, cut = d.IDs[:K8sMaxDeviceIDs], true
				}
				for l := range d.IDs {
					cut = clipField(&d.IDs[l]) || cut
				}
			}
		}
	}
	if cut {
		r.note("section podresources of the Kubernetes block was cut at its bounds (%d pods, %d containers a pod, %d device ids each, %d bytes a string): no GPU allocation is judged", K8sMaxPods, K8sMaxContainers, K8sMaxDeviceIDs, k8sMaxString)
	}
	return pods, cut
}

// clipField cuts *s to k8sMaxString bytes and reports whether it did.
func clipField(s *string) bool {
	if len(*s) <= k8sMaxString {
		return false
	}
	*s = (*s)[:k8sMaxString]
	return true
}
