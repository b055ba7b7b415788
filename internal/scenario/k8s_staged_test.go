package scenario_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/podrestest"
	"github.com/gputriage/gputriage/internal/promtest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/kube/podfacts"
	"github.com/gputriage/gputriage/kube/podres"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
)

// A staged Kubernetes node: real processes in real cgroup v2 directories named as the
// kubelet's systemd driver names them, the fake nvidia-smi naming them, the real probe, then
// the client's Kubernetes block: the API's pods (kube/podfacts from typed pods) and the
// kubelet's allocations (kube/podres through a real PodResources server's socket).

// k8sPod is one pod of a staged node: its UID and container id, and the typed pod the API
// would give (nil for a pod the API no longer has).
type k8sPod struct {
	uid, containerID string
	api              *corev1.Pod
}

// newK8sPod is a pod of namespace/name owned by a Deployment's ReplicaSet, in phase, with one
// container; api false: a pod already deleted.
func newK8sPod(namespace, name, container string, phase corev1.PodPhase, api bool) k8sPod {
	b := make([]byte, 48)
	rand.Read(b) //nolint:errcheck // never fails
	h := hex.EncodeToString(b)
	p := k8sPod{uid: fmt.Sprintf("%s-%s-4%s-8%s-%s", h[:8], h[8:12], h[13:16], h[17:20], h[20:32]), containerID: h[32:] + h[:32]}
	if !api {
		return p
	}
	yes := true
	p.api = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(p.uid),
		Labels:          map[string]string{"pod-template-hash": "7d9f8b6c5d"},
		OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "vllm-7d9f8b6c5d", Controller: &yes}}},
		Spec:   corev1.PodSpec{NodeName: "gpu-node-1"},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: container, ContainerID: "containerd://" + p.containerID}}}}
	return p
}

// podCgroup is the pod's container's cgroup, as the kubelet's systemd driver and containerd
// make it, where they make it: at the root of the hierarchy.
func (s *stage) podCgroup(p k8sPod) string {
	s.t.Helper()
	dir, cleanup, err := scenario.MakePodCgroup(s.root, p.uid, p.containerID)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(cleanup)
	return dir
}

// k8sBlock makes the stage append the client's Kubernetes block: pods, and the allocations
// the PodResources server answers through the real client.
func (s *stage) k8sBlock(pods []k8sPod, srv *podrestest.Server) {
	s.k8sBlockListed(pods, nil, srv)
}

// k8sBlockListed is k8sBlock with the API's listing from before the probe ran: before, when
// not nil, has pods the API still listed then, such as one deleted while the probe ran.
func (s *stage) k8sBlockListed(pods, before []k8sPod, srv *podrestest.Server) {
	var api, was []corev1.Pod
	for _, p := range pods {
		if p.api != nil {
			api = append(api, *p.api)
		}
	}
	for _, p := range before {
		if p.api != nil {
			was = append(was, *p.api)
		}
	}
	if before == nil {
		was = nil
	}
	s.appendK8s = func(raw []byte) []byte {
		res, err := podres.List(context.Background(), srv.Socket, podres.DefaultLimits)
		if err != nil {
			s.t.Fatal(err)
		}
		out, ok := parse.AppendK8s(raw, parse.K8sBlock{Node: "gpu-node-1", Pods: podfacts.EncodePods("gpu-node-1", api, was), PodResources: res})
		if !ok {
			s.t.Fatal("the probe's capture has no done line")
		}
		return out
	}
}

// prometheus is the stage's host as Prometheus exposition, checked by promtool.
func prometheusOf(t *testing.T, r rendered) string {
	var b bytes.Buffer
	if err := report.Prometheus(&b, []report.Host{{Name: "k8s/gpu-node-1", Snapshot: r.snap, Result: r.res}}, report.Options{}); err != nil {
		t.Fatal(err)
	}
	promtest.CheckMetrics(t, b.String())
	return b.String()
}

