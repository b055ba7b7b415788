package diagnose

import (
	"slices"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// Kubernetes: a GPU process's cgroup names its pod's UID and its container's id; the
// Kubernetes block of the capture (parse.K8s) says what the API knows of the pod and which
// GPUs the kubelet allocated to it. Without the block, nothing here changes a result.

// Reason codes of processes in Kubernetes pods.
const (
	// ReasonPodGone: the process runs in the cgroup of a pod the API no longer lists on the
	// node (deleted: its containers should have been stopped with it). Strong.
	ReasonPodGone ReasonCode = "pod-gone"
	// ReasonPodEnded: its pod has ended (phase Succeeded or Failed, in State), yet it runs.
	// Strong.
	ReasonPodEnded ReasonCode = "pod-ended"
	// ReasonPodTerminating: its pod was deleted and its grace period ended more than
	// podGraceMargin before the probe ran (Age: how long ago), yet it runs. Strong.
	ReasonPodTerminating ReasonCode = "pod-terminating"
	// ReasonPodNotAllocated: it holds memory on GPUs (GPUs) the kubelet did not allocate to
	// its running pod (the reason of gpu-outside-allocation on Kubernetes).
	ReasonPodNotAllocated ReasonCode = "pod-not-allocated"
)

// PodFacts is what the words say of the Kubernetes pod a process runs in: its UID (from the
// process's cgroup), and what the API said of it: namespace, name, the container's name,
// its controller, its phase. Gone is set when the API lists no pod of that UID on the node.
type PodFacts struct {
	UID       string `json:"pod_uid"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"pod,omitempty"`
	Container string `json:"container,omitempty"`
	OwnerKind string `json:"owner_kind,omitempty"`
	OwnerName string `json:"owner_name,omitempty"`
	Phase     string `json:"phase,omitempty"`
	Gone      bool   `json:"gone,omitempty"`
	// GoneDuringProbe is set when the API listed the pod before the probe ran and not after:
	// it was deleted while the probe looked, which proves nothing of its processes.
	GoneDuringProbe bool `json:"gone_during_probe,omitempty"`
	// StartedDuringProbe is set, with Gone, when the process started after the probe did (by the
	// host's clock, a second's rounding aside): after the client's first listing, so that its
	// pod may have been created after that listing and deleted before the second; its absence
	// from both proves nothing.
	StartedDuringProbe bool `json:"started_during_probe,omitempty"`
	// Static is set, with Gone, when the UID is one the kubelet made for a static pod (from a
	// manifest on the node): 32 hex digits, which the API never makes. The API lists such a pod
	// as its mirror, under a UID of its own, so its absence proves nothing.
	Static bool `json:"static,omitempty"`
	// DeleteBy is when its grace period ended, when the pod is being deleted.
	DeleteBy *time.Time `json:"delete_by,omitempty"`
}

// podGraceMargin is how long past its grace period a deleted pod's process may still run
// before it is called left over: the kubelet's own stop, and clock skew between the API
// server and the node, whose clocks write the deletion time and the capture's time.
const podGraceMargin = 2 * time.Minute

// podFacts is what the capture's Kubernetes block says of the pod p runs in; nil when p is
// in no pod, or the capture has no block, or no list of the node's pods that could prove a
// pod gone.
func (h *host) podFacts(p *parse.Process) *PodFacts {
	k := h.s.K8s
	if p == nil || p.Cgroup.PodUID == "" || k == nil || !k.PodsKnown {
		return nil
	}
	f := &PodFacts{UID: p.Cgroup.PodUID}
	pod := k.Pod(p.Cgroup.PodUID)
	if pod == nil {
		if k.PodsCut || k.PodsBeforeUnknown {
			return nil // the list was cut, or may have lost it during the probe: its absence proves nothing
		}
		f.Gone, f.Static = true, staticPodUID(f.UID)
		// The probe's time is whole seconds, and a start time is never later than the true one.
		f.StartedDuringProbe = h.s.Host.Time != nil && p.StartTime != nil && p.StartTime.Sub(h.ref) >= time.Second
		return f
	}
	f.Namespace, f.Name, f.Phase = pod.Namespace, pod.Name, pod.Phase
	f.OwnerKind, f.OwnerName = pod.OwnerKind, pod.OwnerName
	f.GoneDuringProbe = pod.GoneDuringProbe
	if pod.Deleting && pod.DeleteBy != nil {
		by := *pod.DeleteBy
		f.DeleteBy = &by
	}
	for _, c := range pod.Containers {
		if _, id, ok := strings.Cut(c.ID, "://"); ok && id != "" && id == p.Cgroup.ContainerID {
			f.Container = c.Name
		}
	}
	return f
}

// staticPodUID reports whether uid is a static pod's as the kubelet makes it: the hex MD5 of
// its manifest (32 hex digits, no dash), never an API server's UID (a UUID, with dashes).
func staticPodUID(uid string) bool {
	return len(uid) == 32 && !strings.Contains(uid, "-")
}

// ended reports whether the pod's phase says its containers have all stopped for good.
func (f *PodFacts) ended() bool {
	return f != nil && (f.Phase == "Succeeded" || f.Phase == "Failed")
}

// live reports whether the API lists the pod and it is neither ended nor being deleted: the
// only pod an operator might be told to delete.
func (f *PodFacts) live() bool {
	return f != nil && !f.Gone && !f.GoneDuringProbe && !f.ended() && f.DeleteBy == nil
}

// running reports whether the API lists the pod as running.
func (f *PodFacts) running() bool {
	return f != nil && !f.Gone && !f.GoneDuringProbe && f.Phase == "Running"
}

// podReasons are the reasons gp's pod gives to call it left over: its pod is gone or ended.
func (h *host) podReasons(gp *GPUProcess) []Reason {
	switch f := gp.Pod; {
	case f == nil:
	case f.Gone && !f.StartedDuringProbe && !f.Static:
		return []Reason{{Code: ReasonPodGone, Strong: true, PID: gp.PID, Pod: f, Node: h.s.K8s.Node}}
	case f.ended():
		return []Reason{{Code: ReasonPodEnded, Strong: true, PID: gp.PID, Pod: f, State: f.Phase}}
	case f.DeleteBy != nil && h.ref.Sub(*f.DeleteBy) > podGraceMargin:
		return []Reason{{Code: ReasonPodTerminating, Strong: true, PID: gp.PID, Pod: f, Age: h.ref.Sub(*f.DeleteBy)}}
	}
	return nil
}

// podAllocation reports the GPUs gp holds memory on that the kubelet did not allocate to
// its running pod, as a reason; ok is false when it holds none, or when the allocation is
// unknown or cannot be compared (no PodResources answer, an answer cut at its bounds, a
// container with dynamic resources, a MIG device, a GPU whose UUID is unknown).
func (h *host) podAllocation(gp *GPUProcess) (Reason, bool) {
	k := h.s.K8s
	if !gp.Pod.running() || k.Resources == nil || k.Resources.Cut || len(gp.GPUMemoryMiB) == 0 {
		return Reason{}, false
	}
	allocated, known := podGPUs(k.Resources.PodResources(gp.Pod.Namespace, gp.Pod.Name))
	if !known {
		return Reason{}, false
	}
	r := Reason{Code: ReasonPodNotAllocated, PID: gp.PID, Pod: gp.Pod, Node: k.Node}
	for g, mib := range gp.GPUMemoryMiB {
		uuid := ""
		if gpu := h.gpuByIndex[g]; gpu != nil {
			uuid = strings.ToUpper(gpu.UUID)
		}
		if uuid == "" {
			return Reason{}, false
		}
		if mib > 0 && !allocated[uuid] {
			r.GPUs = append(r.GPUs, g)
		}
		r.MiB += mib
		r.Held = append(r.Held, g)
	}
	slices.Sort(r.GPUs)
	slices.Sort(r.Held)
	return r, len(r.GPUs) > 0
}

// podGPUs are the GPU UUIDs (upper-cased) the kubelet allocated to any container of the pod:
// a pod's processes are judged together. known is false when the pod is not in the
// kubelet's answer, or a container's allocation cannot be read as GPU UUIDs (dynamic
// resources, MIG devices).
func podGPUs(pr *parse.K8sPodResources) (ids map[string]bool, known bool) {
	if pr == nil {
		return nil, false // the kubelet lists every pod it runs: this one started after it answered
	}
	ids = map[string]bool{}
	for _, c := range pr.Containers {
		if c.Dynamic {
			return nil, false
		}
		for _, d := range c.Devices {
			if !strings.HasPrefix(d.Resource, "nvidia.com/") {
				continue
			}
			for _, id := range d.IDs {
				id, _, _ = strings.Cut(id, "::") // time-slicing replicas: GPU-x::N
				if !strings.HasPrefix(strings.ToUpper(id), "GPU-") {
					return nil, false // a MIG device: its parent GPU is not named
				}
				ids[strings.ToUpper(id)] = true
			}
		}
	}
	return ids, true
}

// podInspect is what to look at for a running pod's process on GPUs the kubelet did not
// allocate to the pod: never a kill or a delete (the pod runs, and may be healthy work).
func podInspect(p *PodFacts) Action {
	return Action{Kind: ActionInspect, Target: "pod " + kname(p.Namespace) + "/" + kname(p.Name), Steps: []Command{
		{Line: "kubectl describe pod -n " + shellArg(p.Namespace) + " -- " + shellArg(p.Name), Note: "its nvidia.com/gpu limits, and whether it runs privileged or sets NVIDIA_VISIBLE_DEVICES itself"},
	}}
}
