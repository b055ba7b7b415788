//go:build linux

package scenario_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/nodecheck"
	"github.com/gputriage/gputriage/report"
)

// Attacks by a host's unprivileged users on the verdict: each stages what such a user can do
// (their own processes, files in /dev/shm) next to healthy work, and checks that no output
// names the healthy work as the problem.

// shmBox is a mount namespace whose /dev/shm is a tmpfs of its own, as a container's is, so
// that a test may fill it without touching this machine's. PIDs are this machine's.
type shmBox struct {
	enter []string // the command prefix that runs a command inside
}

func newShmBox(t *testing.T, size string) shmBox {
	t.Helper()
	for _, prog := range []string{"unshare", "nsenter", "setpriv"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s not installed", prog)
		}
	}
	// unshare and sh exec, so the process started is the sleep that holds the namespace.
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs -o size="+size+",mode=1777 tmpfs /dev/shm && echo ready && exec sleep 100000")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the /dev/shm box did not start: %q", line)
	}
	return shmBox{enter: []string{"nsenter", "-t", strconv.Itoa(cmd.Process.Pid), "-m", "--"}}
}

// run runs argv inside the box, as uid when uid > 0.
func (b shmBox) run(t *testing.T, uid int, argv ...string) {
	t.Helper()
	if out, err := b.command(uid, argv...).CombinedOutput(); err != nil {
		t.Fatalf("%q in the box: %v: %s", argv, err, out)
	}
}

func (b shmBox) command(uid int, argv ...string) *exec.Cmd {
	full := append([]string{}, b.enter...)
	if uid > 0 {
		id := strconv.Itoa(uid)
		full = append(full, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "--")
	}
	full = append(full, argv...)
	return exec.Command(full[0], full[1:]...)
}

// start runs a python3 program inside the box as uid; it prints "ready PID" once in place.
// The process is killed when the test ends.
func (b shmBox) start(t *testing.T, uid int, program string) int {
	t.Helper()
	return testenv.StartReady(t, b.command(uid, "/usr/bin/python3", "-c", program)) // not a root-only pyenv shim
}

// ncclSegment is a program that maps a NCCL shared-memory segment and unlinks it, as every
// healthy NCCL job does.
var ncclSegment = deletedShmProgram("/dev/shm/nccl-gt", 1<<20)

