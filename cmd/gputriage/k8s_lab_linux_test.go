package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gputriage/gputriage/internal/k8stest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/kube"
)

// k8sLab is the seed incident on a Kubernetes node of the real lab (internal/k8stest: kine,
// kube-apiserver, kwok): node gpu-k8s-1, its gputriage agent made from contrib/k8s/agent.yaml,
// the operator's kubeconfig the limited user's (contrib/k8s/rbac.yaml only). An exec into the
// agent runs the real probe on this machine (kwok's local exec), where SGLang's old server, in
// the cgroup of a pod the API no longer has, maps its deleted /dev/shm weights and holds GPU
// 0 (the fake nvidia-smi says so), beside the running pod serving/sglang-1's server on GPU 1.
type k8sLab struct {
	lab               *k8stest.Lab
	dir               string
	leftover, healthy *scenario.Proc
	oldUID            string
	healthyUID        string // serving/sglang-1's
	smi               *scenario.SMI
	cgroupRoot, slice string
}

func newK8sLab(t *testing.T) *k8sLab { return newK8sLabWith(t, k8stest.Options{}) }

// newK8sLabWith is newK8sLab with the lab's options o (e.g. its execs' environment).
func newK8sLabWith(t *testing.T, o k8stest.Options) *k8sLab {
	t.Helper()
	testenv.SkipShort(t, "the Kubernetes lab")
	if os.Geteuid() != 0 {
		t.Skip("the Kubernetes lab's staged node needs root: cgroups")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	root, err := scenario.CgroupV2Root()
	if err != nil {
		t.Skip(err)
	}
	l := &k8sLab{lab: k8stest.StartWith(t, o), dir: t.TempDir(), cgroupRoot: root}
	repo := repoRoot(t)
	l.lab.Apply(filepath.Join(repo, "contrib/k8s/rbac.yaml"))
	l.lab.Apply(filepath.Join(repo, "contrib/k8s/agent.yaml"))
	l.lab.CreateNode("gpu-k8s-1", 2)
	l.lab.DaemonSetPod(kube.DefaultAgentNamespace, "gputriage-agent", "gpu-k8s-1")
	live := l.createPod(t, deploymentPod("serving", "sglang-1", "sglang", "server"))

	l.slice = fmt.Sprintf("gt-k8s-%d-%d.slice", os.Getpid(), time.Now().UnixNano())
	if _, err := scenario.MakeCgroup(root, l.slice); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { scenario.RemoveCgroups(filepath.Join(root, l.slice)) })
	l.oldUID, l.healthyUID = randomUID(), string(live.UID)
	shm := fmt.Sprintf("/dev/shm/%s-Qwen3.6-27B", l.slice)
	l.leftover = l.start(t, scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", shm, "--tp", "1"},
		ShmDir: shm, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true, Cgroup: l.podCgroup(t, l.oldUID, randomHex(32))})
	l.healthy = l.start(t, scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}, Cgroup: l.podCgroupOf(t, live)})
	l.smi = cleanSMI(2)
	l.smi.GPUs[0].UsedMiB, l.smi.GPUs[1].UsedMiB = 55295, 71809
	l.smi.Apps = []scenario.App{{PID: l.leftover.PID, GPUUUID: l.smi.GPUs[0].UUID, UsedMiB: 55286, Name: "python3"},
		{PID: l.healthy.PID, GPUUUID: l.smi.GPUs[1].UUID, UsedMiB: 71800, Name: "python3"}}
	l.smi.Dynamic, l.smi.ReleaseDelay = true, time.Second // a holder that exits leaves the list; its memory comes back
	l.writeSMI(t)
	return l
}

// writeSMI (re)writes the fake nvidia-smi the node's execs run from l.smi.
func (l *k8sLab) writeSMI(t *testing.T) {
	t.Helper()
	if err := scenario.WriteFakeSMI(l.lab.ExecBin, *l.smi); err != nil {
		t.Fatal(err)
	}
}

// deploymentPod is namespace/name with container c, owned as Deployment deploy's pods are:
// by its ReplicaSet deploy-HASH, with label pod-template-hash HASH (no controller runs in the
// lab to make or collect them).
func deploymentPod(namespace, name, deploy, c string) *corev1.Pod {
	pod := k8stest.NewPod(namespace, name, "gpu-k8s-1", c)
	yes := true
	pod.Labels = map[string]string{"pod-template-hash": "7d9f8b6c5d"}
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: deploy + "-7d9f8b6c5d",
		UID: types.UID(randomUID()), Controller: &yes}}
	return pod
}

// createPod creates pod and, once kwok runs it, gives its containers IDs as containerd's
// (kwok's stages give none), so that a cgroup made by podCgroupOf names its container.
func (l *k8sLab) createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	pod = l.lab.CreatePod(pod)
	for i := range pod.Status.ContainerStatuses {
		pod.Status.ContainerStatuses[i].ContainerID = "containerd://" + randomHex(32)
	}
	got, err := l.lab.Client.CoreV1().Pods(pod.Namespace).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// start starts s until the test ends.
