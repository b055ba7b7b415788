package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
)

// Every pasted error log in the corpus is explained (exit 0); text with no known error is
// refused with exit 2, never guessed at.
func TestExplainCorpus(t *testing.T) {
	corpus := filepath.Join(repoRoot(t), "..", "shared", "corpus")
	entries, err := os.ReadDir(corpus)
	if err != nil {
		testenv.SkipSuite(t, "corpus", "../shared/corpus beside this checkout", fmt.Sprintf("corpus not present: %v", err))
	}
	prefixes := []string{"sglang_", "vllm_", "pytorch_oom_", "nccl_", "dataloader_", "smi-error_", "dmesg_"}
	n := 0
	for _, de := range entries {
		name := de.Name()
		match := false
		for _, p := range prefixes {
			match = match || strings.HasPrefix(name, p)
		}
		if !match {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			out, errOut, code := cli(t, nil, "explain", "--file", filepath.Join(corpus, name))
			if code != exitOK || out == "" {
				t.Errorf("exit %d, stderr %q", code, errOut)
			}
			if strings.Contains(out, "\x1b") {
				t.Error("escape byte in the explanation")
			}
		})
	}
	if n < 15 {
		t.Errorf("only %d corpus logs found", n)
	}
}

func TestExplainCLI(t *testing.T) {
	incident := "RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. pre_model_load_memory=39.74761962890625, local_gpu_memory=93.7274169921875, local_gpu_memory * 0.9=84.35467529296875"
	out, _, code := cli(t, nil, "explain", incident)
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"sglang-unbalanced", "39.75 GiB", "93.73 GiB", "53.98 GiB", "gputriage HOST   # and with --tp N"} {
		if !strings.Contains(out, want) {
			t.Errorf("explanation lacks %q:\n%s", want, out)
		}
	}
	out, _, code = cli(t, nil, "explain", "--format", "json", incident)
	if code != exitOK || !strings.Contains(out, `"family": "sglang-unbalanced"`) || !strings.Contains(out, `"schema": "gputriage/v1"`) {
		t.Errorf("json: exit %d\n%s", code, out)
	}
	out, _, code = cli(t, nil, "explain", "--format", "markdown", incident)
	if code != exitOK || !strings.Contains(out, "## `sglang-unbalanced`") {
		t.Errorf("markdown: exit %d\n%s", code, out)
	}
	for _, text := range []string{"Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'a'", ""} {
		_, errOut, code := cli(t, nil, "explain", text)
		if code != exitUsage || !strings.Contains(errOut, "no known GPU error") {
			t.Errorf("unrecognized %q: exit %d, stderr %q", text, code, errOut)
		}
	}
	if _, _, code := cli(t, nil, "explain", "--file", "/nonexistent/log"); code != exitUsage {
		t.Errorf("missing file: exit %d", code)
	}
}

// TestExplainTiesPIDBeyondFold: explain --host ties a PID the message names to its process
// on a crowded host (every section at the client's bound: 2,000 processes described) even
// when the result kept for the report folds that process away (diagnose.Retain keeps those
// its findings name and 32 others): the tie is read while the host's whole result is at hand.
// Before, it said the process was not a GPU process on the host.
func TestExplainTiesPIDBeyondFold(t *testing.T) {
	const pid = 101999 // described by the capture, named by no finding
	raw := simfleet.LimitCapture(parse.SectionNames()...)
	l := newSSHLab(t)
	l.server(t, "crowded", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		first, _ := bufio.NewReaderSize(io.LimitReader(e.Stdin, 512), 512).ReadString('\n')
		go func() { _, _ = io.Copy(io.Discard, e.Stdin) }()
		_, _ = e.Stdout.Write(bytes.ReplaceAll(raw, []byte(simfleet.LimitNonce), []byte(simfleet.NonceOf(first))))
		return 0
	}})
	config := l.write(t, "")
	msg := fmt.Sprintf("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free. Process %d has 54.00 GiB memory in use.", pid)
	out, errOut, code := cli(t, nil, "explain", "-F", config, "--timeout", "60s", "--color", "never", "--host", "crowded", msg)
	if code != exitOK && code != exitFindings {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if want := fmt.Sprintf("PID %d (54.00 GiB in the log) on crowded: python3 train.py", pid); !strings.Contains(out, want) {
		t.Errorf("the PID is not tied to the host's process (want %q):\n%s", want, out)
	}
}

// `gputriage explain "…"` as typed, piped at several COLUMNS and at a terminal of several
// widths, never parts a number from its unit ("1.20" / "GiB is free" at 70 columns, "77.88" /
// "GiB" at 80 before), on the README's message, the and the corpus logs (--file).
func TestExplainWrapKeepsUnitsCLI(t *testing.T) {
	root := repoRoot(t)
	for i, msg := range testenv.ExplainCorpus(t, root) {
		args := []string{"explain", msg}
		if i >= len(testenv.ExplainMessages) { // a corpus log: given as the user would, by file
			f := filepath.Join(t.TempDir(), "server.log")
			if err := os.WriteFile(f, []byte(msg), 0o644); err != nil {
				t.Fatal(err)
			}
			args = []string{"explain", "--file", f}
		}
		for _, width := range []int{40, 57, 70, 80, 100, 120} {
			out, errOut, code := cli(t, map[string]string{"COLUMNS": strconv.Itoa(width)}, args...)
			if code != exitOK {
				t.Fatalf("COLUMNS=%d %.60q: exit %d, %s", width, msg, code, errOut)
			}
			for _, p := range testenv.PartedUnits(out) {
				t.Errorf("COLUMNS=%d: a number parted from its unit: %q", width, p)
			}
			out, _, _ = cliTerminal(t, width, nil, append(args, "--color", "never")...)
			for _, p := range testenv.PartedUnits(out) {
				t.Errorf("terminal of %d columns: a number parted from its unit: %q", width, p)
			}
		}
	}
}
