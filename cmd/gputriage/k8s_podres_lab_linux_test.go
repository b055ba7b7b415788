package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/gputriage/gputriage/internal/k8stest"
	"github.com/gputriage/gputriage/internal/podrestest"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/kube/podres"
)

// The allocation verdicts end to end through the real API server: the agent's second exec
// runs the agent binary (cmd/gputriage-agent, built into the lab's exec PATH) as
// `gputriage-agent podresources`, which finds the kubelet's socket by $GPUTRIAGE_PODRESOURCES_SOCKET: a real
// PodResources v1 server (internal/podrestest) allocating GPU 1 to serving/sglang-1 and GPU 0
// to ml/rogue-0. Rogue's server, in its pod's real cgroup, holds memory on GPU 1 beside
// sglang-1's: it is named (gpu-outside-allocation, pod-not-allocated); sglang-1's server on
// its own GPU is named healthy with its Deployment and blamed in no sentence, command or
// Prometheus series.
func TestK8sPodResourcesAllocation(t *testing.T) {
	srv := podrestest.Start(t)
	l := newK8sLabWith(t, k8stest.Options{ExecEnv: []string{podres.SocketEnv + "=" + srv.Socket}})
	if out, err := exec.Command("go", "build", "-o", filepath.Join(l.lab.ExecBin, "gputriage-agent"), "../gputriage-agent").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	rogue := l.createPod(t, deploymentPod("ml", "rogue-0", "trainer", "main"))
	x := l.start(t, scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: l.podCgroupOf(t, rogue)})
	srv.SetPod("serving", "sglang-1", podrestest.GPU("server", l.smi.GPUs[1].UUID))
	srv.SetPod("ml", "rogue-0", podrestest.GPU("main", l.smi.GPUs[0].UUID))
	l.smi.GPUs[1].UsedMiB += 8000
	l.smi.Apps = append(l.smi.Apps, scenario.App{PID: x.PID, GPUUUID: l.smi.GPUs[1].UUID, UsedMiB: 8000, Name: "python3"})
	l.writeSMI(t)

	out, errOut, code := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "--format", "json")
	if code != exitFindings || srv.Calls() == 0 {
		t.Fatalf("exit %d, %d PodResources List calls\n%s\n%s\n%s", code, srv.Calls(), out, errOut, l.lab.Logs())
	}
	innocent := scenario.Innocents{PIDs: []int{l.healthy.PID}, Names: []string{"sglang-1", l.healthyUID}}
	checkAllocationJSON(t, out, x.PID, innocent)
	text, _, _ := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "-v")
	md, _, _ := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "--format", "markdown")
	for _, want := range []string{"ml/rogue-0, container main (Deployment trainer) was not allocated GPU 1",
		"serving/sglang-1, container server (Deployment sglang)"} {
		if flat := func(s string) string { return strings.Join(strings.Fields(s), " ") }; !strings.Contains(flat(text), want) || !strings.Contains(flat(md), want) {
			t.Errorf("the text or Markdown report lacks %q:\n%s", want, text)
		}
	}
	// No line of any report suggests deleting a pod or signalling the healthy server.
	never := scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl delete`), regexp.MustCompile(fmt.Sprint(`kill .*\b`, l.healthy.PID))}}
	for _, b := range never.Blamed(scenario.Units(out + text + md)...) {
		t.Error(b)
	}
	prom, _, _ := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "--format", "prometheus")
	var rogueSeries bool
	for _, line := range strings.Split(prom, "\n") {
		if !strings.HasPrefix(line, "gputriage_finding{") {
			continue
		}
		if strings.Contains(line, `pod="sglang-1"`) && !strings.Contains(line, `code="gpu-busy"`) {
			t.Errorf("a blaming series names the healthy pod: %s", line)
		}
		rogueSeries = rogueSeries || strings.Contains(line, `code="gpu-outside-allocation"`) &&
			strings.Contains(line, `namespace="ml"`) && strings.Contains(line, `pod="rogue-0"`) && strings.Contains(line, `container="main"`)
	}
	if !rogueSeries {
		t.Errorf("no gpu-outside-allocation series labelled ml/rogue-0, container main:\n%s", prom)
	}
}

// checkAllocationJSON: the JSON names rogue's PID in a gpu-outside-allocation finding with
// reason pod-not-allocated and its pod's namespace/pod/container; no sentence, bullet or
// command of a blaming finding (warning or worse, or memory-imbalance) names an innocent but
// as healthy.
func checkAllocationJSON(t *testing.T, out string, rogue int, innocent scenario.Innocents) {
	t.Helper()
	type pod struct{ Namespace, Pod, Container string }
	var doc struct {
		Hosts []struct {
			Findings []struct {
				Code, Severity, Title, Explanation string
				Evidence, Fix                      []string
				PIDs                               []int `json:"pids"`
				Reasons                            []struct {
					Code string
					K8s  *pod
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 1 {
		t.Fatalf("report: %v\n%s", err, out)
	}
	var named bool
	for _, f := range doc.Hosts[0].Findings {
		if f.Severity != "info" || f.Code == "memory-imbalance" {
			for _, u := range append(append([]string{f.Title, f.Explanation}, f.Evidence...), f.Fix...) {
				for _, b := range innocent.Blamed(scenario.Units(u)...) {
					t.Errorf("%s: %s", f.Code, b)
				}
			}
		}
		if f.Code != "gpu-outside-allocation" || !slices.Equal(f.PIDs, []int{rogue}) {
			continue
		}
		for _, r := range f.Reasons {
			named = named || r.Code == "pod-not-allocated" && r.K8s != nil && *r.K8s == pod{"ml", "rogue-0", "main"}
		}
	}
	if !named {
		t.Errorf("no gpu-outside-allocation finding of PID %d with reason pod-not-allocated of ml/rogue-0, container main:\n%s", rogue, out)
	}
}

// TestK8sSPDYFallback: an API server that does not translate WebSocket exec streams
// (feature gate TranslateStreamCloseWebsocketRequests off, as before Kubernetes 1.30) proxies
// the upgrade to the node, whose streaming server (kwok's, as a kubelet's before 1.31) speaks
// no v5.channel.k8s.io: the WebSocket upgrade is refused. gputriage falls back to SPDY as
// kubectl does, and triages the seed incident all the same.
func TestK8sSPDYFallback(t *testing.T) {
	l := newK8sLabWith(t, k8stest.Options{APIServerArgs: []string{"--feature-gates=TranslateStreamCloseWebsocketRequests=false"}})
	agent, err := l.lab.Client.CoreV1().Pods(kube.DefaultAgentNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(agent.Items) != 1 {
		t.Fatalf("agent pods: %v, %v", agent, err)
	}
	// The WebSocket alone: refused at the upgrade, the error the fallback rule takes.
	req := l.lab.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(kube.DefaultAgentNamespace).Name(agent.Items[0].Name).
		SubResource("exec").VersionedParams(&corev1.PodExecOptions{Container: "agent", Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(l.lab.Config, http.MethodGet, req.URL().String())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.HangGuard)
	defer cancel()
	if err := ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard}); !httpstream.IsUpgradeFailure(err) {
		t.Fatalf("a WebSocket exec: %v (%T), want an upgrade failure (the lab no longer refuses WebSocket: this test proves nothing)", err, err)
	}
	out, errOut, code := l.gputriage(t, "k8s/gpu-k8s-1", "--timeout", "60s", "--format", "json")
	if code != exitFindings || !strings.Contains(out, `"code": "leftover-process"`) || !strings.Contains(out, l.oldUID) {
		t.Fatalf("exit %d\n%s\n%s\n%s", code, out, errOut, l.lab.Logs())
	}
}
