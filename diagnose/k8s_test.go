package diagnose

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

const (
	uidGone    = "0a0a0a0a-0000-4000-8000-00000000000a"
	uidHealthy = "0b0b0b0b-0000-4000-8000-00000000000b"
	uidOutside = "0c0c0c0c-0000-4000-8000-00000000000c"
	uidEnded   = "0d0d0d0d-0000-4000-8000-00000000000d"
)

// k8sNode is an 8-GPU node: PID 7000 of a deleted pod on GPU 1, PID 7100 of a healthy
// Deployment's pod on GPU 2 (allocated GPU 2), PID 7200 of a running pod on GPU 3 (allocated
// GPU 4), PID 7300 of a pod that has Succeeded on GPU 5.
func k8sNode(healthyNS string) *parse.Snapshot {
	s := idle()
	add := func(pid, g int, mem int64, uid string) {
		s.GPUs[g].MemoryUsedMiB, s.GPUs[g].MemoryFreeMiB = i64(mem+10), i64(97252-mem-10)
		s.Apps = append(s.Apps, app(pid, g, mem, "python3"))
		s.Holders = append(s.Holders, holders(pid, "/dev/nvidiactl", fmt.Sprintf("/dev/nvidia%d", g))...)
		p := proc(pid, pid-1, "S", 0, "root", 3*time.Hour, "python3", "serve.py")
		p.Cgroup = parse.Cgroup{PodUID: uid, ContainerID: strings.Repeat(uid[:1], 64), Runtime: "containerd"}
		s.Processes = append(s.Processes, p)
	}
	add(7000, 1, 10_000, uidGone)
	add(7100, 2, 20_000, uidHealthy)
	add(7200, 3, 30_000, uidOutside)
	add(7300, 5, 40_000, uidEnded)
	pod := func(uid, ns, name, phase string) parse.K8sPod {
		return parse.K8sPod{UID: uid, Namespace: ns, Name: name, Phase: phase, OwnerKind: "Deployment", OwnerName: "vllm",
			Containers: []parse.K8sContainer{{Name: "main", ID: "containerd://" + strings.Repeat(uid[:1], 64)}}}
	}
	alloc := func(ns, name string, g int) parse.K8sPodResources {
		return parse.K8sPodResources{Namespace: ns, Name: name, Containers: []parse.K8sContainerResources{
			{Name: "main", Devices: []parse.K8sDevices{{Resource: "nvidia.com/gpu", IDs: []string{uuidOf(g)}}}}}}
	}
	s.K8s = &parse.K8s{Node: "gpu-node-1", PodsKnown: true,
		Pods:      []parse.K8sPod{pod(uidHealthy, healthyNS, "vllm-7d9f-abcde", "Running"), pod(uidOutside, "ml", "rogue", "Running"), pod(uidEnded, "ml", "train-0", "Succeeded")},
		Resources: &parse.K8sResources{Pods: []parse.K8sPodResources{alloc(healthyNS, "vllm-7d9f-abcde", 2), alloc("ml", "rogue", 4), alloc("ml", "train-0", 5)}}}
	return s
}

func TestK8sVerdicts(t *testing.T) {
	r := Diagnose(k8sNode("serving"), refTime)
	leftover := map[int]*Finding{}
	for i, f := range r.Findings {
		if f.Code == CodeLeftoverProcess {
			leftover[f.PIDs[0]] = &r.Findings[i]
		}
	}
	gone, ended := leftover[7000], leftover[7300]
	if gone == nil || ended == nil || len(leftover) != 2 {
		t.Fatalf("want leftovers 7000 and 7300:\n%s", dump(r.Findings))
	}
	if gone.Reasons[0].Code != ReasonPodGone || !strings.Contains(gone.Explanation, uidGone) || gone.Actions[0].Kind != ActionKill || gone.Actions[0].Target != "7000" {
		t.Errorf("the deleted pod's leftover: %+v\n%s", gone.Reasons, dump(r.Findings))
	}
	if ended.Reasons[0].Code != ReasonPodEnded || !strings.Contains(ended.Explanation, "ml/train-0, container main (Deployment vllm) has ended (phase Succeeded") || ended.Actions[0].Kind != ActionKill {
		t.Errorf("the ended pod's leftover: %s / %+v", ended.Explanation, ended.Actions)
	}
	out := findCode(r.Findings, CodeGPUOutsideAllocation)
	if out == nil || out.PIDs[0] != 7200 || !slices.Equal(out.GPUs, []int{3}) || out.Reasons[0].Code != ReasonPodNotAllocated ||
		!strings.Contains(out.Title, "Kubernetes pod ml/rogue, container main (Deployment vllm) uses GPU 3") {
		t.Fatalf("gpu-outside-allocation:\n%s", dump(r.Findings))
	}
	if slices.ContainsFunc(out.Actions, func(a Action) bool { return a.Kind != ActionInspect }) {
		t.Errorf("a running pod's finding acts: %+v", out.Actions)
	}
	busy := findCode(r.Findings, CodeGPUBusy)
	if busy == nil || busy.PIDs[0] != 7100 || !strings.Contains(busy.Title, "Kubernetes pod serving/vllm-7d9f-abcde, container main (Deployment vllm)") {
		t.Errorf("the healthy pod is not named healthy:\n%s", dump(r.Findings))
	}
	// No innocent: the healthy pod is in no other finding's PIDs, title, command or action
	// (memory-imbalance names it "looks healthy" among the holders of its short GPUs).
	for _, f := range r.Findings {
		if f.Code == CodeGPUBusy {
			continue
		}
		pids := f.PIDs
		if f.Imbalance != nil {
			pids = f.Imbalance.Leftover // its PIDs are every holder of its short GPUs
		}
		text := f.Title + "\n" + strings.Join(f.Fix, "\n")
		acted := slices.ContainsFunc(f.Actions, func(a Action) bool { return slices.Contains(a.PIDs, 7100) || a.Target == uidHealthy })
		if slices.Contains(pids, 7100) || acted || strings.Contains(text, "vllm-7d9f") || strings.Contains(text, "7100") {
			t.Errorf("%s blames the healthy pod:\n%s", f.Code, text)
		}
	}
}

