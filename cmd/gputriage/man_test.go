package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestManPageIsCurrent: docs/gputriage.1 is what `gputriage __man` generates from the flag
// definitions today. Regenerate with: go run ./cmd/gputriage __man > docs/gputriage.1 (or
// go test ./cmd/gputriage -run TestManPageIsCurrent -update).
func TestManPageIsCurrent(t *testing.T) {
	out, _, code := cli(t, nil, "__man")
	if code != exitOK {
		t.Fatalf("__man: exit %d", code)
	}
	path := filepath.Join(repoRoot(t), manPath)
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped, err := os.ReadFile(path)
	if err != nil || string(shipped) != out {
		t.Fatalf("%s is stale (%v): regenerate it with go run ./cmd/gputriage __man > %s", manPath, err, manPath)
	}
	for _, cmd := range flagCommands() { // each flag of each command is described, not only named
		flagSet(cmd, newFlags(cmd)).VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(out, `\fB\-\-`+roff(f.Name)+`\fR`) {
				t.Errorf("the man page does not describe --%s (gputriage %s)", f.Name, cmd)
			}
		})
	}
	for _, c := range commands() {
		if !c.hidden && !strings.Contains(out, ".B gputriage "+roff(c.usage)) {
			t.Errorf("the man page lacks gputriage %s", c.name)
		}
	}
	if groff, err := exec.LookPath("groff"); err == nil {
		msgs, err := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", path).CombinedOutput()
		if err != nil || len(msgs) > 0 {
			t.Errorf("groff -ww: %v\n%s", err, msgs)
		}
	}
}
