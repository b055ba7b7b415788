package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLaptopBinaryLinksNoGRPC: the laptop's binary carries no gRPC, which only the node agent
// needs (cmd/gputriage-agent): 10.7 MB of binary and 5 MiB resident on every run, measured in
// docs/performance.md. Built for darwin as well as this machine, as laptops run it.
func TestLaptopBinaryLinksNoGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-deps", ".")
		cmd.Env = append(cmd.Environ(), "GOOS="+goos, "GOARCH=arm64")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (%s): %v", goos, err)
		}
		for _, pkg := range strings.Fields(string(out)) {
			if strings.HasPrefix(pkg, "google.golang.org/grpc") || strings.HasPrefix(pkg, "k8s.io/kubelet/") {
				t.Errorf("%s: gputriage links %s, which belongs in gputriage-agent", goos, pkg)
			}
		}
	}
}
