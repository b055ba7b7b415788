package fix

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// The seed incident on a Kubernetes node: the leftover PID 20629 runs in the cgroup of a pod
// the API no longer lists, the healthy server in a running pod. The plan signals 20629 by PID
// (the same identity re-check), records its pod UID, and never names the healthy pod.
func TestBuildHostK8sSeedIncident(t *testing.T) {
	s, _ := seed(t, strings.Repeat("ab", 16))
	const goneUID, liveUID = "0a0a0a0a-0000-4000-8000-00000000000a", "0b0b0b0b-0000-4000-8000-00000000000b"
	for i := range s.Processes {
		p := &s.Processes[i]
		uid := liveUID
		if p.PID == 20629 {
			uid = goneUID
		}
		p.Cgroup = parse.Cgroup{PodUID: uid, ContainerID: strings.Repeat(uid[:1], 64), Runtime: "containerd"}
	}
	s.K8s = &parse.K8s{Node: "ct200", PodsKnown: true, Pods: []parse.K8sPod{{UID: liveUID, Namespace: "serving", Name: "sglang-0", Phase: "Running",
		Containers: []parse.K8sContainer{{Name: "server", ID: "containerd://" + strings.Repeat("0", 64)}}}}}
	r := diagnose.Diagnose(s, *s.Host.Time)
	hp := BuildHost("k8s/ct200", s, r)
	if len(hp.Targets) != 1 || hp.Targets[0].PID != 20629 || hp.Targets[0].Kind != KindKill || hp.Targets[0].PodUID != goneUID {
		t.Fatalf("plan %+v, want PID 20629 killed by PID with its pod UID", hp)
	}
	b, _ := json.Marshal(Record{Target: hp.Targets[0]})
	if !strings.Contains(string(b), `"pod_uid":"`+goneUID+`"`) {
		t.Errorf("the audit record lacks the pod UID: %s", b)
	}
	for _, ex := range hp.Explained {
		if strings.Contains(strings.Join(ex.Steps, "\n"), "sglang-0") {
			t.Errorf("the healthy pod is in the plan: %+v", ex)
		}
	}
	var text strings.Builder
	WritePlan(&text, Plan{Version: Version, ID: "0123456789abcdef", Hosts: []HostPlan{hp}}, How{}, func(s string) string { return s })
	if !strings.Contains(text.String(), "in Kubernetes pod UID "+goneUID+", which is not deleted") {
		t.Errorf("the plan's text does not name the pod:\n%s", text.String())
	}
	bad := hp.Targets[0]
	bad.PodUID = "x; rm -rf /"
	if bad.Validate() == nil {
		t.Error("a plan file's hostile pod uid passed Validate")
	}
}

// A leftover in a pod the API still lists as running: fix deletes no pod, and says how the
// operator may.
func TestBuildHostK8sLivePodNotDeleted(t *testing.T) {
	s, _ := seed(t, strings.Repeat("ab", 16))
	const uid = "0c0c0c0c-0000-4000-8000-00000000000c"
	for i := range s.Processes {
		if p := &s.Processes[i]; p.PID == 20629 {
			p.Cgroup = parse.Cgroup{PodUID: uid, ContainerID: strings.Repeat("c", 64), Runtime: "containerd"}
			p.State = "T"
		}
	}
	s.K8s = &parse.K8s{Node: "ct200", PodsKnown: true, Pods: []parse.K8sPod{{UID: uid, Namespace: "ml", Name: "train-0", Phase: "Running"}}}
	hp := BuildHost("k8s/ct200", s, diagnose.Diagnose(s, *s.Host.Time))
	if len(hp.Targets) != 0 || len(hp.Explained) != 1 {
		t.Fatalf("plan %+v, want the live pod's process explained", hp)
	}
	ex := hp.Explained[0]
	if !strings.Contains(ex.Why, "never deletes a pod") || len(ex.Steps) != 1 || ex.Steps[0] != "kubectl delete pod -n ml -- train-0" {
		t.Errorf("explained %+v", ex)
	}
}

// A pod deleted while the probe ran (gone_during_probe): its process is signalled by PID only
// on evidence of its own (the seed's deleted weights), never for the pod's going; a healthy
// process of such a pod gets no target, and no step of the plan names a pod to delete.
func TestBuildHostK8sPodDeletedDuringProbe(t *testing.T) {
	s, _ := seed(t, strings.Repeat("ab", 16))
	const uid = "0d0d0d0d-0000-4000-8000-00000000000d"
	for i := range s.Processes {
		s.Processes[i].Cgroup = parse.Cgroup{PodUID: uid, ContainerID: strings.Repeat("d", 64), Runtime: "containerd"}
	}
	s.K8s = &parse.K8s{Node: "ct200", PodsKnown: true, Pods: []parse.K8sPod{{UID: uid, Namespace: "serving", Name: "sglang-0",
		Phase: "Running", GoneDuringProbe: true}}}
	hp := BuildHost("k8s/ct200", s, diagnose.Diagnose(s, *s.Host.Time))
	if len(hp.Targets) != 1 || hp.Targets[0].PID != 20629 || hp.Targets[0].Kind != KindKill || hp.Targets[0].PodUID != uid ||
		slices.Contains(hp.Targets[0].Reasons, string(diagnose.ReasonPodGone)) {
		t.Fatalf("plan %+v, want PID 20629 alone, killed by PID for its own evidence", hp)
	}
	for _, ex := range hp.Explained {
		if strings.Contains(strings.Join(ex.Steps, "\n"), "kubectl delete") {
			t.Errorf("a step deletes the pod: %+v", ex)
		}
	}
}
