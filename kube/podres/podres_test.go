package podres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/gputriage/gputriage/internal/podrestest"
	"github.com/gputriage/gputriage/kube/podres"
	"github.com/gputriage/gputriage/parse"
)

func TestListThroughSocket(t *testing.T) {
	srv := podrestest.Start(t)
	srv.SetPod("ml", "train-0", podrestest.GPU("main", "GPU-aaaa", "GPU-bbbb::1"))
	srv.SetPod("ml", "dra", &podresv1.ContainerResources{Name: "c", DynamicResources: []*podresv1.DynamicResource{{ClaimName: "gpu"}}})
	b, err := podres.List(context.Background(), srv.Socket, podres.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	var got parse.K8sResources
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	p := got.PodResources("ml", "train-0")
	if p == nil || p.Containers[0].Name != "main" || p.Containers[0].Devices[0].Resource != "nvidia.com/gpu" ||
		strings.Join(p.Containers[0].Devices[0].IDs, ",") != "GPU-aaaa,GPU-bbbb::1" {
		t.Fatalf("List = %s", b)
	}
	if d := got.PodResources("ml", "dra"); d == nil || !d.Containers[0].Dynamic {
		t.Errorf("the DRA container is not marked dynamic: %s", b)
	}
	if srv.Calls() != 1 {
		t.Errorf("%d List calls", srv.Calls())
	}
}

// A kubelet that accepts and never answers costs the timeout, not forever; an answer over
// the message bound is refused; a missing socket is an error.
func TestListBounded(t *testing.T) {
	dir := t.TempDir()
	mute := filepath.Join(dir, "mute.sock")
	l, err := net.Listen("unix", mute)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	if _, err := podres.List(context.Background(), mute, podres.Limits{MaxMessageBytes: 1 << 20, Timeout: 300 * time.Millisecond}); err == nil {
		t.Error("a mute kubelet answered")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a mute kubelet held List %v", d)
	}
	srv := podrestest.Start(t)
	srv.SetPod("ml", strings.Repeat("p", 4096), podrestest.GPU("c", "GPU-1"))
	if _, err := podres.List(context.Background(), srv.Socket, podres.Limits{MaxMessageBytes: 1024, Timeout: 5 * time.Second}); err == nil {
		t.Error("an answer over the message bound was read")
	}
	if _, err := podres.List(context.Background(), filepath.Join(dir, "none.sock"), podres.Limits{MaxMessageBytes: 1024, Timeout: 5 * time.Second}); err == nil {
		t.Error("a missing socket answered")
	}
}

// The mode as an agent pod runs it: the real binary, the socket given by --socket.
func TestAgentBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	_, file, _, _ := runtime.Caller(0)
	bin := filepath.Join(t.TempDir(), "gputriage-agent")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gputriage-agent")
	build.Dir = filepath.Join(filepath.Dir(file), "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	srv := podrestest.Start(t)
	srv.SetPod("ml", "train-0", podrestest.GPU("main", "GPU-aaaa"))
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, "podresources", "--socket", srv.Socket)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	var got parse.K8sResources
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got.PodResources("ml", "train-0") == nil {
		t.Fatalf("stdout %q: %v", stdout.String(), err)
	}
	for _, args := range [][]string{{}, {"k8s-agent", "podresources"}, {"podresources", "--bogus"}, {"podresources", "--socket", filepath.Join(t.TempDir(), "x")}} {
		err := exec.Command(bin, args...).Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() == 0 {
			t.Errorf("%v: %v, want a failing exit status", args, err)
		}
	}
}

// TestAgentSocketFromEnv: without --socket the agent asks the socket $GPUTRIAGE_PODRESOURCES_SOCKET
// names (a kubelet rooted elsewhere than /var/lib/kubelet); --socket still wins over it.
func TestAgentSocketFromEnv(t *testing.T) {
	srv := podrestest.Start(t)
	srv.SetPod("ml", "train-0", podrestest.GPU("main", "GPU-aaaa"))
	t.Setenv(podres.SocketEnv, srv.Socket)
	run := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := podres.Agent(context.Background(), append([]string{"podresources"}, args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := run(); code != 0 || !strings.Contains(out, `"train-0"`) {
		t.Errorf("socket from env: exit %d, %q", code, out)
	}
	if code, out := run("--socket", filepath.Join(t.TempDir(), "none.sock")); code != 1 {
		t.Errorf("--socket over env: exit %d, %q; want 1 (its socket does not exist)", code, out)
	}
	if got := podres.Socket(func(string) string { return "" }); got != podres.DefaultSocket {
		t.Errorf("unset env: %q, want %q", got, podres.DefaultSocket)
	}
}