// hostileNS is a namespace no API server would accept, as a capture file may still carry it:
// a terminal escape, a newline forging a report line, Markdown pipes, and length.
var forgedHead = regexp.MustCompile(`^ {0,3}CRITICAL leftover-process forged`)

var hostileNS = "serving\x1b]0;pwned\x07\x1b[2J\n  CRITICAL leftover-process forged | a | b |" + strings.Repeat("n", 300)

func TestStagedK8sPods(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	srv := podrestest.Start(t)
	gone := newK8sPod("ml", "train-old", "main", "", false)
	healthy := newK8sPod(hostileNS, "vllm-7d9f8b6c5d-x2x7q", "server", corev1.PodRunning, true)
	rogue := newK8sPod("ml", "rogue-0", "main", corev1.PodRunning, true)
	srv.SetPod(hostileNS, "vllm-7d9f8b6c5d-x2x7q", podrestest.GPU("server", s.gpus[1].UUID))
	srv.SetPod("ml", "rogue-0", podrestest.GPU("main", s.gpus[2].UUID))

	c := s.server(scenario.Server{Module: "sglang.launch_server", Cgroup: s.podCgroup(gone)}, false)
	h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.podCgroup(healthy)}, false)
	x := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.podCgroup(rogue)}, false)
	s.hold(c.PID, 0, 50_000)
	s.hold(h.PID, 1, 30_000)
	s.hold(x.PID, 3, 20_000)
	s.k8sBlock([]k8sPod{gone, healthy, rogue}, srv)
	r := s.run()

	innocent := scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"vllm-7d9f8b6c5d-x2x7q", healthy.uid},
		Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl delete`), regexp.MustCompile(fmt.Sprint(`kill .*\b`, h.PID))}}
	checkStaged(t, r, expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
		text:     []string{"its Kubernetes pod (UID " + gone.uid + ") no longer exists", "Kubernetes pod: UID " + gone.uid + " (no longer in the API)"},
		innocent: innocent})
	checkStaged(t, r, expect{code: diagnose.CodeGPUOutsideAllocation, culprit: x.PID, gpus: []int{3},
		fix:  []string{"kubectl describe pod -n ml -- rogue-0  # its nvidia.com/gpu limits, and whether it runs privileged or sets NVIDIA_VISIBLE_DEVICES itself"},
		text: []string{"its Kubernetes pod ml/rogue-0, container main (Deployment vllm) was not allocated GPU 3"}, innocent: innocent})
	busy := r.findingNaming(diagnose.CodeGPUBusy, []int{h.PID})
	if busy == nil || !strings.Contains(busy.Title, `in use by Kubernetes pod $'serving\x1b]0;pwned\x07\x1b[2J\x0a  CRITICAL`) || !strings.Contains(busy.Title, "/vllm-7d9f8b6c5d-x2x7q, container server (Deployment vllm)") {
		t.Errorf("the healthy pod is not named healthy: %+v", busy)
	}
	checkK8sReports(t, r, gone.uid)
}

// A pod deleted while the probe ran (the API listed it before the probe and not after): its
// process, which the probe saw while the pod still existed, may have been its containers
// stopping, and is named no leftover; a pod the API had already forgotten before the probe
// still makes its process one.
func TestStagedK8sPodDeletedDuringProbe(t *testing.T) {
	s := newStage(t)
	srv := podrestest.Start(t)
	ending := newK8sPod("serving", "vllm-7d9f8b6c5d-q8r2z", "server", corev1.PodRunning, true)
	gone, c, e := s.goneBeside(ending, "vllm.entrypoints.openai.api_server")
	srv.SetPod("serving", "vllm-7d9f8b6c5d-q8r2z", podrestest.GPU("server", s.gpus[1].UUID))
	s.k8sBlockListed([]k8sPod{gone}, []k8sPod{gone, ending}, srv)
	r := s.run()

	checkGoneBeside(t, r, gone, c, e, "vllm-7d9f8b6c5d-q8r2z", ending.uid)
	if f := r.findingNaming(diagnose.CodeLeftoverProcess, []int{e}); f != nil && slices.Contains(f.PIDs, e) {
		t.Errorf("the process of the pod deleted during the probe is called left over: %s", f.Title)
	}
	if !strings.Contains(r.verbose, "deleted while the probe ran") {
		t.Errorf("the report never says the pod was deleted while the probe ran:\n%s", r.verbose)
	}
	if !strings.Contains(r.json, `"gone_during_probe": true`) {
		t.Error("the JSON lacks gone_during_probe")
	}
}