// deletedShmProgram is a program that writes a file of size bytes at prefix+PID, maps it and
// unlinks it, says it is ready, and sleeps.
func deletedShmProgram(prefix string, size int) string {
	return fmt.Sprintf(`import mmap, os, time
p = %q + str(os.getpid())
fd = os.open(p, os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, %d)
m = mmap.mmap(fd, %d)
m[:] = b"x" * %d
os.unlink(p)
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, prefix, size, size, size)
}

// TestAttackFillShm: any user may write /dev/shm until it is full. shm-full then reports it,
// and must not blame the healthy processes that keep deleted files there (a running service's
// weights another user deleted, a NCCL job's segments) in any sentence, command, drain reason
// or the PIDs a report colors.
func TestAttackFillShm(t *testing.T) {
	s := newStage(t)
	box := newShmBox(t, "64m")
	s.enter = box.enter
	s.gpuSet([]int64{81559, 81559})

	// A running service's weights, in a directory another user may write, deleted by them.
	box.run(t, 0, "install", "-d", "-m", "0777", "-o", "65534", "-g", "65534", "/dev/shm/shared")
	svc := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service"),
		ShmDir: "/dev/shm/shared", ShmFiles: 2, ShmBytes: 1 << 20, Args: []string{"--model", "/dev/shm/shared"}, Enter: box.enter}, false)
	t.Cleanup(func() { syscall.Kill(svc.PID, syscall.SIGKILL) })
	s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: svc.PID})
	box.run(t, 65534, "rm", "-rf", "--", "/dev/shm/shared")
	// A running service serving weights it keeps in /dev/shm.
	live := s.server(scenario.Server{Module: "sglang.launch_server", Cgroup: s.cgroup("system.slice/sglang.service"),
		ShmDir: "/dev/shm/Qwen3-8B", ShmFiles: 2, ShmBytes: 4 << 20, Args: []string{"--model-path", "/dev/shm/Qwen3-8B"}, Enter: box.enter}, false)
	t.Cleanup(func() { syscall.Kill(live.PID, syscall.SIGKILL) })
	s.units = append(s.units, scenario.Unit{Name: "sglang.service", ActiveState: "active", SubState: "running", MainPID: live.PID})
	// A user's training job with its NCCL segment.
	job := box.start(t, 1000, ncclSegment)
	// Another user fills /dev/shm.
	_ = box.command(65534, "dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1M", "count=64").Run()

	s.hold(svc.PID, 0, 30_000)
	s.hold(job, 1, 20_000)
	s.hold(live.PID, 1, 20_000)
	r := s.run()
	healthy := []int{svc.PID, job, live.PID}
	checkStaged(t, r, expect{code: diagnose.CodeShmFull,
		// What fills /dev/shm is still shown, the healthy work's share named as healthy.
		text: []string{"/dev/shm/Qwen3-8B: directory", fmt.Sprintf("PID %d (GPU work that looks healthy)", live.PID),
			"deleted files kept by work that looks healthy (a runtime's segments, a running service's files): "},
		innocent: scenario.Innocents{PIDs: healthy,
			Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprintf(`kill .*\b(%d|%d|%d)\b`, svc.PID, job, live.PID))}}})
	// Of this stage's processes, the share is the service's and the job's: another test's or
	// job's process that keeps a deleted /dev/shm file elsewhere is counted too (see stagedPID).
	if f := r.finding(diagnose.CodeShmFull); f != nil {
		var kept []int
		if m := regexp.MustCompile(`kept by work that looks healthy .*, by PIDs? ([0-9, ]+)`).FindStringSubmatch(strings.Join(f.Evidence, "\n")); m != nil {
			for _, n := range strings.Split(m[1], ", ") {
				if pid, err := strconv.Atoi(strings.TrimSpace(n)); err == nil && stagedPID(pid) {
					kept = append(kept, pid)
				}
			}
		}
		if want := []int{min(svc.PID, job), max(svc.PID, job)}; !slices.Equal(kept, want) {
			t.Errorf("shm-full's healthy share is kept by this stage's PIDs %v, want %v:\n%s", kept, want, strings.Join(f.Evidence, "\n"))
		}
	}
	for pid := range r.res.BlamedPIDs() {
		if slices.Contains(healthy, pid) {
			t.Errorf("PID %d, healthy, is blamed (colored in the process table)", pid)
		}
	}
	reason := nodecheck.DrainReason(nodecheck.Check(r.res, nodecheck.Scope{}))
	for _, pid := range healthy {
		if scenario.HasToken(reason, strconv.Itoa(pid)) {
			t.Errorf("node-check's drain reason names healthy PID %d: %q", pid, reason)
		}
	}
}

// mapReadOnly is a program that maps every file of a directory read-only, as a reader that
// may read them (they are 0644) can.
func mapReadOnly(dir string) string {
	return fmt.Sprintf(`import glob, mmap, os, time
ms = []
for p in sorted(glob.glob(%q + "/*")):
    f = open(p, "rb")
    ms.append((f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)))
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, dir)
}