// A live culprit pod is named for the operator to delete (quoted), never the process alone;
// without the API's list of pods, the UID-only advice of today.
func TestK8sLivePodAction(t *testing.T) {
	s := k8sNode("-n kube-system; rm -rf /")
	for i := range s.Processes {
		if s.Processes[i].PID == 7100 {
			s.Processes[i].State = "T" // stopped: a leftover in a running pod
		}
	}
	r := Diagnose(s, refTime)
	var f *Finding
	for i := range r.Findings {
		if r.Findings[i].Code == CodeLeftoverProcess && r.Findings[i].PIDs[0] == 7100 {
			f = &r.Findings[i]
		}
	}
	if f == nil || f.Actions[0].Kind != ActionDeletePod {
		t.Fatalf("no delete-pod for the stopped process of a live pod:\n%s", dump(r.Findings))
	}
	want := "kubectl delete pod -n '-n kube-system; rm -rf /' -- vllm-7d9f-abcde"
	if got := f.Actions[0].Steps[0].Line; got != want {
		t.Errorf("step %q, want %q", got, want)
	}
}

// Without a usable list of pods or allocations, no pod verdict is made.
func TestK8sUnknownMakesNoVerdict(t *testing.T) {
	for name, mod := range map[string]func(*parse.K8s){
		"pods cut":       func(k *parse.K8s) { k.PodsCut = true },
		"pods before?":   func(k *parse.K8s) { k.PodsBeforeUnknown = true },
		"pods unknown":   func(k *parse.K8s) { k.PodsKnown, k.Pods = false, nil },
		"resources cut":  func(k *parse.K8s) { k.Resources.Cut = true },
		"no resources":   func(k *parse.K8s) { k.Resources = nil },
		"rogue unlisted": func(k *parse.K8s) { k.Resources.Pods = k.Resources.Pods[:1] },
		"dynamic":        func(k *parse.K8s) { k.Resources.Pods[1].Containers[0].Dynamic = true },
		"MIG allocation": func(k *parse.K8s) { k.Resources.Pods[1].Containers[0].Devices[0].IDs = []string{"MIG-1"} },
	} {
		s := k8sNode("serving")
		mod(s.K8s)
		r := Diagnose(s, refTime)
		if f := findCode(r.Findings, CodeGPUOutsideAllocation); f != nil && !strings.HasPrefix(name, "pods") {
			t.Errorf("%s: %s", name, f.Title)
		}
		gone := slices.ContainsFunc(r.Findings, func(f Finding) bool {
			return f.Code == CodeLeftoverProcess && f.PIDs[0] == 7000
		})
		if want := !strings.HasPrefix(name, "pods"); gone != want {
			t.Errorf("%s: the deleted pod's process is a leftover: %v, want %v", name, gone, want)
		}
	}
}

// A pod being deleted whose grace period ended more than the margin ago: its process is left
// over, stopped by PID (deleting the pod again is no use); within the margin, nothing.
func TestK8sPodTerminating(t *testing.T) {
	for _, tc := range []struct {
		ago      time.Duration
		leftover bool
	}{{10 * time.Minute, true}, {30 * time.Second, false}} {
		s := k8sNode("serving")
		by := s.Host.Time.Add(-tc.ago)
		s.K8s.Pods[0].Deleting, s.K8s.Pods[0].DeleteBy = true, &by
		r := Diagnose(s, refTime)
		var f *Finding
		for i := range r.Findings {
			if r.Findings[i].Code == CodeLeftoverProcess && r.Findings[i].PIDs[0] == 7100 {
				f = &r.Findings[i]
			}
		}
		if (f != nil) != tc.leftover {
			t.Fatalf("%v ago: leftover %v, want %v:\n%s", tc.ago, f != nil, tc.leftover, dump(r.Findings))
		}
		if f == nil {
			continue
		}
		if f.Reasons[0].Code != ReasonPodTerminating || f.Actions[0].Kind != ActionKill || !strings.Contains(f.Explanation, "grace period ended 10m") {
			t.Errorf("%s / %+v", f.Explanation, f.Actions)
		}
	}
}