// goneBeside stages the node the pod-gone tests share: two GPUs, a pod the API no longer has
// whose server holds 50,000 MiB on GPU 0, and pod other's server (module) holding 30,000 MiB
// on GPU 1. It returns the gone pod and the two servers' PIDs.
func (s *stage) goneBeside(other k8sPod, module string) (gone k8sPod, c, o int) {
	s.t.Helper()
	s.gpuSet([]int64{81559, 81559})
	gone = newK8sPod("ml", "train-old", "main", "", false)
	cp := s.server(scenario.Server{Module: "sglang.launch_server", Cgroup: s.podCgroup(gone)}, false)
	op := s.server(scenario.Server{Module: module, Cgroup: s.podCgroup(other)}, false)
	s.hold(cp.PID, 0, 50_000)
	s.hold(op.PID, 1, 30_000)
	return gone, cp.PID, op.PID
}

// checkGoneBeside: the gone pod's server c is the leftover, signalled by PID, and the other
// server o, and each of names, is blamed nowhere.
func checkGoneBeside(t *testing.T, r rendered, gone k8sPod, c, o int, names ...string) {
	t.Helper()
	innocent := scenario.Innocents{PIDs: []int{o}, Names: names,
		Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl delete`), regexp.MustCompile(fmt.Sprint(`kill .*\b`, o))}}
	checkStaged(t, r, expect{code: diagnose.CodeLeftoverProcess, culprit: c, fix: []string{fmt.Sprint("kill ", c)},
		text: []string{"its Kubernetes pod (UID " + gone.uid + ") no longer exists"}, innocent: innocent})
}

// checkK8sReports: the hostile namespace forges nothing in any format, and no Prometheus
// series of a blaming finding carries the healthy pod's labels.
func checkK8sReports(t *testing.T, r rendered, goneUID string) {
	t.Helper()
	for name, out := range map[string]string{"text": r.text, "verbose": r.verbose, "markdown": r.md} {
		if strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s: a terminal escape reached the report", name)
		}
		for _, line := range strings.Split(out, "\n") {
			// The namespace's newline would start a line as a finding's head starts (column 2);
			// escaped and wrapped, its text stays inside the line or indented below it.
			if forgedHead.MatchString(line) {
				t.Errorf("%s: the namespace forged a finding line: %q", name, line)
			}
		}
	}
	// Every table row has its table's cells: the namespace's pipes are escaped.
	mdLines := strings.Split(r.md, "\n")
	cells := func(line string) int { return strings.Count(strings.ReplaceAll(line, `\|`, ""), "|") }
	want := 0
	for i, line := range mdLines {
		if i+1 < len(mdLines) && strings.HasPrefix(mdLines[i+1], "|---") {
			want = cells(line)
		}
		if strings.HasPrefix(line, "|") && strings.Contains(line, "forged") && cells(line) != want {
			t.Errorf("markdown: the namespace's pipes made table cells: %q", line)
		}
	}
	prom := prometheusOf(t, r)
	if strings.ContainsAny(prom, "\x1b\x07") {
		t.Error("prometheus: a terminal escape in a label")
	}
	var leftover bool
	for _, line := range strings.Split(prom, "\n") {
		if !strings.HasPrefix(line, "gputriage_finding{") {
			continue
		}
		healthyPod := strings.Contains(line, "vllm-7d9f8b6c5d-x2x7q")
		if healthyPod && !strings.Contains(line, `code="gpu-busy"`) {
			t.Errorf("a blaming series names the healthy pod: %s", line)
		}
		if strings.Contains(line, `code="leftover-process"`) && strings.Contains(line, `pod_uid="`+goneUID+`"`) {
			leftover = true
		}
	}
	if !leftover {
		t.Errorf("no leftover-process series with the deleted pod's UID:\n%s", prom)
	}
	if !strings.Contains(r.json, `"pod_uid": "`+goneUID+`"`) || !strings.Contains(r.json, `"gone": true`) {
		t.Errorf("the JSON lacks the deleted pod's facts")
	}
}

// The seed incident (ct200) on a Kubernetes node: SGLang's old server, its weights deleted
// from /dev/shm, still holds 55,286 MiB on GPU 0 in the cgroup of a pod the API no longer
// has, beside the running server's pod on GPU 1: the leftover is named with its pod UID and
// signalled by PID; the running pod is named healthy and nowhere blamed.
func TestStagedK8sSeedIncident(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{97887, 97887})
	srv := podrestest.Start(t)
	old := newK8sPod("serving", "sglang-0", "server", "", false)
	live := newK8sPod("serving", "sglang-1", "server", corev1.PodRunning, true)
	srv.SetPod("serving", "sglang-1", podrestest.GPU("server", s.gpus[1].UUID))
	c := s.server(scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}, Cgroup: s.podCgroup(old)}, true)
	h := s.server(scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}, Cgroup: s.podCgroup(live)}, false)
	s.hold(c.PID, 0, 55_286)
	s.hold(h.PID, 1, 71_800)
	s.k8sBlock([]k8sPod{old, live}, srv)
	r := s.run()
	checkStaged(t, r, expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
		text: []string{"UID " + old.uid + ") no longer exists", "55,286 MiB"},
		innocent: scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"sglang-1", live.uid},
			Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl delete`)}}})
	if f := r.findingNaming(diagnose.CodeGPUBusy, []int{h.PID}); f == nil || !strings.Contains(f.Title, "Kubernetes pod serving/sglang-1, container server (Deployment vllm)") {
		t.Errorf("the running pod is not named healthy: %+v", f)
	}
}

