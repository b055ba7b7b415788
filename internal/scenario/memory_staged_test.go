//go:build linux

package scenario_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// Staged hosts of GPU memory's own evidence (issue 16 §2, and §1's memory charged to a PID
// that no longer exists): a box (a mount namespace of its own) whose /dev is a tmpfs holding
// /dev/nvidia0../dev/nvidia3, /dev/nvidiactl and /dev/nvidia-uvm as plain files, so real
// processes hold them open as a CUDA process holds the real ones; the probe runs in the box.

// gpuBox is a mount namespace with a private /dev (and /dev/shm); PIDs are this machine's.
type gpuBox struct {
	enter []string
	bin   string // a directory every user may read: program names linked to python3
}

func newGPUBox(t *testing.T, gpus int) gpuBox {
	t.Helper()
	testenv.SkipShort(t, "staged GPU boxes")
	for _, prog := range []string{"unshare", "nsenter", "setpriv", "setsid"} {
		if _, err := exec.LookPath(prog); err != nil {
			t.Skipf("%s not installed", prog)
		}
	}
	devs := "nvidiactl nvidia-uvm nvidia-modeset"
	for i := range gpus {
		devs += fmt.Sprintf(" nvidia%d", i)
	}
	script := `set -e
mount -t tmpfs -o mode=755 tmpfs /dev
mknod -m 666 /dev/null c 1 3; mknod -m 666 /dev/zero c 1 5; mknod -m 666 /dev/urandom c 1 9; mknod -m 666 /dev/random c 1 8
ln -s /proc/self/fd /dev/fd; ln -s /proc/self/fd/0 /dev/stdin; ln -s /proc/self/fd/1 /dev/stdout; ln -s /proc/self/fd/2 /dev/stderr
mkdir /dev/shm; mount -t tmpfs -o size=8g,mode=1777 tmpfs /dev/shm
for d in ` + devs + `; do : >/dev/$d; chmod 666 /dev/$d; done
echo ready
exec sleep 100000`
	cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the GPU box did not start: %q", line)
	}
	bin, err := os.MkdirTemp("", "gt-box-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return gpuBox{enter: []string{"nsenter", "-t", strconv.Itoa(cmd.Process.Pid), "-m", "--"}, bin: bin}
}

// holderProgram opens the device files in GT_DEVS, forks GT_CHILDREN children that keep
// them (as DataLoader workers inherit a trainer's), prints "ready PID CHILD..." and sleeps.
const holderProgram = `import os, time
fds = [os.open(p, os.O_RDWR) for p in os.environ.get("GT_DEVS", "").split(",") if p]
kids = []
for i in range(int(os.environ.get("GT_CHILDREN", "0"))):
    pid = os.fork()
    if pid == 0:
        while True:
            time.sleep(1000)
    kids.append(pid)
print("ready", os.getpid(), *kids, flush=True)
while True:
    time.sleep(1000)
`

// boxProc is how to start one process in the box.
type boxProc struct {
	comm   string   // the name of the executable (the kernel's comm); python3 when empty
	argv   []string // exactly as /proc/PID/cmdline will read
	devs   []string // device files it holds open, e.g. "nvidia0"
	uid    int      // run as this uid when positive
	cgroup string   // cgroup directory it joins first, when set
	kids   int      // children it forks, which keep its device files
	orphan bool     // detached (setsid -f): re-parented away from the test
	pgroup bool     // its own process group, as a shell starts a job
}