// Names from a capture file reach the words quoted: no raw control byte, no line of its own.
func TestK8sHostileNamesQuoted(t *testing.T) {
	s := k8sNode("ns\n  CRITICAL forged\x1b[2J")
	s.K8s.Pods[1].Name, s.K8s.Resources.Pods[1].Name = "rogue\n| x |", "rogue\n| x |"
	s.K8s.Pods[2].Containers[0].Name = "main\x1b]0;t\x07"
	r := Diagnose(s, refTime)
	for _, f := range r.Findings {
		for _, x := range append(append([]string{f.Title, f.Explanation}, f.Evidence...), f.Fix...) {
			if strings.ContainsAny(x, "\n\x1b\x07") {
				t.Errorf("%s: a raw control byte in %q", f.Code, x)
			}
		}
	}
	if out := findCode(r.Findings, CodeGPUOutsideAllocation); out == nil || !strings.Contains(out.Title, `ml/$'rogue\x0a| x |'`) {
		t.Errorf("the rogue pod is not named quoted:\n%s", dump(r.Findings))
	}
}

// A process whose pod neither of the client's listings has, but which started after the probe
// did (so after the client's first listing), may be of a pod created and deleted while the probe
// ran (a short Job, a pod recreated under its name): no pod-gone, and no finding acts on it;
// its evidence says to look again. One that started before the probe stays pod-gone.
func TestK8sPodStartedDuringProbe(t *testing.T) {
	for _, tc := range []struct {
		ago      time.Duration
		leftover bool
	}{{-5 * time.Second, false}, {-time.Second, false}, {0, true}, {5 * time.Second, true}} {
		s := k8sNode("serving")
		for i := range s.Processes {
			if s.Processes[i].PID == 7000 {
				st := s.Host.Time.Add(-tc.ago)
				s.Processes[i].StartTime = &st
			}
		}
		r := Diagnose(s, refTime)
		acted := slices.ContainsFunc(r.Findings, func(f Finding) bool {
			pids := f.PIDs
			if f.Imbalance != nil {
				pids = f.Imbalance.Leftover // its PIDs are every holder of its short GPUs
			}
			return f.Code != CodeGPUBusy && slices.Contains(pids, 7000)
		})
		if acted != tc.leftover {
			t.Errorf("started %v before the probe: a finding acts on PID 7000: %v, want %v\n%s", tc.ago, acted, tc.leftover, dump(r.Findings))
		}
		if tc.leftover {
			continue
		}
		var gp *GPUProcess
		for i := range r.Processes {
			if r.Processes[i].PID == 7000 {
				gp = &r.Processes[i]
			}
		}
		if gp == nil || gp.Pod == nil || !gp.Pod.Gone || !gp.Pod.StartedDuringProbe || !strings.Contains(podLine(gp.Pod), "look again") {
			t.Errorf("started %v before the probe: pod facts %+v", tc.ago, gp)
		}
	}
}

// A static pod's process (a manifest on the node: the kubelet names its cgroup by the hex MD5
// it made for the pod, and the API lists the pod's mirror under a UID of its own) is no
// leftover for its UID's absence from the API; an API UID's absence still is.
func TestK8sStaticPodNotGone(t *testing.T) {
	const static = "5f0c3ad2b1e94f7a8c6d2e1b0a9f8e7d"
	s := k8sNode("serving")
	for i := range s.Processes {
		if s.Processes[i].PID == 7000 {
			s.Processes[i].Cgroup.PodUID = static
		}
	}
	r := Diagnose(s, refTime)
	for _, f := range r.Findings {
		pids := f.PIDs
		if f.Imbalance != nil {
			pids = f.Imbalance.Leftover
		}
		if f.Code != CodeGPUBusy && slices.Contains(pids, 7000) {
			t.Errorf("the static pod's process is blamed: %s\n%s", f.Title, dump(r.Findings))
		}
	}
	for _, gp := range r.Processes {
		if gp.PID == 7000 && (gp.Pod == nil || !gp.Pod.Static || !strings.Contains(podLine(gp.Pod), "a static pod's")) {
			t.Errorf("pod facts %+v", gp.Pod)
		}
	}
	if staticPodUID(uidGone) || !staticPodUID(static) {
		t.Error("staticPodUID")
	}
}
