package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/sshexec"
)

func TestNodeTargets(t *testing.T) {
	for _, c := range []struct {
		host, node string
		ok         bool
	}{{"k8s/gpu01", "gpu01", true}, {"k8s/", "", true}, {"gpu01", "", false}, {"k8s", "", false}} {
		if node, ok := Node(c.host); node != c.node || ok != c.ok {
			t.Errorf("Node(%q) = %q, %v", c.host, node, ok)
		}
	}
	for _, bad := range []string{"GPU01", "a_b", "-a", "a,b", "a=b", "a\nb", strings.Repeat("a", 254)} {
		if CheckNode(bad) == nil {
			t.Errorf("CheckNode(%q) accepted", bad)
		}
	}
	if err := CheckNode("gpu-01.rack2"); err != nil {
		t.Error(err)
	}
}

// writeKubeconfig writes a kubeconfig file of these clusters, users and contexts.
func writeKubeconfig(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenAsKubectl: the kubeconfig is loaded by clientcmd as kubectl loads it: every file of
// $KUBECONFIG merged (the first to set a value wins), --kubeconfig alone when given,
// --context over current-context, the context user's impersonation and exec credential
// plugin kept for client-go to run.
func TestOpenAsKubectl(t *testing.T) {
	a := writeKubeconfig(t, "a", `apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://one.example:6443"}
- name: c2
  cluster: {server: "https://two.example:6443"}
contexts:
- name: one
  context: {cluster: c1, user: u1}
users:
- name: u1
  user: {token: t1}
`)
	b := writeKubeconfig(t, "b", `apiVersion: v1
kind: Config
current-context: two
contexts:
- name: two
  context: {cluster: c2, user: u2}
users:
- name: u2
  user:
    as: oncall
    as-groups: [sre]
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: get-token
      interactiveMode: Never
`)
	t.Setenv("KUBECONFIG", a+string(filepath.ListSeparator)+b)
	k, err := Open(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Context() != "one" || k.Host() != "https://one.example:6443" || k.rest.BearerToken != "t1" || k.Namespace() != DefaultAgentNamespace {
		t.Errorf("current context: %s %s %q %s", k.Context(), k.Host(), k.rest.BearerToken, k.Namespace())
	}
	k, err = Open(Config{Context: "two", AgentNamespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if k.Host() != "https://two.example:6443" || k.Impersonating() != "oncall" || strings.Join(k.rest.Impersonate.Groups, ",") != "sre" ||
		k.rest.ExecProvider == nil || k.rest.ExecProvider.Command != "get-token" || k.Namespace() != "ops" {
		t.Errorf("--context two: %s as %q %v exec %+v ns %s", k.Host(), k.Impersonating(), k.rest.Impersonate.Groups, k.rest.ExecProvider, k.Namespace())
	}
	if _, err := Open(Config{Kubeconfig: b, Context: "one"}); err == nil {
		t.Error("--kubeconfig b --context one: accepted a context only $KUBECONFIG's other file has")
	}
	for _, c := range []Config{{Selector: "gpu in (a"}, {AgentNamespace: "Bad_NS"}, {Kubeconfig: filepath.Join(t.TempDir(), "none")}} {
		if _, err := Open(c); err == nil {
			t.Errorf("Open(%+v) accepted", c)
		}
	}
}

func TestWithExit(t *testing.T) {
	for in, want := range map[string]string{"a\n": "a\nexit 0\n", "a": "a\nexit 0\n", "": "exit 0\n"} {
		if got := string(WithExit([]byte(in))); got != want {
			t.Errorf("WithExit(%q) = %q", in, got)
		}
	}
	if a := argv("sh -s"); strings.Join(a, " ") != "sh -s" || len(a) != 2 {
		t.Errorf("argv(sh -s) = %q", a)
	}
	if a := argv("sh -c 'x y'"); len(a) != 3 || a[2] != "sh -c 'x y'" {
		t.Errorf("argv: %q", a)
	}
}

// fakeNode is a node of a fake API with an agent pod, whose exec the test plays.
func fakeNode(t *testing.T, objs ...corev1.Pod) *Cluster {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu01"},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{GPUResource: resource.MustParse("8")}}}
	cs := fake.NewClientset(node)
	for i := range objs {
		if _, err := cs.CoreV1().Pods(objs[i].Namespace).Create(context.Background(), &objs[i], metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return &Cluster{cfg: Config{}, context: "lab", rest: nil, cs: fakeCore{cs}, ns: DefaultAgentNamespace}
}

// fakeCore is the fake clientset as the core/v1 API Cluster asks; its exec is the test's.
type fakeCore struct{ cs *fake.Clientset }

func (f fakeCore) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	return f.cs.CoreV1().Pods(ns).List(ctx, opts)
}

func (f fakeCore) listNodes(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	return f.cs.CoreV1().Nodes().List(ctx, opts)
}

func (f fakeCore) getNode(ctx context.Context, name string) (*corev1.Node, error) {
	return f.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

func (f fakeCore) execRequest(string, string, *corev1.PodExecOptions) *rest.Request { return nil }

func agentPod(node string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gputriage-agent-x", Namespace: DefaultAgentNamespace,
		Labels: map[string]string{"app.kubernetes.io/name": "gputriage-agent"}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: AgentContainer}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

const nonce = "0123456789abcdef0123456789abcdef"

func capture(done bool) string {
	s := "gputriage-capture v2 nonce=" + nonce + "\n@@gputriage " + nonce + " begin host limit=100\nhostname=x\n\n@@gputriage " + nonce + " rc=0\n@@gputriage " + nonce + " end host\n"
	if done {
		s += "@@gputriage " + nonce + " done\n"
	}
	return s
}

// play is an exec stand-in: it records stdin and argv, writes out and errOut, returns code, err.
type play struct {
	argv          [][]string
	stdin         []byte
	out, errOut   string
	code          int
	err           error
	hang          bool
	podResources  string
	podResRefused bool
	duringProbe   func() // runs while the probe runs
}

func (p *play) exec(ctx context.Context, pod string, argv []string, stdin []byte, stdout, stderr io.Writer) (int, error) {
	p.argv = append(p.argv, argv)
	if argv[0] == PodResourcesCommand[0] {
		if p.podResRefused {
			fmt.Fprint(stderr, "no socket")
			return 1, nil
		}
		fmt.Fprint(stdout, p.podResources)
		return 0, nil
	}
	p.stdin = stdin
	if p.duringProbe != nil {
		p.duringProbe()
	}
	if p.hang {
		select {} // a stream that never notices its context
	}
	io.WriteString(stdout, p.out)
	io.WriteString(stderr, p.errOut)
	return p.code, p.err
}

func runOn(t *testing.T, k *Cluster, p *play, o sshexec.Options, block bool) sshexec.Result {
	t.Helper()
	k.exec = p.exec
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	o.Command = "sh -s"
	return NodeVia{K: k, Node: "gpu01", Block: block}.RunTarget(context.Background(), sshexec.Target{Name: "k8s/gpu01"}, o)
}

// TestRunTargetOutcomes: how an exec's end is judged, on the paths kwok cannot show (a real
// exit status; a stream that ends in an error; output over the bound; a head refused): the
// capture's own final marker decides, never the exit status alone.
func TestRunTargetOutcomes(t *testing.T) {
	whole, cut := capture(true), capture(false)
	for _, c := range []struct {
		name     string
		p        play
		kind     string
		exitCode int
	}{
		{"whole capture, exit 0", play{out: whole}, "", 0},
		{"whole capture, exit 3: the capture decides", play{out: whole, code: 3}, "", 3},
		{"no output, exit 127", play{errOut: "sh: not found", code: 127}, sshexec.KindExit, 127},
		{"stream error after a whole capture (kwok's exit status)", play{out: whole, code: -1, err: errors.New("cmd wait: sh -s: exit status 3")}, "", -1},
		{"stream error mid-capture", play{out: cut, code: -1, err: errors.New("connection reset")}, sshexec.KindClosed, -1},
		{"stream error before any output", play{code: -1, err: errors.New("upgrade failed")}, sshexec.KindOther, -1},
		{"another run's capture", play{out: strings.Replace(whole, nonce, strings.Repeat("f", 32), -1)}, sshexec.KindBadOutput, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := c.p
			head := func(b []byte) (bool, error) {
				if bytes.HasPrefix(b, []byte("gputriage-capture v2 nonce="+nonce)) {
					return true, nil
				}
				if bytes.HasPrefix(b, []byte("gputriage-capture")) {
					return false, errors.New("another run")
				}
				return false, nil
			}
			r := runOn(t, fakeNode(t, agentPod("gpu01")), &p, sshexec.Options{Stdin: []byte("set -- x 1\nscript"), Head: head}, false)
			kind := ""
			if r.Err != nil {
				kind = r.Err.Kind
			}
			if kind != c.kind {
				t.Errorf("kind %q, want %q (%+v)", kind, c.kind, r.Err)
			}
			if got := -1; r.ExitCode != nil && *r.ExitCode != c.exitCode || r.ExitCode == nil && c.exitCode != got {
				t.Errorf("exit code %v, want %d", r.ExitCode, c.exitCode)
			}
			if c.kind == sshexec.KindExit && !strings.Contains(r.Err.Message, "sh: not found") {
				t.Errorf("the failure does not quote stderr: %q", r.Err.Message)
			}
			if string(p.stdin) != "set -- x 1\nscript\nexit 0\n" || strings.Join(p.argv[0], " ") != "sh -s" {
				t.Errorf("exec %q with stdin %q", p.argv, p.stdin)
			}
		})
	}
}

// TestRunTargetBounds: stdout is cut at the bound and the stream closed; stderr is bounded;
// an exec that never ends, and never notices its context, is left at the host's deadline.
func TestRunTargetBounds(t *testing.T) {
	k := fakeNode(t, agentPod("gpu01"))
	r := runOn(t, k, &play{out: strings.Repeat("x", 5000), errOut: strings.Repeat("e", 300)}, sshexec.Options{MaxOutput: 1000, MaxStderr: 100}, false)
	if !r.Truncated || len(r.Stdout) != 1000 || len(r.Stderr) != 100 || r.Err != nil || len(r.Notes) != 2 {
		t.Errorf("truncated %v, %d bytes out, %d err, %v, notes %q", r.Truncated, len(r.Stdout), len(r.Stderr), r.Err, r.Notes)
	}
	start := time.Now()
	r = runOn(t, k, &play{hang: true}, sshexec.Options{Timeout: 500 * time.Millisecond}, false)
	if r.Err == nil || r.Err.Kind != sshexec.KindTimeout || time.Since(start) > 500*time.Millisecond+streamGrace+5*time.Second {
		t.Errorf("a hung exec: %+v after %s", r.Err, time.Since(start))
	}
}

// TestNoAgent: a node without a running agent names how to get one and the kubectl debug
// route; a node the cluster does not have is an unknown name.
func TestNoAgent(t *testing.T) {
	pending := agentPod("gpu01")
	pending.Status.Phase = corev1.PodPending
	elsewhere := agentPod("gpu02")
	elsewhere.Name = "gputriage-agent-y"
	elsewhere.Labels = map[string]string{"app.kubernetes.io/name": "other"}
	k := fakeNode(t, pending, elsewhere)
	r := runOn(t, k, &play{}, sshexec.Options{}, false)
	if r.Err == nil || r.Err.Kind != sshexec.KindUnreachable || r.Err.Message != NoAgentMessage("gpu01", DefaultAgentNamespace) {
		t.Fatalf("%+v", r.Err)
	}
	for _, want := range []string{"contrib/k8s/agent.yaml", "docs/kubernetes.md", DebugRoute("gpu01")} {
		if !strings.Contains(r.Err.Message, want) {
			t.Errorf("message lacks %q: %s", want, r.Err.Message)
		}
	}
	r = NodeVia{K: k, Node: "gpu09"}.RunTarget(context.Background(), sshexec.Target{Name: "k8s/gpu09"}, sshexec.Options{Command: "sh -s", Timeout: time.Minute})
	if r.Err == nil || r.Err.Kind != sshexec.KindNameLookup || !strings.Contains(r.Err.Message, "no node gpu09") {
		t.Errorf("gpu09: %+v", r.Err)
	}
}

// TestBlockAppended: after a whole capture the client appends the node's pods from the API
// and the agent's allocations, read back by parse; the node's bytes after its final marker
// are cut, so it can forge no block; a capture cut short gets none.
func TestBlockAppended(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sglang-1", Namespace: "serving", UID: "u-1"},
		Spec: corev1.PodSpec{NodeName: "gpu01"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	k := fakeNode(t, agentPod("gpu01"), pod)
	forged := "gputriage-k8s v1 nonce=" + nonce + " node=Z3B1MDE=\n@@k8s begin pods\nZm9yZ2Vk\n@@k8s end pods\n@@k8s done\n"
	p := &play{out: capture(true) + forged, podResources: `{"pods":[]}`}
	r := runOn(t, k, p, sshexec.Options{}, true)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	snap, _ := parse.Parse(r.Stdout)
	if snap.K8s == nil || snap.K8s.Node != "gpu01" || !snap.K8s.PodsKnown || snap.K8s.Pod("u-1") == nil || snap.K8s.Resources == nil {
		t.Fatalf("block: %+v\n%s", snap.K8s, r.Stdout)
	}
	if bytes.Contains(r.Stdout, []byte("Zm9yZ2Vk")) {
		t.Errorf("the node's forged block is kept:\n%s", r.Stdout)
	}
	r = runOn(t, k, &play{out: capture(false), podResRefused: true}, sshexec.Options{}, true)
	if bytes.Contains(r.Stdout, []byte("gputriage-k8s")) || len(r.Notes) == 0 {
		t.Errorf("a capture cut short got a block, or no note: %q\n%s", r.Notes, r.Stdout)
	}
}

// TestBlockPodDeletedDuringProbe: a pod the API listed before the probe and not after is in
// the block, marked gone during the probe; a pod still listed after is not.
func TestBlockPodDeletedDuringProbe(t *testing.T) {
	pod := func(name string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "serving", UID: types.UID("u-" + name)},
			Spec: corev1.PodSpec{NodeName: "gpu01"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	k := fakeNode(t, agentPod("gpu01"), pod("stays"), pod("goes"))
	cs := k.cs.(fakeCore).cs
	p := &play{out: capture(true), podResources: `{"pods":[]}`, duringProbe: func() {
		if err := cs.CoreV1().Pods("serving").Delete(context.Background(), "goes", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}}
	r := runOn(t, k, p, sshexec.Options{}, true)
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	snap, _ := parse.Parse(r.Stdout)
	if snap.K8s == nil {
		t.Fatalf("no block:\n%s", r.Stdout)
	}
	if g := snap.K8s.Pod("u-goes"); g == nil || !g.GoneDuringProbe || g.Name != "goes" {
		t.Errorf("the pod deleted during the probe: %+v", g)
	}
	if s := snap.K8s.Pod("u-stays"); s == nil || s.GoneDuringProbe {
		t.Errorf("the pod that stays: %+v", s)
	}
}

// TestBlockPodRecreatedDuringProbe: a pod deleted while the probe ran and created again under
// its name (a StatefulSet's) is two pods of the block: the old UID marked gone during the
// probe, the new one not; a first listing that failed marks no pod, and says so.
func TestBlockPodRecreatedDuringProbe(t *testing.T) {
	pod := func(name, uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", UID: types.UID(uid)},
			Spec: corev1.PodSpec{NodeName: "gpu01"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	for _, failFirst := range []bool{false, true} {
		k := fakeNode(t, agentPod("gpu01"), *pod("train-0", "u-old"))
		cs := k.cs.(fakeCore).cs
		lists := 0
		cs.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetNamespace() != "" {
				return false, nil, nil // the agent's lookup
			}
			if lists++; failFirst && lists == 1 {
				return true, nil, errors.New("etcdserver: request timed out")
			}
			return false, nil, nil
		})
		p := &play{out: capture(true), podResources: `{"pods":[]}`, duringProbe: func() {
			ctx := context.Background()
			if err := cs.CoreV1().Pods("ml").Delete(ctx, "train-0", metav1.DeleteOptions{}); err != nil {
				t.Error(err)
			}
			if _, err := cs.CoreV1().Pods("ml").Create(ctx, pod("train-0", "u-new"), metav1.CreateOptions{}); err != nil {
				t.Error(err)
			}
		}}
		r := runOn(t, k, p, sshexec.Options{}, true)
		snap, _ := parse.Parse(r.Stdout)
		if r.Err != nil || snap.K8s == nil || lists != 2 {
			t.Fatalf("failFirst %v: err %v, %d listings, block %v", failFirst, r.Err, lists, snap.K8s)
		}
		old, cur := snap.K8s.Pod("u-old"), snap.K8s.Pod("u-new")
		if cur == nil || cur.GoneDuringProbe || cur.Name != "train-0" {
			t.Errorf("failFirst %v: the new pod: %+v", failFirst, cur)
		}
		noted := slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "not listed before the probe (etcdserver") })
		switch {
		case !failFirst && (old == nil || !old.GoneDuringProbe || old.Name != "train-0" || noted):
			t.Errorf("the old pod: %+v, notes %q", old, r.Notes)
		case failFirst && (old != nil || !noted || !snap.K8s.PodsBeforeUnknown):
			t.Errorf("after a failed first listing: old pod %+v, notes %q, block says the listing before is unknown: %v", old, r.Notes, snap.K8s.PodsBeforeUnknown)
		case !failFirst && snap.K8s.PodsBeforeUnknown:
			t.Error("the block says the listing before the probe is unknown")
		}
	}
}

// hangFirstList is a fake API whose first listing of a node's pods in every namespace waits
// for its context to end, as a slow API server's would.
type hangFirstList struct {
	fakeCore
	lists *int
}

func (h hangFirstList) listPods(ctx context.Context, ns string, opts metav1.ListOptions) (*corev1.PodList, error) {
	if ns == "" {
		if *h.lists++; *h.lists == 1 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
	}
	return h.fakeCore.listPods(ctx, ns, opts)
}

// TestBlockFirstListingHangs: the listing before the probe only tells pods deleted while it
// ran; an API server slow to answer it costs the node a note, never its probe.
func TestBlockFirstListingHangs(t *testing.T) {
	k := fakeNode(t, agentPod("gpu01"))
	lists := 0
	k.cs = hangFirstList{k.cs.(fakeCore), &lists}
	r := runOn(t, k, &play{out: capture(true), podResources: `{"pods":[]}`}, sshexec.Options{Timeout: 4 * time.Second}, true)
	if r.Err != nil {
		t.Fatalf("the node failed: %v", r.Err)
	}
	snap, _ := parse.Parse(r.Stdout)
	noted := slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "not listed before the probe") })
	if snap.K8s == nil || !snap.K8s.PodsKnown || !noted || lists != 2 {
		t.Errorf("block %+v, %d listings, notes %q", snap.K8s, lists, r.Notes)
	}
}

// TestBlockGoneDuringProbeOneRunOnly: a pod deleted while one probe ran spares its processes
// that run only: the next run's block does not list it at all, so a process of it still
// running is pod-gone there (a tenant who deletes its pod during a probe hides nothing for
// longer).
func TestBlockGoneDuringProbeOneRunOnly(t *testing.T) {
	k := fakeNode(t, agentPod("gpu01"), corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "stuck", Namespace: "ml", UID: "u-stuck"},
		Spec: corev1.PodSpec{NodeName: "gpu01"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}})
	cs := k.cs.(fakeCore).cs
	del := func() {
		if err := cs.CoreV1().Pods("ml").Delete(context.Background(), "stuck", metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	for run, hook := range []func(){del, nil} {
		r := runOn(t, k, &play{out: capture(true), podResources: `{"pods":[]}`, duringProbe: hook}, sshexec.Options{}, true)
		snap, _ := parse.Parse(r.Stdout)
		if r.Err != nil || snap.K8s == nil || !snap.K8s.PodsKnown {
			t.Fatalf("run %d: %v %+v", run, r.Err, snap.K8s)
		}
		if p := snap.K8s.Pod("u-stuck"); (run == 0) != (p != nil && p.GoneDuringProbe) || run == 1 && p != nil {
			t.Errorf("run %d: the pod deleted in the first run: %+v", run, p)
		}
	}
}