func (l *k8sLab) start(t *testing.T, s scenario.Server) *scenario.Proc {
	t.Helper()
	p, err := scenario.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// podCgroup makes the cgroup of pod uid's container, as the kubelet's systemd driver and
// containerd name it, at the hierarchy's root.
func (l *k8sLab) podCgroup(t *testing.T, uid, container string) string {
	t.Helper()
	// At the hierarchy's root, where the kubelet puts pods: a pod is believed nowhere else.
	dir, cleanup, err := scenario.MakePodCgroup(l.cgroupRoot, uid, container)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return dir
}

// podCgroupOf is the cgroup of the API's pod's first container (its ID as kwok made it).
func (l *k8sLab) podCgroupOf(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	container := randomHex(32)
	if len(pod.Status.ContainerStatuses) > 0 {
		if id, ok := strings.CutPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://"); ok && len(id) == 64 {
			container = id
		}
	}
	return l.podCgroup(t, string(pod.UID), container)
}

// gputriage runs the CLI as typed, with the limited user's kubeconfig unless args name one.
func (l *k8sLab) gputriage(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	if !slices.Contains(args, "--kubeconfig") {
		at := 0
		if len(args) > 0 && (args[0] == "fix" || args[0] == "watch" || args[0] == "collect") {
			at = 1
		}
		args = slices.Insert(args, at, "--kubeconfig", l.lab.LimitedKubeconfig)
	}
	var out, errb bytes.Buffer
	getenv := func(k string) string {
		if k == "XDG_STATE_HOME" {
			return filepath.Join(l.dir, "state")
		}
		return ""
	}
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, getenv, func(io.Writer) (bool, int) { return false, 0 })
	return out.String(), errb.String(), code
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