// TestAttackShareDeletedFiles: a user's process that keeps a running service's deleted
// /dev/shm files (mapped read-only before they were deleted), or deleted files of its own
// under the very same names, must not make the service a co-culprit: the one keeps the same
// files (the service is named, as healthy), the other keeps other files (the service is not
// named at all).
func TestAttackShareDeletedFiles(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559})
	dir := fmt.Sprintf("/dev/shm/%s-shared", s.id)
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := errors.Join(os.Chmod(dir, 0o777), os.Chown(dir, 65534, 65534)); err != nil {
		t.Fatal(err)
	}
	svc := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service"),
		ShmDir: dir, ShmFiles: 2, ShmBytes: 1 << 20, Args: []string{"--model", dir}}, false)
	s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: svc.PID})
	here := shmBox{}
	sharer := here.start(t, 65534, mapReadOnly(dir))
	// The directory's owner deletes the weights, then makes files of the same names, maps
	// them and deletes them too.
	here.run(t, 65534, "rm", "-rf", "--", dir)
	mimic := s.server(scenario.Server{Module: "sglang.launch_server", UID: 65534, Python: "/usr/bin/python3",
		ShmDir: dir, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true}, false)
	s.hold(svc.PID, 0, 30_000)
	r := s.run()

	checkStaged(t, r, expect{code: diagnose.CodeShmDeletedMapped, culprit: mimic.PID,
		innocent: scenario.Innocents{PIDs: []int{svc.PID}, Names: []string{"vllm.service"},
			Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprintf(`kill .*\b%d\b`, svc.PID))}}})
	for _, f := range r.jsonFindings {
		if f.Code != diagnose.CodeShmDeletedMapped {
			continue
		}
		lines := append([]string{f.Title, f.Explanation}, f.Evidence...)
		switch {
		case slices.Contains(f.PIDs, mimic.PID):
			// Unless the probe could not read the files' identities (a flood of mappings on this
			// machine can cut the maps section), and says so.
			for _, l := range lines {
				hedged := strings.Contains(l, "could not tell whether the same file") && strings.Contains(l, "healthy")
				if (scenario.HasToken(l, strconv.Itoa(svc.PID)) || scenario.HasToken(l, strconv.Itoa(sharer))) && !hedged {
					t.Errorf("PID %d's files are others' than the service's and the sharer's, yet: %q", mimic.PID, l)
				}
			}
		case slices.Contains(f.PIDs, sharer):
			named := slices.ContainsFunc(lines, func(l string) bool {
				return scenario.HasToken(l, strconv.Itoa(svc.PID)) && strings.Contains(l, "healthy")
			})
			if !named {
				t.Errorf("PID %d keeps the service's files, but the service is not named as healthy:\n%s", sharer, strings.Join(lines, "\n"))
			}
		}
	}
}