// start starts p in the box and returns its PID and its children's. The program reaches
// python3 on stdin, or as the script named by argv[1] for a command line with arguments:
// argv is then the process's own. It is killed (with its children) when the test ends,
// unless the test reaps it first.
func (b gpuBox) start(t *testing.T, p boxProc) (*exec.Cmd, []int) {
	t.Helper()
	comm := p.comm
	if comm == "" {
		comm = "python3"
	}
	exe := filepath.Join(b.bin, comm)
	if _, err := os.Lstat(exe); err != nil {
		if err := os.Symlink("/usr/bin/python3", exe); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := os.MkdirTemp("", "gt-box-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	_ = os.Chmod(dir, 0o755)
	if len(p.argv) > 1 {
		// python3 runs argv[1] as its script: a file of that name in its working directory.
		if err := os.WriteFile(filepath.Join(dir, p.argv[1]), []byte(holderProgram), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var devs []string
	for _, d := range p.devs {
		devs = append(devs, "/dev/"+d)
	}
	argv := append([]string{}, b.enter...)
	if p.cgroup != "" {
		argv = append(argv, "sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, p.cgroup)
	}
	if p.orphan {
		argv = append(argv, "setsid", "-f")
	}
	if p.uid > 0 {
		id := strconv.Itoa(p.uid)
		argv = append(argv, "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "--")
	}
	argv = append(argv, "/usr/bin/python3", "-c", "import os, sys; os.chdir(sys.argv[1]); os.execv(sys.argv[2], sys.argv[3:])", dir, exe)
	argv = append(argv, p.argv...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GT_DEVS="+strings.Join(devs, ","), "GT_CHILDREN="+strconv.Itoa(p.kids))
	cmd.Stdin = strings.NewReader(holderProgram)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: p.pgroup}
	// A file, not a buffer: the children and an orphan keep it open, and Wait would wait for
	// a buffer's copy to end.
	stderr, err := os.CreateTemp(dir, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() { l, _ := bufio.NewReader(out).ReadString('\n'); lines <- l }()
	var line string
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
	}
	f := strings.Fields(line)
	var pids []int
	for _, s := range f[min(1, len(f)):] {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s did not start: %q", comm, line)
		}
		pids = append(pids, n)
	}
	if len(f) == 0 || f[0] != "ready" || len(pids) != 1+p.kids {
		cmd.Process.Kill()
		cmd.Wait()
		msg, _ := os.ReadFile(stderr.Name())
		t.Fatalf("%s did not start: %q: %s", comm, line, msg)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, pids
}

// cpuDevs are the device files a CUDA process opens on a host of n GPUs.
func cudaDevs(n int) []string {
	out := []string{"nvidiactl", "nvidia-uvm"}
	for i := range n {
		out = append(out, fmt.Sprintf("nvidia%d", i))
	}
	return out
}

// memRendered adds to a staged host's reports what Prometheus and node-check say of it.
type memRendered struct {
	rendered
	prom  string
	drain string
}

func (s *stage) runAll() memRendered {
	s.t.Helper()
	r := s.run()
	var b bytes.Buffer
	if err := report.Prometheus(&b, []report.Host{{Name: "staged", Snapshot: r.snap, Result: r.res}}, report.Options{}); err != nil {
		s.t.Fatal(err)
	}
	return memRendered{rendered: r, prom: b.String(), drain: nodecheck.DrainReason(nodecheck.Check(r.res, nodecheck.Scope{}))}
}

// promGPULabels are the gpu labels of every gputriage_finding series of code.
func promGPULabels(prom, code string) []string {
	var out []string
	re := regexp.MustCompile(`gpu="([^"]*)"`)
	for _, l := range strings.Split(prom, "\n") {
		if strings.HasPrefix(l, "gputriage_finding{") && strings.Contains(l, `code="`+code+`"`) {
			if m := re.FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// A leftover holds memory on GPU 2 and, as every CUDA process does, the device files of GPUs
// 0 to 3; a healthy job holds memory on GPU 0 and the same device files. The leftover is
// reported on GPU 2 alone, in every format.
func TestStagedMemoryTiesGPU(t *testing.T) {
	s := newStage(t)
	box := newGPUBox(t, 4)
	s.enter = box.enter
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	_, healthy := box.start(t, boxProc{argv: []string{"python3", "train.py", "--config", "llama.yaml"}, devs: cudaDevs(4), uid: 1000,
		cgroup: s.cgroup("system.slice/trainer.service")})
	s.units = append(s.units, scenario.Unit{Name: "trainer.service", ActiveState: "active", SubState: "running", MainPID: healthy[0]})
	_, left := box.start(t, boxProc{argv: []string{"python3", "serve.py", "--port", "8000"}, devs: cudaDevs(4), uid: 1000,
		cgroup: s.cgroup("system.slice/old-serve.service")})
	s.units = append(s.units, scenario.Unit{Name: "old-serve.service", ActiveState: "failed", SubState: "failed", Result: "exit-code"})
	s.hold(healthy[0], 0, 30_000)
	s.hold(left[0], 2, 50_000)
	r := s.runAll()
	checkStaged(t, r.rendered, expect{code: diagnose.CodeLeftoverProcess, culprit: left[0], gpus: []int{2},
		notSaid:  []*regexp.Regexp{regexp.MustCompile(`holds[^\n]*GPUs 0-3`), regexp.MustCompile(`abandoned[^\n]*GPU 0`)},
		innocent: scenario.Innocents{PIDs: []int{healthy[0]}}})
	if got := promGPULabels(r.prom, diagnose.CodeLeftoverProcess); !slices.Equal(got, []string{"2"}) {
		t.Errorf("Prometheus gpu labels of leftover-process: %q, want [\"2\"]\n%s", got, r.prom)
	}
	if !strings.Contains(r.drain, "GPU 2") || regexp.MustCompile(`GPUs? 0`).MatchString(r.drain) {
		t.Errorf("drain reason %q: want GPU 2 alone", r.drain)
	}
}

// A workstation: Xorg (root, started by gdm) and gnome-shell (the user's session) hold
// /dev/nvidia0 and 517 MiB of graphics memory, which --query-compute-apps never lists. Nothing
// is wrong; no sentence, command, label or drain reason names the desktop.
func TestStagedWorkstationGraphics(t *testing.T) {
	s := newStage(t)
	box := newGPUBox(t, 1)
	s.enter = box.enter
	s.gpuSet([]int64{16376})
	s.gpus[0].Name = "NVIDIA GeForce RTX 4080 SUPER"
	_, xorg := box.start(t, boxProc{comm: "Xorg", argv: []string{"/usr/lib/xorg/Xorg", "vt2", "-displayfd", "3", "-auth", "/run/user/1000/gdm/Xauthority",
		"-nolisten", "tcp", "-background", "none", "-noreset", "-keeptty", "-novtswitch", "-verbose", "3"},
		devs: []string{"nvidiactl", "nvidia0", "nvidia-modeset"}, cgroup: s.cgroup("user.slice/session-2.scope")})
	_, shell := box.start(t, boxProc{comm: "gnome-shell", argv: []string{"/usr/bin/gnome-shell"}, devs: []string{"nvidiactl", "nvidia0"}, uid: 1000,
		cgroup: s.cgroup("user.slice/session-2.scope")})
	s.units = append(s.units, scenario.Unit{Name: "session-2.scope", ActiveState: "active", SubState: "running"})
	s.apps = append(s.apps, scenario.App{PID: xorg[0], GPUUUID: s.gpus[0].UUID, UsedMiB: 300, Name: "/usr/lib/xorg/Xorg", Type: "G"},
		scenario.App{PID: shell[0], GPUUUID: s.gpus[0].UUID, UsedMiB: 217, Name: "/usr/bin/gnome-shell", Type: "G"})
	r := s.runAll()
	desktop := []*regexp.Regexp{regexp.MustCompile(`kill\b[^\n]*\b(` + strconv.Itoa(xorg[0]) + `|` + strconv.Itoa(shell[0]) + `)\b`),
		regexp.MustCompile(`(systemctl|loginctl)[^\n]*session-2\.scope`), regexp.MustCompile(`gpu-reset`)}
	checkStaged(t, r.rendered, expect{noWorse: true, notCodes: []string{diagnose.CodeGhostMemory, diagnose.CodeLeftoverProcess},
		notSaid: desktop, innocent: scenario.Innocents{PIDs: []int{xorg[0], shell[0]}, Names: []string{"Xorg", "gnome-shell"}, Commands: desktop}})
	if r.drain != "" {
		t.Errorf("node-check would drain: %q", r.drain)
	}
	if got := promGPULabels(r.prom, diagnose.CodeGhostMemory); len(got) > 0 {
		t.Errorf("Prometheus: ghost-memory on %q", got)
	}
}

// CUDA MPS: the control daemon and the server hold memory for their clients. A live client
// (type M+C) on GPU 0 makes the server no culprit, old and orphaned as it is; a leftover client (orphaned, stopped with
// Ctrl-Z long ago) with memory on GPU 1 and the device files of all four is named, on GPU 1.
func TestStagedMPS(t *testing.T) {
	s := newStage(t)
	box := newGPUBox(t, 4)
	s.enter = box.enter
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	_, ctl := box.start(t, boxProc{comm: "nvidia-cuda-mps-control", argv: []string{"nvidia-cuda-mps-control", "-d"}, devs: []string{"nvidiactl"}, orphan: true})
	_, srv := box.start(t, boxProc{comm: "nvidia-cuda-mps-server", argv: []string{"nvidia-cuda-mps-server"}, devs: cudaDevs(4), orphan: true})
	_, live := box.start(t, boxProc{argv: []string{"python3", "infer.py", "--batch", "8"}, devs: cudaDevs(4),
		cgroup: s.cgroup("system.slice/infer.service")})
	// The daemons have run for ten days, orphaned, the service for an hour: without MPS's own
	// facts the server would read as an old orphan much older than the host's other work.
	s.aged[ctl[0]], s.aged[srv[0]], s.aged[live[0]] = 240*time.Hour, 240*time.Hour, time.Hour
	s.units = append(s.units, scenario.Unit{Name: "infer.service", ActiveState: "active", SubState: "running", MainPID: live[0]})
	_, stale := box.start(t, boxProc{argv: []string{"python3", "infer.py", "--batch", "8"}, devs: cudaDevs(4), uid: 1000, orphan: true})
	if err := syscall.Kill(stale[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	s.apps = append(s.apps, scenario.App{PID: srv[0], GPUUUID: s.gpus[0].UUID, UsedMiB: 30, Name: "nvidia-cuda-mps-server"},
		scenario.App{PID: live[0], GPUUUID: s.gpus[0].UUID, UsedMiB: 4000, Name: "python3", Type: "M+C"},
		scenario.App{PID: stale[0], GPUUUID: s.gpus[1].UUID, UsedMiB: 6000, Name: "python3", Type: "M+C"})
	r := s.runAll()
	innocent := []int{ctl[0], srv[0], live[0]}
	checkStaged(t, r.rendered, expect{code: diagnose.CodeLeftoverProcess, culprit: stale[0], gpus: []int{1},
		fix: []string{fmt.Sprintf("kill %d; kill -CONT %d", stale[0], stale[0])}, innocent: scenario.Innocents{PIDs: innocent, Names: []string{"nvidia-cuda-mps"},
			Commands: []*regexp.Regexp{regexp.MustCompile(`infer\.service`)}}})
	if got := promGPULabels(r.prom, diagnose.CodeLeftoverProcess); !slices.Equal(got, []string{"1"}) {
		t.Errorf("Prometheus gpu labels of leftover-process: %q, want [\"1\"]", got)
	}
	for _, pid := range innocent {
		if strings.Contains(r.drain, strconv.Itoa(pid)) {
			t.Errorf("drain reason %q names PID %d", r.drain, pid)
		}
	}
}

// A trainer (its own process group, as a shell starts it) OOM-killed: nvidia-smi still lists
// its PID with 30,000 MiB on GPU 1, and its two DataLoader workers, orphaned, keep the device
// files open. The workers are what to stop; the trainer is said to be gone, never to have
// exited while the probe ran; another user's healthy job that holds every device file is not
// named.
func TestStagedDeadTrainerChildrenHoldDevice(t *testing.T) {
	s := newStage(t)
	box := newGPUBox(t, 4)
	s.enter = box.enter
	s.gpuSet([]int64{81559, 81559, 81559, 81559})
	_, other := box.start(t, boxProc{argv: []string{"python3", "finetune.py", "--lr", "1e-5"}, devs: cudaDevs(4), uid: 1001, pgroup: true})
	trainer, pids := box.start(t, boxProc{argv: []string{"python3", "train.py", "--batch-size", "64", "--num-workers", "2"}, devs: cudaDevs(4), uid: 1000, kids: 2, pgroup: true})
	dead, workers := pids[0], pids[1:]
	if err := trainer.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	trainer.Wait()
	if !scenario.Exited(dead, 0) {
		t.Fatalf("the trainer %d did not exit", dead)
	}
	s.hold(other[0], 0, 20_000)
	s.hold(dead, 1, 30_000)
	r := s.runAll()
	exited := regexp.MustCompile(strconv.Itoa(dead) + ` exited while the probe ran`)
	checkStaged(t, r.rendered, expect{code: diagnose.CodeDeadPIDMemory, culprit: workers[0], gpus: []int{1},
		fix:     []string{fmt.Sprint("kill ", workers[0])},
		text:    []string{fmt.Sprintf("PID %d no longer exists", dead), fmt.Sprint(workers[1])},
		notSaid: []*regexp.Regexp{exited}, innocent: scenario.Innocents{PIDs: []int{other[0]}}})
	if f := r.finding(diagnose.CodeDeadPIDMemory); f != nil && !slices.Equal(f.PIDs, workers) {
		t.Errorf("dead-pid-memory names %v, want the workers %v", f.PIDs, workers)
	}
	if got := promGPULabels(r.prom, diagnose.CodeDeadPIDMemory); !slices.Equal(got, []string{"1"}) {
		t.Errorf("Prometheus gpu labels of dead-pid-memory: %q, want [\"1\"]", got)
	}
	if strings.Contains(r.drain, strconv.Itoa(other[0])) || !strings.Contains(r.drain, CodeOrPID(r.drain, workers[0])) {
		t.Errorf("drain reason %q", r.drain)
	}
}

// CodeOrPID is what a drain reason must hold to name the culprit: its PID, or the code.
func CodeOrPID(drain string, pid int) string {
	if strings.Contains(drain, strconv.Itoa(pid)) {
		return strconv.Itoa(pid)
	}
	return diagnose.CodeDeadPIDMemory
}
