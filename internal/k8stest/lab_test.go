package k8stest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// execResult is what one exec gave: its streams and the error Stream returned.
type execResult struct {
	stdout, stderr string
	err            error
}

// execPod runs cmd in namespace/pod's container over transport ("websocket" or "spdy") as cfg's
// user, stdin given, within d (scaled by the machine's load).
func execPod(t *testing.T, cfg *rest.Config, transport, ns, pod, container string, cmd []string, stdin string, d time.Duration) execResult {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: cmd, Stdin: true, Stdout: true, Stderr: true},
			scheme.ParameterCodec).URL()
	var ex remotecommand.Executor
	switch transport {
	case "websocket":
		ex, err = remotecommand.NewWebSocketExecutor(cfg, "GET", u.String())
	case "spdy":
		ex, err = remotecommand.NewSPDYExecutor(cfg, "POST", u)
	default:
		t.Fatalf("transport %q", transport)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Scale(d))
	defer cancel()
	var out, errOut bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut})
	return execResult{out.String(), errOut.String(), err}
}

var transports = []string{"websocket", "spdy"}

// TestLab starts one lab and checks, on a kwok node and pod: that pods/exec runs a shell here
// over both transports, what becomes of a non-zero exit status and of stdin's end (doc.go), and
// that the limited user may do what contrib/k8s/rbac.yaml grants and nothing more.
func TestLab(t *testing.T) {
	l := StartWith(t, Options{SMI: &scenario.SMI{}, ExecEnv: []string{"GPUTRIAGE_LAB=yes"}, ExecDir: "/tmp"})
	node := l.CreateNode("gpu-node-1", 8)
	if got := node.Status.Allocatable[GPUResource]; got.Value() != 8 {
		t.Errorf("node allocatable %s = %v, want 8", GPUResource, got.String())
	}
	pod := l.CreatePod(NewPod("default", "lab-pod", node.Name, "main"))
	if pod.Spec.NodeName != node.Name || pod.UID == "" {
		t.Fatalf("pod not bound or without UID: %+v", pod.ObjectMeta)
	}

	t.Run("exec runs sh -s here", func(t *testing.T) {
		for _, tr := range transports {
			r := execPod(t, l.Config, tr, "default", "lab-pod", "main", []string{"sh", "-s"}, "echo hello; exit 0\n", testenv.HangGuard)
			if r.err != nil || r.stdout != "hello\n" {
				t.Errorf("%s: stdout %q, stderr %q, err %v; want hello", tr, r.stdout, r.stderr, r.err)
			}
		}
	})
	t.Run("exec env, PATH and directory", func(t *testing.T) {
		script := `echo "$PATH"; echo "$GPUTRIAGE_LAB"; command -v nvidia-smi; pwd`
		r := execPod(t, l.Config, "websocket", "default", "lab-pod", "main", []string{"sh", "-c", script}, "", testenv.HangGuard)
		want := []string{l.ExecBin + ":" + filepath.Join(l.Dir, "smi") + ":" + execPath, "yes", filepath.Join(l.Dir, "smi", "nvidia-smi"), "/tmp"}
		if r.err != nil || r.stdout != strings.Join(want, "\n")+"\n" {
			t.Errorf("stdout %q, err %v; want %q", r.stdout, r.err, want)
		}
		// A command of ExecBin as the exec's own command, not only through sh.
		if err := os.WriteFile(filepath.Join(l.ExecBin, "lab-cmd"), []byte("#!/bin/sh\necho \"lab-cmd $GPUTRIAGE_LAB\"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		r = execPod(t, l.Config, "websocket", "default", "lab-pod", "main", []string{"lab-cmd"}, "", testenv.HangGuard)
		if r.err != nil || r.stdout != "lab-cmd yes\n" {
			t.Errorf("lab-cmd in ExecBin: stdout %q, stderr %q, err %v", r.stdout, r.stderr, r.err)
		}
	})
	t.Run("large streams", func(t *testing.T) {
		// A script of 256 KiB on stdin (a probe is tens of KiB) printing 4 MiB (a capture's
		// bound is in MiB), over both transports.
		script := strings.Repeat(": "+strings.Repeat("x", 1021)+"\n", 256) + "head -c 4194304 /dev/zero | tr '\\0' y; exit 0\n"
		for _, tr := range transports {
			r := execPod(t, l.Config, tr, "default", "lab-pod", "main", []string{"sh", "-s"}, script, testenv.HangGuard)
			if r.err != nil || len(r.stdout) != 4<<20 || strings.Trim(r.stdout, "y") != "" {
				t.Errorf("%s: %d bytes of stdout, stderr %q, err %v; want 4 MiB of y", tr, len(r.stdout), r.stderr, r.err)
			}
		}
	})
	t.Run("exit status", func(t *testing.T) {
		for _, tr := range transports {
			r := execPod(t, l.Config, tr, "default", "lab-pod", "main", []string{"sh", "-s"}, "echo out; echo err >&2; exit 3\n", testenv.HangGuard)
			var code interface{ ExitStatus() int }
			t.Logf("%s: exit 3 gives stdout %q, stderr %q, err %v", tr, r.stdout, r.stderr, r.err)
			if r.stdout != "out\n" || r.stderr != "err\n" {
				t.Errorf("%s: stdout %q, stderr %q; want out, err", tr, r.stdout, r.stderr)
			}
			// kwok v0.8.0 reports a failure without its exit status (doc.go): should that
			// change, doc.go and the design that leans on it are to be revisited.
			if r.err == nil || errors.As(r.err, &code) {
				t.Errorf("%s: exit 3 gives %v: kwok now passes exit statuses; update doc.go", tr, r.err)
			}
		}
	})
	t.Run("stdin EOF", func(t *testing.T) {
		// cat ends at its stdin's end; kwok v0.8.0 never closes the command's stdin (doc.go),
		// so cat runs until the exec is cut short. Should cat end by itself, kwok now passes
		// EOF: doc.go is to be revisited.
		for _, tr := range transports {
			t.Run(tr, func(t *testing.T) { // both at once: each waits out its bound
				t.Parallel()
				r := execPod(t, l.Config, tr, "default", "lab-pod", "main", []string{"cat"}, "abc\n", time.Second)
				t.Logf("cat of \"abc\\n\" gives stdout %q, err %v", r.stdout, r.err)
				if r.stdout != "abc\n" {
					t.Errorf("stdout %q, want abc", r.stdout)
				}
				if !errors.Is(r.err, context.DeadlineExceeded) {
					t.Errorf("cat ended (%v): kwok now passes stdin's end; update doc.go", r.err)
				}
			})
		}
	})
	t.Run("daemonset pod", func(t *testing.T) { testDaemonSetPod(t, l, node.Name) })
	t.Run("limited user", func(t *testing.T) { testLimited(t, l, node.Name) })
}

// testLimited checks LimitedUser: forbidden everything before contrib/k8s/rbac.yaml is applied;
// after it, reads nodes and pods everywhere and execs into pods of namespace gputriage only, and
// may not create or delete pods.
func testLimited(t *testing.T, l *Lab, node string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", l.LimitedKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("before the RBAC: listing nodes gives %v, want forbidden", err)
	}
	l.Apply(filepath.Join("..", "..", "contrib", "k8s", "rbac.yaml"))
	agent := l.CreatePod(NewPod("gputriage", "agent-1", node, "agent"))
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list nodes: %v", err)
	}
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	all, err := l.Client.CoreV1().Pods("").List(ctx, onNode)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, onNode)
	if err != nil || podCount(pods) != len(all.Items) {
		t.Errorf("list the node's pods: %v, %d pods, want %d", err, podCount(pods), len(all.Items))
	}
	for _, tr := range transports {
		r := execPod(t, cfg, tr, "gputriage", agent.Name, "agent", []string{"sh", "-s"}, "echo hello; exit 0\n", testenv.HangGuard)
		if r.err != nil || r.stdout != "hello\n" {
			t.Errorf("%s exec into the agent: stdout %q, err %v", tr, r.stdout, r.err)
		}
		r = execPod(t, cfg, tr, "default", "lab-pod", "main", []string{"sh", "-s"}, "echo hello; exit 0\n", testenv.HangGuard)
		if !apierrors.IsForbidden(r.err) && !strings.Contains(fmt.Sprint(r.err), "forbidden") {
			t.Errorf("%s exec into default/lab-pod: stdout %q, err %v; want forbidden", tr, r.stdout, r.err)
		}
	}
	if err := cs.CoreV1().Pods("gputriage").Delete(ctx, agent.Name, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("delete the agent pod: %v, want forbidden", err)
	}
	if _, err := cs.CoreV1().Pods("gputriage").Create(ctx, NewPod("gputriage", "x", node), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("create a pod: %v, want forbidden", err)
	}
}