func randomUID() string {
	h := randomHex(16)
	return h[:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}

// The "done when": gputriage k8s/NODE, as typed, with the least RBAC, triages the
// seed incident on a kwok node through the real API server: the leftover named by PID with
// its gone pod's UID, the running pod named and not blamed; the saved capture replays the same.
func TestK8sSeedIncident(t *testing.T) {
	l := newK8sLab(t)
	save := filepath.Join(l.dir, "saved")
	out, errOut, code := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "--format", "json", "--save", save)
	if code != exitFindings {
		t.Fatalf("exit %d\n%s\n%s\n%s", code, out, errOut, l.lab.Logs())
	}
	var doc struct {
		Hosts []struct {
			Host     string
			Findings []struct {
				Code  string
				Title string
				PIDs  []int `json:"pids"`
				Fix   []string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 1 || doc.Hosts[0].Host != "k8s/gpu-k8s-1" {
		t.Fatalf("report: %v\n%s", err, out)
	}
	var culprit, healthy bool
	for _, f := range doc.Hosts[0].Findings {
		if f.Code == "leftover-process" && slices.Equal(f.PIDs, []int{l.leftover.PID}) {
			culprit = true
		}
		if slices.Contains(f.PIDs, l.healthy.PID) {
			if f.Code == "leftover-process" || slices.ContainsFunc(f.Fix, func(s string) bool { return strings.Contains(s, fmt.Sprint(l.healthy.PID)) }) {
				t.Errorf("the running pod's server is blamed: %+v", f)
			}
			healthy = healthy || strings.Contains(f.Title, "serving/sglang-1")
		}
	}
	if !culprit || !healthy {
		t.Errorf("leftover PID %d named: %v; running pod serving/sglang-1 named: %v\n%s\n%s", l.leftover.PID, culprit, healthy, out, errOut)
	}
	text, _, _ := l.gputriage(t, "--replay", save, "-v")
	for _, want := range []string{"k8s/gpu-k8s-1", fmt.Sprint("PID ", l.leftover.PID), l.oldUID} {
		if !strings.Contains(text, want) {
			t.Errorf("the replayed report lacks %q:\n%s", want, text)
		}
	}
}

// A node without the agent: the host fails, naming the way to install the agent and the
// kubectl debug route, and the sweep's other node is triaged; --k8s-selector alone sweeps the
// nodes it picks; a name that is no node of the cluster fails as an unknown host, a token the
// API server refuses as an authentication failure.
func TestK8sNoAgent(t *testing.T) {
	l := newK8sLab(t)
	l.lab.CreateNode("gpu-k8s-2", 2)
	out, errOut, code := l.gputriage(t, "k8s/", "--timeout", "60s", "-q")
	if code != exitHostsFailed {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	all := out + errOut
	for _, want := range []string{"k8s/gpu-k8s-2", "no gputriage agent pod running on node gpu-k8s-2", "contrib/k8s/agent.yaml",
		"kubectl debug node/gpu-k8s-2 --profile=sysadmin"} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %q:\n%s", want, all)
		}
	}
	if !strings.Contains(all, "k8s/gpu-k8s-1") {
		t.Errorf("the node with the agent is not reported:\n%s", all)
	}
	out, errOut, code = l.gputriage(t, "--k8s-selector", "kubernetes.io/hostname=gpu-k8s-1", "--timeout", "60s", "-q")
	if code != exitFindings || !strings.Contains(out, "k8s/gpu-k8s-1") || strings.Contains(out+errOut, "gpu-k8s-2") {
		t.Errorf("--k8s-selector alone: exit %d\n%s\n%s", code, out, errOut)
	}
	out, errOut, code = l.gputriage(t, "k8s/no-such-node", "--timeout", "60s", "-q")
	if code != exitHostsFailed || !strings.Contains(out+errOut, "no node no-such-node in the cluster") {
		t.Errorf("k8s/no-such-node: exit %d\n%s\n%s", code, out, errOut)
	}
	kc, err := os.ReadFile(l.lab.LimitedKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, line := range strings.Split(string(kc), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "token: "); ok {
			token = v
		}
	}
	wrong := filepath.Join(l.dir, "wrong-token")
	if err := os.WriteFile(wrong, []byte(strings.ReplaceAll(string(kc), token, "not-the-token")), 0o600); token == "" || err != nil {
		t.Fatalf("no token in the limited kubeconfig (%v):\n%s", err, kc)
	}
	out, errOut, code = l.gputriage(t, "--kubeconfig", wrong, "k8s/gpu-k8s-1", "--timeout", "60s", "-q")
	if code != exitHostsFailed || !strings.Contains(out+errOut, "auth") || !strings.Contains(out+errOut, "refused") {
		t.Errorf("a token the API server refuses: exit %d\n%s\n%s", code, out, errOut)
	}
}

// One node whose probe hangs does not hold the sweep: it fails at its --timeout, the other
// node is triaged, and the sweep ends then. The hang: a timeout program first on the exec's
// PATH that, in the first probe to call it, sleeps (mkdir picks that probe atomically).
func TestK8sSlowNodeDoesNotStallSweep(t *testing.T) {
	l := newK8sLab(t)
	l.lab.CreateNode("gpu-k8s-2", 2)
	l.lab.DaemonSetPod(kube.DefaultAgentNamespace, "gputriage-agent", "gpu-k8s-2")
	real, err := exec.LookPath("timeout")
	if err != nil {
		t.Skip(err)
	}
	hang := "#!/bin/sh\nif mkdir " + filepath.Join(l.lab.ExecBin, "hung") + " 2>/dev/null; then exec sleep 60; fi\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(l.lab.ExecBin, "timeout"), []byte(hang), 0o755); err != nil {
		t.Fatal(err)
	}
	timeout := 20 * time.Second
	start := time.Now()
	out, errOut, code := l.gputriage(t, "k8s/gpu-k8s-1", "k8s/gpu-k8s-2", "--timeout", timeout.String(), "--format", "json")
	took := time.Since(start)
	t.Logf("the sweep took %s with a %s host timeout", took, timeout)
	var doc struct {
		Hosts []struct {
			Host     string
			Error    *struct{ Phase, Kind string }
			Findings []struct {
				Code string
				PIDs []int `json:"pids"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitHostsFailed || len(doc.Hosts) != 2 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, errOut)
	}
	var timedOut, triaged int
	for _, h := range doc.Hosts {
		switch {
		case h.Error != nil && h.Error.Kind == "timeout":
			timedOut++
		case h.Error == nil && slices.ContainsFunc(h.Findings, func(f struct {
			Code string
			PIDs []int `json:"pids"`
		}) bool {
			return f.Code == "leftover-process" && slices.Contains(f.PIDs, l.leftover.PID)
		}):
			triaged++
		}
	}
	if timedOut != 1 || triaged != 1 {
		t.Errorf("%d nodes timed out, %d triaged; want one each\n%s\n%s", timedOut, triaged, out, errOut)
	}
	if took > timeout+testenv.Scale(20*time.Second) {
		t.Errorf("the sweep took %s with a %s host timeout: the hung node held it", took, timeout)
	}
}

// fix on a Kubernetes node: the leftover whose pod is gone is signalled by PID through the
// agent (the apply script and its identity re-check run there as over SSH), its release is
// watched through the agent, the running pod's server is left alone, and the audit log
// records the gone pod's UID.
func TestK8sFixStopsLeftover(t *testing.T) {
	l := newK8sLab(t)
	out, errOut, code := l.gputriage(t, "fix", "--yes", "--timeout", "60s", "k8s/gpu-k8s-1")
	if code != exitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, fmt.Sprintf("k8s/gpu-k8s-1: PID %d sglang.launch_server: stopped", l.leftover.PID)) ||
		!strings.Contains(out, "55,286 MiB released") {
		t.Errorf("output lacks the stop or the release:\n%s", out)
	}
	if !scenario.Exited(l.leftover.PID, testenv.HangGuard) || scenario.Exited(l.healthy.PID, 0) {
		t.Errorf("the leftover is not stopped, or the running pod's server is")
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "state", "gputriage", "fix.log"))
	if err != nil || !bytes.Contains(b, []byte(l.oldUID)) || bytes.Count(bytes.TrimSpace(b), []byte("\n")) != 0 {
		t.Errorf("audit log (%v): want one record with pod UID %s:\n%s", err, l.oldUID, b)
	}
}
