package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/kube"
)

// TestDebugRouteRuns: the route the no-agent failure prints is a command line that works as
// printed: run by sh with this gputriage and a kubectl stand-in on PATH (it checks its
// arguments are kubectl debug's node profile, then does what the debug pod does: runs the
// host's sh on stdin, chroot /host being / here), it writes NODE.capture from the real probe
// and replays it.
func TestDebugRouteRuns(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gputriage")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "debug node/gpu01 --profile=sysadmin -i --quiet --image=" + kube.DebugImage + " -- chroot /host sh -s"
	kubectl := "#!/bin/sh\n[ \"$*\" = '" + want + "' ] || { echo \"kubectl stand-in: unexpected arguments: $*\" >&2; exit 64; }\nexec sh -s\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(kubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	route := kube.DebugRoute("gpu01")
	cmd := exec.Command("sh", "-c", route)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() > exitFindings) {
		t.Fatalf("%s: %v\n%s", route, err, out)
	}
	host, _ := os.Hostname()
	raw, rerr := os.ReadFile(filepath.Join(work, "gpu01.capture"))
	if rerr != nil || !strings.HasPrefix(string(raw), "gputriage-capture v2 nonce=") || !strings.Contains(string(out), host) {
		t.Errorf("%s: capture %v (%.40q), report:\n%s", route, rerr, raw, out)
	}
}