func podCount(p *corev1.PodList) int {
	if p == nil {
		return 0
	}
	return len(p.Items)
}

// agentLike is a DaemonSet shaped like a node agent: privileged, hostPID, read-only hostPath
// mounts, in a namespace of its own.
const agentLike = `
apiVersion: v1
kind: Namespace
metadata:
  name: lab-agents
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
  namespace: lab-agents
spec:
  selector:
    matchLabels: {app.kubernetes.io/name: lab-agent}
  template:
    metadata:
      labels: {app.kubernetes.io/name: lab-agent}
    spec:
      hostPID: true
      containers:
      - name: agent
        image: example.invalid/agent:1
        securityContext: {privileged: true}
        volumeMounts:
        - {name: proc, mountPath: /host/proc, readOnly: true}
      volumes:
      - name: proc
        hostPath: {path: /proc}
`

// testDaemonSetPod applies agentLike (twice: applying is idempotent) and has DaemonSetPod make
// the DaemonSet's pod on node: Running, with the template's labels, owned by the DaemonSet, and
// exec into it runs here.
func testDaemonSetPod(t *testing.T, l *Lab, node string) {
	for range 2 {
		if err := l.apply([]byte(agentLike)); err != nil {
			t.Fatal(err)
		}
	}
	pod := l.DaemonSetPod("lab-agents", "agent", node)
	if pod.Labels["app.kubernetes.io/name"] != "lab-agent" || !pod.Spec.HostPID || len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Kind != "DaemonSet" {
		t.Errorf("pod %s: labels %v, hostPID %v, owners %+v", pod.Name, pod.Labels, pod.Spec.HostPID, pod.OwnerReferences)
	}
	r := execPod(t, l.Config, "websocket", "lab-agents", pod.Name, "agent", []string{"sh", "-s"}, "echo hello; exit 0\n", testenv.HangGuard)
	if r.err != nil || r.stdout != "hello\n" {
		t.Errorf("exec: stdout %q, err %v", r.stdout, r.err)
	}
}
