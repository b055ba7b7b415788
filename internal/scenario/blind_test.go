//go:build linux

package scenario_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
)

// Attacks by a host's unprivileged users on the probe itself: each stages what such a user can
// do to hide a real leftover behind their own processes, and checks that the leftover is still
// named, its GPU, PID and deleted weights, with nothing of the capture read as tampered.

// noTamper fails when the capture holds a capture-tampered note: the probe printed something
// twice (the GPU-first pass and the full pass must not double).
func noTamper(t *testing.T, s *parse.Snapshot) {
	t.Helper()
	for _, n := range s.Notes {
		if n.Code == parse.NoteCaptureTampered {
			t.Errorf("the capture reads as tampered: %s", n.Message)
		}
	}
}

// TestBlindHugeArgv: a tenant's GPU job whose command line is 256 MiB of one line (prctl
// PR_SET_MM_MAP, no privilege needed) made the probe read it byte by byte in the shell; the
// procs scan then hit its time limit before the leftover holding 55 GB, after it in /proc's
// order, was described, and the host read as healthy. Every command line is now cut at 64 KiB
// before anything reads it, and each GPU holder is described within its own budget. The
// tenant's job is named in no finding.
func TestBlindHugeArgv(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	tenant := shmBox{}.start(t, 65534, scenario.HugeArgv(256<<20))
	left := s.server(scenario.Server{Module: "sglang.launch_server", Orphan: true}, true)
	s.hold(tenant, 1, 1_000)
	s.hold(left.PID, 0, 55_286)
	r := s.run()
	noTamper(t, r.snap)
	f := r.findingNaming(diagnose.CodeLeftoverProcess, []int{left.PID})
	if f == nil || !slices.Contains(f.PIDs, left.PID) || f.Severity == "info" {
		t.Fatalf("the leftover %d holding 55 GB is not named behind the huge command line:\n%s", left.PID, r.verbose)
	}
	if !slices.Contains(f.GPUs, 0) {
		t.Errorf("the leftover's finding names GPUs %v, want GPU 0", f.GPUs)
	}
	for _, f := range r.jsonFindings {
		if blames(f.Severity, f.Code) && slices.Contains(f.PIDs, tenant) {
			t.Errorf("%s %s blames the tenant's job %d: %s", f.Severity, f.Code, tenant, f.Title)
		}
	}
	if strings.Contains(r.verbose, "section procs was stopped by its time limit") {
		t.Errorf("the procs section still hits its time limit:\n%s", r.verbose)
	}
}

// TestBlindFDFlood: a user who opens ~1,300 /dev/shm files by paths of 3.5 KiB fills the fds
// section's 4 MiB bound; the fds read after theirs, in /proc's order, were cut, and with them a
// leftover's deleted-but-open weights, its only mark. The GPU holders' fds are now read first.
func TestBlindFDFlood(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	flood := fmt.Sprintf("/dev/shm/%s-flood", s.id)
	t.Cleanup(func() { os.RemoveAll(flood) })
	shmBox{}.start(t, 65534, scenario.FDFlood(flood, 1300))
	dir := fmt.Sprintf("/dev/shm/%s-weights", s.id)
	t.Cleanup(func() { os.RemoveAll(dir) })
	left := shmBox{}.start(t, 0, scenario.HoldDeleted(dir, 1<<20))
	s.hold(left, 1, 55_286)
	r := s.run()
	noTamper(t, r.snap)
	if !strings.Contains(r.verbose, "section fds was cut") {
		t.Fatalf("the flood did not cut the fds section:\n%s", r.verbose)
	}
	f := r.findingNaming(diagnose.CodeLeftoverProcess, []int{left})
	if f == nil || !slices.Contains(f.PIDs, left) || !slices.Contains(f.GPUs, 1) {
		t.Fatalf("the flood hides the leftover %d keeping deleted weights on GPU 1:\n%s", left, r.verbose)
	}
	if !strings.Contains(strings.Join(f.Evidence, "\n"), dir) {
		t.Errorf("the leftover's evidence does not name its deleted weights %s:\n%s", dir, r.verbose)
	}
}

// TestBlindHolderFDCapKeepsFilesHeld: a GPU holder's fds are read first up to 1024 of them; one
// holding more (here 1,100 of a small file, then its model) has the rest unread, and a file
// only those hold would look held by nobody. The section then says it was capped (or cut, when
// other processes' fds filled it), and no report suggests removing the live model.
func TestBlindHolderFDCapKeepsFilesHeld(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	small := fmt.Sprintf("/dev/shm/%s-small", s.id)
	dir := fmt.Sprintf("/dev/shm/%s-model", s.id)
	t.Cleanup(func() { os.Remove(small); os.RemoveAll(dir) })
	holder := shmBox{}.start(t, 0, fmt.Sprintf(`import os, time
fds = [os.open(%q, os.O_CREAT | os.O_RDWR, 0o644) for _ in range(1100)]
os.makedirs(%q, exist_ok=True)
big = os.open(os.path.join(%q, "model-00001-of-00001.safetensors"), os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(big, 2 << 30)
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, small, dir, dir))
	s.hold(holder, 0, 30_000)
	r := s.run()
	noTamper(t, r.snap)
	// The cap travels as the section's exit status, after its body: when other processes of
	// this shared machine fill the section's 4 MiB first (any user can), the section is cut and
	// says so instead, which is as true of what is missing.
	if !strings.Contains(r.verbose, "more than 1024 descriptors") && !strings.Contains(r.verbose, "section fds was cut at its limit") {
		t.Errorf("the cap on the holder's fds is not said:\n%s", r.verbose)
	}
	for _, out := range []string{r.text, r.verbose, r.md, r.json} {
		if strings.Contains(out, "rm -rf -- "+dir) || strings.Contains(out, "rm -rf -- '"+dir) {
			t.Fatalf("a report suggests removing the holder's live model %s:\n%s", dir, out)
		}
	}
}