// startInCgroup runs a python3 program as uid (root when 0) in the cgroup directory cg, as a
// unit's process; it prints "ready PID" once in place and is killed when the test ends.
func startInCgroup(t *testing.T, cg string, uid int, program string) int {
	t.Helper()
	return shmBox{enter: []string{"sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, cg}}.start(t, uid, program)
}

// libcMmap maps with libc's mmap, which (unlike Python's mmap module) keeps no descriptor of
// its own: a mapping alone then holds the file.
const libcMmap = `import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
def mapfd(fd, size):
    a = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
    return a is not None and a != ctypes.c_void_p(-1).value
`

// mapAndClose is a program that writes a sparse weights file of size bytes under dir, maps it
// and closes its descriptor, as safetensors loads weights: the mapping alone holds the file.
// With remove, it then removes the file, as an operator who deletes the weights would.
func mapAndClose(dir string, size int64, remove bool) string {
	rm := ""
	if remove {
		// The file only: its own directory stays, so that only its owner or root could have
		// emptied it, which is what makes the deletion evidence.
		rm = fmt.Sprintf("os.unlink(os.path.join(%q, \"model-00001-of-00001.safetensors\"))\n", dir)
	}
	return libcMmap + fmt.Sprintf(`os.makedirs(%q, exist_ok=True)
fd = os.open(os.path.join(%q, "model-00001-of-00001.safetensors"), os.O_CREAT | os.O_RDWR, 0o644)
os.ftruncate(fd, %d)
assert mapfd(fd, %d)
os.close(fd)
%sprint("ready", os.getpid(), flush=True)
time.sleep(100000)`, dir, dir, size, size, rm)
}

// mapFlood maps one small /dev/shm file n times, each its own line in /proc/PID/maps.
func mapFlood(path string, n int) string {
	return libcMmap + fmt.Sprintf(`fd = os.open(%q, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 4096)
for i in range(%d):
    if not mapfd(fd, 4096):
        break
os.close(fd)
print("ready", os.getpid(), flush=True)
time.sleep(100000)`, path, n)
}

// TestAttackMapsFloodHidesHolders: a user who maps one file tens of thousands of times cuts
// the probe's maps section at its bound, so the mappings read after theirs are missing. A
// running service's weights, held by a mapping alone, then look held by nobody: no report may
// suggest removing them. Nor may the flood hide a leftover known by the deleted weights it
// maps.
func TestAttackMapsFloodHidesHolders(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	flood := fmt.Sprintf("/dev/shm/%s-flood", s.id)
	t.Cleanup(func() { os.Remove(flood) })
	// Started first, its PID reads before the service's in /proc's order (the same number of
	// digits, smaller).
	shmBox{}.start(t, 65534, mapFlood(flood, 60_000))
	dir := fmt.Sprintf("/dev/shm/%s-model", s.id)
	t.Cleanup(func() { os.RemoveAll(dir) })
	svc := startInCgroup(t, s.cgroup("system.slice/vllm.service"), 0, mapAndClose(dir, 2<<30, false))
	s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: svc})
	// A leftover known only by the deleted weights it maps: the flood must not hide it.
	old := fmt.Sprintf("/dev/shm/%s-old", s.id)
	t.Cleanup(func() { os.RemoveAll(old) })
	left := shmBox{}.start(t, 0, mapAndClose(old, 1<<20, true))
	s.hold(svc, 0, 30_000)
	s.hold(left, 1, 40_000)
	r := s.run()
	if f := r.findingNaming(diagnose.CodeLeftoverProcess, []int{left}); f == nil || !slices.Contains(f.PIDs, left) {
		t.Errorf("the flood hides the leftover %d:\n%s", left, r.text)
	}
	rm := regexp.MustCompile(`rm -rf -- '?` + regexp.QuoteMeta(dir))
	if !strings.Contains(r.verbose, "section maps was cut") {
		t.Fatalf("the flood did not cut the maps section:\n%s", r.verbose)
	}
	checkStaged(t, r, expect{innocent: scenario.Innocents{PIDs: []int{svc}, Names: []string{"vllm.service"},
		Commands: []*regexp.Regexp{rm, anySystemctl}}})
	for _, out := range []string{r.text, r.verbose, r.md, r.json} {
		if m := rm.FindString(out); m != "" {
			t.Errorf("a report suggests removing the service's live weights: %q", m)
		}
	}
}

// TestAttackDrainReasonNamesNoHealthyWork: when memory no process is listed for (ghost
// memory) unbalances the GPUs, the memory-imbalance error names the healthy service on a short
// GPU as healthy; node-check's drain reason, which sinfo -R shows to everyone, must not name
// it as the culprit either.
func TestAttackDrainReasonNamesNoHealthyWork(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
	s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
	s.extra[0] = 30_000
	s.hold(h.PID, 1, 30_000)
	r := s.run()
	if r.finding(diagnose.CodeMemoryImbalance) == nil {
		t.Fatalf("no memory-imbalance:\n%s", r.text)
	}
	problems := nodecheck.Check(r.res, nodecheck.Scope{})
	for _, p := range problems {
		if p.PID == h.PID {
			t.Errorf("node-check's %s problem has the healthy service, PID %d, for its culprit", p.Code, h.PID)
		}
	}
	if reason := nodecheck.DrainReason(problems); scenario.HasToken(reason, strconv.Itoa(h.PID)) {
		t.Errorf("node-check's drain reason names the healthy service, PID %d: %q", h.PID, reason)
	}
}

