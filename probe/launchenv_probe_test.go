//go:build linux

package probe_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// TestProbeLaunchEnv: of a GPU holder's environment the probe sends only the torchrun agent's
// variables, each checked; nothing else leaves the host (a secret beside them, the value that
// tries to forge an entry with a newline), nothing of an ancestor's environment or of a process
// that holds no GPU, and no entry the 256 KiB bound cut short.
func TestProbeLaunchEnv(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	pad := func(name string, n int) string { return name + "=" + strings.Repeat("a", n) }
	leafEnv := []string{
		"A=x\nTORCHELASTIC_RUN_ID=forged",
		"SECRET_TOKEN=hunter2-s3cret",
		"LOCAL_RANK=3",
		"TORCHELASTIC_RESTART_COUNT=1234567",
		"TORCHELASTIC_RUN_ID=run-42",
	}
	used := 0
	for _, e := range leafEnv {
		used += len(e) + 1
	}
	// GROUP_RANK=12 starts where the bound leaves room for "GROUP_RANK=1" only.
	pads := []string{pad("PAD1", 100_000), pad("PAD2", 100_000)} // a string is at most 128 KiB
	for _, p := range pads {
		used += len(p) + 1
	}
	pads = append(pads, pad("PAD3", 262144-used-len("GROUP_RANK=1")-len("PAD3=")-1))
	leafEnv = append(append(leafEnv, pads...), "GROUP_RANK=12")

	args := append([]string{"-c", `env -i "$@" & wait`, "sh"}, leafEnv...)
	cmd := exec.Command("sh", append(args, "sleep", "600")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TORCHELASTIC_RUN_ID=ancestor-run", "LOCAL_RANK=5"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var chain []int // leaf, sh
	testenv.WaitFor(t, "a sleep under sh", func() bool {
		chain = descend(cmd.Process.Pid)
		return len(chain) == 2 && strings.Contains(comm(chain[0]), "sleep")
	})
	// A holder of a deleted /dev/shm file that holds no GPU is described, its environ unread.
	shm := exec.Command("sh", "-c", `exec 3<>"$1" && rm "$1" && echo ready && exec sleep 600`, "sh", fmt.Sprintf("/dev/shm/gt-launchenv-%d", os.Getpid()))
	shm.Env = []string{"PATH=/usr/bin:/bin", "TORCHELASTIC_RUN_ID=shm-holder-run"}
	out, err := shm.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := shm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shm.Process.Kill(); _ = shm.Wait() })
	if _, err := out.Read(make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	raw, err := scenario.RunProbe(probe.Script, smiListing(t, 0, chain[0]), "", "00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"hunter2", "forged", "ancestor-run", "shm-holder-run", "SECRET_TOKEN", "PAD1", "1234567"} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("the capture holds %q", secret)
		}
	}
	s, _ := parseAndDiagnose(t, raw)
	three := 3
	if leaf := proc(s, chain[0]); leaf == nil || !reflect.DeepEqual(leaf.Launch, &parse.LaunchEnv{RunID: "run-42", LocalRank: &three}) {
		t.Errorf("leaf %d: %+v", chain[0], leaf)
	}
	if sh := proc(s, chain[1]); sh == nil || !sh.ParentOnly || sh.Launch != nil {
		t.Errorf("ancestor %d: %+v", chain[1], sh)
	}
	if p := proc(s, shm.Process.Pid); p == nil || p.ParentOnly || len(p.Shm) == 0 || p.Launch != nil {
		t.Errorf("holder of a deleted /dev/shm file %d: %+v", shm.Process.Pid, p)
	}
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return string(b)
}
