package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
)

// writeSMI serves w1's nvidia-smi: GPU 0's used MiB and its holders' rows (GPU 1 keeps the
// healthy server's 30,000 MiB when it is not listed on GPU 0). Rows of exited processes
// drop at once and their memory leaves GPU 0 after release.
func (l *watchLab) writeSMI(t *testing.T, used0 int64, release time.Duration, apps ...scenario.App) {
	t.Helper()
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB = used0
	for i := range apps {
		apps[i].GPUUUID, apps[i].Name = smi.GPUs[0].UUID, "python3"
	}
	smi.Apps = apps
	smi.Dynamic, smi.ReleaseDelay = true, release
	if err := scenario.WriteFakeSMI(l.w1.SMIDir(), *smi); err != nil {
		t.Fatal(err)
	}
}

// A host user cannot make watch --until free say the leftover's memory is back while the
// driver still holds it: the user's own process on the same GPU frees as much as the leftover
// held at the moment the leftover is killed. nvidia-smi's rows say the memory freed was the
// user's; watch waits, and ends at --timeout with exit 1.
func TestWatchReleaseNotFakedByHolderBeside(t *testing.T) {
	l := newWatchLab(t)
	left, user := l.leftover.PID, l.healthy.PID
	l.writeSMI(t, 81009, time.Hour, scenario.App{PID: left, UsedMiB: 40000}, scenario.App{PID: user, UsedMiB: 41000})
	w := startWatch(t, "-F", l.config, "--until", "free", "--interval", "500ms", "--timeout", "8s", "w1")
	w.waitFor(t, fmt.Sprintf("w1: waiting for leftover PID %d", left), 20*time.Second)
	l.kill(t, left)                                                          // its 40,000 MiB stay with the driver (an hour)
	l.writeSMI(t, 41009, time.Hour, scenario.App{PID: left, UsedMiB: 40000}, // still counted in used until then
		scenario.App{PID: user, UsedMiB: 1000}) // the user's process frees 40,000 MiB
	code := w.exit(t, 30*time.Second)
	out := w.stdout.String()
	t.Logf("watch:\n%s", out)
	if code != exitHoldsNot || strings.Contains(out, "released") {
		t.Errorf("exit %d, want %d and no release: the leftover's memory is still held", code, exitHoldsNot)
	}
}

// The leftover's memory comes back and a new job takes the GPU at once, as a scheduler
// does: watch --until free sees the release (the new job's rows are its own memory) and
// exits 0, instead of waiting for memory that was freed and used again.
func TestWatchReleaseSeenWhenNewJobTakesGPU(t *testing.T) {
	l := newWatchLab(t)
	left := l.leftover.PID
	l.writeSMI(t, 55295, time.Second, scenario.App{PID: left, UsedMiB: 55286})
	w := startWatch(t, "-F", l.config, "--until", "free", "--interval", "500ms", "--timeout", "15s", "w1")
	w.waitFor(t, fmt.Sprintf("w1: waiting for leftover PID %d", left), 20*time.Second)
	l.kill(t, left)
	next, err := scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server",
		Args: []string{"--model", "Qwen/Qwen3-32B"}, Enter: l.w1.Enter(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Stop)
	l.writeSMI(t, 60009, time.Second, scenario.App{PID: next.PID, UsedMiB: 60000})
	code := w.exit(t, 30*time.Second)
	out := w.stdout.String()
	t.Logf("watch:\n%s", out)
	if code != exitOK || !strings.Contains(out, fmt.Sprintf("w1: GPU 0: 55,286 MiB released ")) {
		t.Errorf("exit %d, want 0 and the release", code)
	}
}