// TestAttackMetricsNameNoHealthyJob: the same, for the Prometheus export: a memory-imbalance
// error's slurm_job label names the jobs it blames, never the healthy job on a short GPU that
// an alert routed by job would then page.
func TestAttackMetricsNameNoHealthyJob(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server",
		Cgroup: s.cgroup("system.slice/slurmstepd.scope/job_4242/step_0")}, false)
	s.extra[0] = 30_000
	s.hold(h.PID, 1, 30_000)
	r := s.run()
	f := r.finding(diagnose.CodeMemoryImbalance)
	if f == nil || f.Severity != "error" {
		t.Fatalf("no memory-imbalance error:\n%s", r.text)
	}
	var b strings.Builder
	if err := report.Prometheus(&b, []report.Host{{Name: "staged", Snapshot: r.snap, Result: r.res}}, report.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "gputriage_finding{") && strings.Contains(l, `code="memory-imbalance"`) && strings.Contains(l, "4242") {
			t.Errorf("the imbalance's metric names the healthy job 4242: %s", l)
		}
	}
}

// TestAttackRestartedServiceAgesNoUsersServer: a user's long-running server, started with
// nohup (orphaned), is not "much older" than a system service that just restarted: any user
// of the service's API may crash it (systemd then restarts it), and that says nothing of the
// other user's server.
func TestAttackRestartedServiceAgesNoUsersServer(t *testing.T) {
	s := newStage(t)
	s.gpuSet([]int64{81559, 81559})
	v := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Orphan: true, UID: 65534, Python: "/usr/bin/python3"}, false)
	t.Cleanup(func() { syscall.Kill(v.PID, syscall.SIGKILL) })
	s.aged[v.PID] = 50 * time.Hour
	svc := s.server(scenario.Server{Module: "sglang.launch_server", Cgroup: s.cgroup("system.slice/sglang.service")}, false)
	s.units = append(s.units, scenario.Unit{Name: "sglang.service", ActiveState: "active", SubState: "running", MainPID: svc.PID})
	s.aged[svc.PID] = 5 * time.Minute
	s.hold(v.PID, 0, 40_000)
	s.hold(svc.PID, 1, 40_000)
	r := s.run()
	checkStaged(t, r, expect{code: diagnose.CodeGPUBusy, notCodes: []string{diagnose.CodeLeftoverProcess},
		innocent: scenario.Innocents{PIDs: []int{v.PID, svc.PID}, Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprintf(`kill .*\b%d\b`, v.PID))}}})
}

// TestAttackShmFullOtherDevice: a /dev/shm that is full is filled by the files on it, never by
// a process's deleted file on another /dev/shm (a container's own): the stage's /dev/shm is a
// box of 64 MiB that another user fills, while a process outside the box keeps a deleted
// 8 MiB file on the machine's /dev/shm. shm-full names no PID for it, and counts none of its
// bytes.
func TestAttackShmFullOtherDevice(t *testing.T) {
	s := newStage(t)
	box := newShmBox(t, "64m")
	s.enter = box.enter
	s.gpuSet([]int64{81559})
	elsewhere := shmBox{}.start(t, 65534, deletedShmProgram("/dev/shm/gt-otherdev-", 8<<20))
	_ = box.command(65534, "dd", "if=/dev/zero", "of=/dev/shm/fill", "bs=1M", "count=64").Run()
	r := s.run()
	var full *diagnose.Finding
	for i := range r.res.Findings {
		if r.res.Findings[i].Code == diagnose.CodeShmFull {
			full = &r.res.Findings[i]
		}
	}
	if full == nil || full.ShmUse == nil {
		t.Fatalf("no shm-full finding:\n%s", r.findingsForDebug)
	}
	u := full.ShmUse
	if slices.Contains(full.PIDs, elsewhere) || slices.Contains(u.Blamed, elsewhere) || slices.Contains(u.Healthy, elsewhere) {
		t.Errorf("shm-full counts PID %d, whose deleted file is on another /dev/shm: PIDs %v, blamed %v, healthy %v", elsewhere, full.PIDs, u.Blamed, u.Healthy)
	}
	if u.BlamedBytes+u.HealthyBytes >= 8<<20 {
		t.Errorf("shm-full counts %d + %d bytes of deleted files, the other /dev/shm's 8 MiB among them", u.BlamedBytes, u.HealthyBytes)
	}
}
