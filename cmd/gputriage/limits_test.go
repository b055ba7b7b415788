package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/sshtest"
)

// TestFanoutWithinFileLimit runs the CLI under a hard open-file limit of 32 against 32 hosts
// that each take 300 ms, with --fanout 64: there are not descriptors enough for every host at
// once, so gputriage probes fewer at a time and says so, and every host is triaged (none is
// reported unreachable for want of a descriptor).
func TestFanoutWithinFileLimit(t *testing.T) {
	runAsCLI()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("needs prlimit (util-linux)")
	}
	l := newSSHLab(t)
	var names []string
	for i := range 32 {
		name := fmt.Sprintf("gpu%02d", i)
		names = append(names, name)
		l.server(t, name, sshtest.Config{Exec: func(e *sshtest.Exec) int {
			raw := fixtureFor(t, e.Stdin, "clean")
			time.Sleep(300 * time.Millisecond)
			_, _ = e.Stdout.Write(raw)
			return 0
		}})
	}
	config := l.write(t, "")
	args, _ := json.Marshal(append([]string{"-F", config, "--timeout", "20s", "--fanout", "64", "--format", "json"}, names...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prlimit, "--nofile=32:32", "--", os.Args[0], "-test.run=^TestFanoutWithinFileLimit$")
	cmd.Env = []string{"GPUTRIAGE_TEST_CLI=" + string(args), "HOME=" + l.dir, "PATH=" + os.Getenv("PATH"), "USER=root"}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	t.Logf("exit %v; stderr:\n%s", err, errb.String())
	if err != nil {
		t.Errorf("gputriage failed: %v", err)
	}
	if !strings.Contains(errb.String(), "--fanout 64 needs about 80 open files, but the limit is 32") ||
		!strings.Contains(errb.String(), "probing 8 hosts at once") {
		t.Errorf("stderr does not say the fanout was capped to fit the open-file limit")
	}
	doc := decodeDoc(t, out.String())
	if len(doc.Hosts) != len(names) {
		t.Fatalf("%d hosts in the report, want %d", len(doc.Hosts), len(names))
	}
	for _, h := range doc.Hosts {
		if !h.OK || h.Error != nil {
			t.Errorf("%s: not triaged: %+v", h.Host, h.Error)
		}
	}
}

// TestConfigReadOncePerSweep: the ssh config of 100 hosts includes a FIFO, which can be read
// exactly once (its writer writes it once). Resolving every host reads it once: a second read
// would wait for a writer that never comes.
func TestConfigReadOncePerSweep(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fleet.conf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("Include "+fifo+"\nHost *\n  User ops\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		fmt.Fprintf(f, "Host gpu*\n  Port 2222\n  HostName %%h.cluster.example\n")
		f.Close()
	}()
	type result struct {
		out, errOut string
		code        int
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, code := cli(t, nil, "--dry-run", "--format", "json", "-F", config, "gpu[001-100]")
		done <- result{out, errOut, code}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(20 * time.Second):
		// Let the blocked second read finish, so the test ends.
		if f, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("resolving 100 hosts read the included file more than once")
	}
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	var doc struct {
		Hosts []struct {
			Host, Hostname string
			Port           int
		}
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil || len(doc.Hosts) != 100 {
		t.Fatalf("%d hosts (%v)", len(doc.Hosts), err)
	}
	for _, h := range doc.Hosts {
		if h.Port != 2222 || h.Hostname != h.Host+".cluster.example" {
			t.Errorf("%s: resolved to %s port %d: the included file was not applied", h.Host, h.Hostname, h.Port)
		}
	}
}

// runAsCLI runs the CLI and exits when this test binary was started as the CLI: with
// GPUTRIAGE_TEST_CLI holding its arguments (JSON) and -test.run naming the calling test, so
// that a test can run it under limits of its own.
func runAsCLI() {
	args := os.Getenv("GPUTRIAGE_TEST_CLI")
	if args == "" {
		return
	}
	var a []string
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		panic(err)
	}
	code := run(context.Background(), a, os.Stdin, os.Stdout, os.Stderr, os.Getenv, func(io.Writer) (bool, int) { return false, 0 })
	os.Exit(code)
}