// A tenant on the node (nobody) given a cgroup directory of its own outside the units (as a
// batch system or an admin may chown one) names its directories as the kubelet names a
// healthy pod's: the running pod's UID and its container's id, below a "kubepods.slice" of
// its own. Its process, a leftover with deleted weights holding GPU 0 that the pod was never
// allocated, is named by PID; the healthy pod is named nowhere: not as the holder of GPU 0,
// not outside its allocation, not in a kubectl command. Only the kubelet's tree, at the root
// of the hierarchy, names pods.
func TestStagedK8sTenantMimicsPod(t *testing.T) {
	for name, mimic := range map[string]func(p k8sPod) string{
		// The pod's whole cgroup, the kubelet's slices included.
		"pod": func(p k8sPod) string {
			return "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" + strings.ReplaceAll(p.uid, "-", "_") +
				".slice/cri-containerd-" + p.containerID + ".scope"
		},
		// The container's scope alone: it would have made fix stop the pod's container.
		"container": func(p k8sPod) string { return "cri-containerd-" + p.containerID + ".scope" },
	} {
		t.Run(name, func(t *testing.T) { stagedTenantMimics(t, mimic) })
	}
}

func stagedTenantMimics(t *testing.T, mimicOf func(k8sPod) string) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	srv := podrestest.Start(t)
	healthy := newK8sPod("serving", "vllm-7d9f8b6c5d-x2x7q", "server", corev1.PodRunning, true)
	srv.SetPod("serving", "vllm-7d9f8b6c5d-x2x7q", podrestest.GPU("server", s.gpus[1].UUID))
	h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.podCgroup(healthy)}, false)

	tenant := s.cgroup("tenant-alice")
	if err := os.Chown(tenant, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	mimic, err := scenario.MakeCgroup(tenant, mimicOf(healthy))
	if err != nil {
		t.Fatal(err)
	}
	c := s.server(scenario.Server{Orphan: true, UID: 65534, Python: "/usr/bin/python3", Cgroup: mimic}, true)
	s.hold(c.PID, 0, 40_000)
	s.hold(h.PID, 1, 30_000)
	s.k8sBlock([]k8sPod{healthy}, srv)
	r := s.run()
	checkStaged(t, r, expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, gpus: []int{0}, fix: []string{fmt.Sprint("kill ", c.PID)},
		notCodes: []string{diagnose.CodeGPUOutsideAllocation},
		innocent: scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"vllm-7d9f8b6c5d-x2x7q", healthy.uid, healthy.containerID[:12]},
			Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl|crictl`), regexp.MustCompile(fmt.Sprint(`kill .*\b`, h.PID))}}})
	if f := r.findingNaming(diagnose.CodeGPUBusy, []int{h.PID}); f == nil || !strings.Contains(f.Title, "serving/vllm-7d9f8b6c5d-x2x7q") {
		t.Errorf("the healthy pod is not named healthy on its own GPU: %+v", f)
	}
	for _, line := range strings.Split(prometheusOf(t, r), "\n") {
		if strings.HasPrefix(line, "gputriage_finding{") && strings.Contains(line, healthy.uid) && !strings.Contains(line, `code="gpu-busy"`) {
			t.Errorf("a blaming series names the healthy pod: %s", line)
		}
	}
}

// A pod created after the client's first listing and deleted before its second (a short Job,
// a pod recreated under its name): neither listing has it, and its process, which the probe saw
// start while it ran (aged: 5 s after the probe's clock), is named no leftover; a pod the API
// had already forgotten before the probe still makes its process one.
func TestStagedK8sPodCreatedDuringProbe(t *testing.T) {
	s := newStage(t)
	srv := podrestest.Start(t)
	brief := newK8sPod("ml", "eval-x7k2p", "main", "", false)
	gone, c, e := s.goneBeside(brief, "vllm.entrypoints.openai.api_server")
	s.aged[e] = -5 * time.Second
	s.k8sBlockListed([]k8sPod{gone, brief}, []k8sPod{}, srv)
	r := s.run()

	checkGoneBeside(t, r, gone, c, e, brief.uid)
	if !strings.Contains(r.verbose, "started while the probe ran") || !strings.Contains(r.json, `"started_during_probe": true`) {
		t.Errorf("the report never says the process started while the probe ran:\n%s", r.verbose)
	}
}

// A static pod (a manifest in the node's kubelet directory) running a GPU server: the kubelet
// names its cgroup by the pod's hex MD5, and the API lists its mirror pod under a UID of its
// own (annotation kubernetes.io/config.mirror). Its process is named no leftover; a pod the
// API no longer has still makes its process one.
func TestStagedK8sStaticPod(t *testing.T) {
	s := newStage(t)
	srv := podrestest.Start(t)
	mirror := newK8sPod("kube-system", "triton-gpu-node-1", "server", corev1.PodRunning, true)
	static := mirror
	static.uid = strings.ReplaceAll(mirror.uid, "-", "")
	mirror.api.Annotations = map[string]string{"kubernetes.io/config.mirror": static.uid, "kubernetes.io/config.hash": static.uid}
	mirror.api.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "gpu-node-1"}}
	gone, c, h := s.goneBeside(static, "tritonserver")
	s.k8sBlock([]k8sPod{gone, mirror}, srv)
	r := s.run()

	checkGoneBeside(t, r, gone, c, h, static.uid, "triton-gpu-node-1")
	if !strings.Contains(r.verbose, "a static pod's") {
		t.Errorf("the report never says the pod is a static pod's:\n%s", r.verbose)
	}
}
