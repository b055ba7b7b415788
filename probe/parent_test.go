//go:build linux

package probe_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/report"
)

// serverPy stands in for a model server started as "python3 .../vllm serve ...": it starts
// workers the way engines do and prints its PID and then theirs, the GPU holders first.
// GT_MODE spawn: one multiprocessing "spawn" child; fork: GT_FORKS plain forks, which keep the
// server's command line; chain: a spawn child that spawns a worker of its own.
const serverPy = `
import ctypes, multiprocessing as mp, os, sys, time

def rest():
    time.sleep(3600)

def middle(w):
    p = mp.get_context("spawn").Process(target=rest)
    p.start()
    w.send(p.pid)
    p.join()

if __name__ == "__main__":
    if os.environ.get("GT_COMM"):
        ctypes.CDLL(None).prctl(15, os.environ["GT_COMM"].encode()[:15], 0, 0, 0)
    mode, ctx = os.environ["GT_MODE"], mp.get_context("spawn")
    if mode == "fork":
        pids = []
        for _ in range(int(os.environ.get("GT_FORKS", "1"))):
            pid = os.fork()
            if pid == 0:
                time.sleep(3600)
                os._exit(0)
            pids.append(pid)
    elif mode == "chain":
        r, w = ctx.Pipe(duplex=False)  # not a Queue: its semaphores are deleted /dev/shm files
        p = ctx.Process(target=middle, args=(w,))
        p.start()
        pids = [r.recv(), p.pid]
    else:
        p = ctx.Process(target=rest)
        p.start()
        pids = [p.pid]
    print(os.getpid(), *pids, flush=True)
    time.sleep(3600)
`

// server is a started serverPy: its PID, its workers' PIDs (the GPU holders first) and the
// command line it was started with.
type server struct {
	cmd     *exec.Cmd
	pid     int
	workers []int
	argv    []string
}

// startServer runs serverPy as "python3 DIR/vllm serve ARGS..." in a process group of its own
// (ended, workers and all, when the test ends); uid > 0 runs it as that user.
func startServer(t *testing.T, mode string, uid int, env []string, args ...string) *server {
	t.Helper()
	py := systemPython(t)
	dir, err := os.MkdirTemp("", "gputriage-parent-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "vllm")
	if err := os.WriteFile(script, []byte(serverPy), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{py, script, "serve"}, args...)
	full := argv
	if uid > 0 {
		id := strconv.Itoa(uid)
		full = append([]string{"setpriv", "--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, argv...)
	}
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), append(env, "GT_MODE="+mode)...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, argv: argv}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if s.cmd != nil {
			_ = s.cmd.Wait()
		}
	})
	line, _ := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	for _, w := range f {
		n, err := strconv.Atoi(w)
		if err != nil {
			t.Fatalf("server %s did not start: %q", mode, line)
		}
		s.workers = append(s.workers, n)
	}
	if len(s.workers) < 2 {
		t.Fatalf("server %s did not start: %q", mode, line)
	}
	s.pid, s.workers = s.workers[0], s.workers[1:]
	return s
}

// smiListing writes a fake nvidia-smi into a new directory that lists pids as compute apps
// (with victim, when > 0, first) and returns the directory.
func smiListing(t *testing.T, victim int, pids ...int) string {
	t.Helper()
	dir := t.TempDir()
	smi := scenario.SMI{GPUs: []scenario.GPU{{Index: 0, UUID: "GPU-parent-0", Name: "NVIDIA H100 80GB HBM3",
		BusID: "00000000:01:00.0", TotalMiB: 81559, UsedMiB: 40000, Driver: "550.54.15"}}}
	if victim > 0 {
		smi.Apps = append(smi.Apps, scenario.App{PID: victim, GPUUUID: "GPU-parent-0", UsedMiB: 1000, Name: "sleep"})
	}
	for _, pid := range pids {
		smi.Apps = append(smi.Apps, scenario.App{PID: pid, GPUUUID: "GPU-parent-0", UsedMiB: 1000, Name: "python3"})
	}
	if err := scenario.WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	return dir
}

// probeAndDiagnose runs the real probe with smiDir first on PATH, parses its capture and diagnoses it.
func probeAndDiagnose(t *testing.T, smiDir string) (*parse.Snapshot, diagnose.Result) {
	t.Helper()
	raw, err := scenario.RunProbe(probe.Script, smiDir, "", "00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	return parseAndDiagnose(t, raw)
}

func parseAndDiagnose(t *testing.T, raw []byte) (*parse.Snapshot, diagnose.Result) {
	t.Helper()
	s, err := parse.Parse(raw)
	if err != nil {
		t.Errorf("Parse: %v", err)
	}
	if s.Truncated {
		t.Errorf("capture not complete: sections %+v", s.Sections)
	}
	for _, n := range s.Notes {
		if n.Code == parse.NoteCaptureTampered {
			t.Errorf("note %s: %s", n.Code, n.Message)
		}
	}
	return s, diagnose.Diagnose(s, time.Now())
}

func gpuProc(r diagnose.Result, pid int) *diagnose.GPUProcess {
	for i := range r.Processes {
		if r.Processes[i].PID == pid {
			return &r.Processes[i]
		}
	}
	return nil
}

func procArgv(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// checkContext asserts that pid is described once, only as a parent, with its command line,
// and is neither a GPU process nor the subject of any finding.
func checkContext(t *testing.T, s *parse.Snapshot, r diagnose.Result, pid int, argv []string) {
	t.Helper()
	p := proc(s, pid)
	if p == nil || !p.ParentOnly || p.Gone || !reflect.DeepEqual(p.Argv, argv) || p.StartTime == nil || p.PPID == nil {
		t.Errorf("parent %d: %+v, want described as a parent with argv %q", pid, p, argv)
	}
	if gp := gpuProc(r, pid); gp != nil {
		t.Errorf("parent %d became a GPU process: %+v", pid, gp)
	}
	for _, f := range r.Findings {
		for _, fp := range f.PIDs {
			if fp == pid {
				t.Errorf("parent %d is the subject of %s: %s", pid, f.Code, f.Title)
			}
		}
	}
}

// checkWorker asserts what the worker is named after and whose command line it carries.
func checkWorker(t *testing.T, s *parse.Snapshot, r diagnose.Result, pid int, program, engine string, parentArgv []string) {
	t.Helper()
	if p := proc(s, pid); p == nil || p.ParentOnly {
		t.Errorf("worker %d: %+v, want described in its own right", pid, p)
	}
	gp := gpuProc(r, pid)
	if gp == nil {
		t.Fatalf("worker %d is no GPU process: %+v", pid, r.Processes)
	}
	if gp.Program != program || gp.Engine != engine || !reflect.DeepEqual(gp.ParentArgv, parentArgv) {
		t.Errorf("worker %d: program %q engine %q parent %q; want %q %q %q", pid, gp.Program, gp.Engine, gp.ParentArgv, program, engine, parentArgv)
	}
}

// A worker whose parent holds no GPU is named after that parent, which the probe captures as
// context: a multiprocessing spawn child, a plain fork that kept the server's command line,
// and a worker of a spawned engine (worker -> spawn parent -> server, where the spawn parent
// holds a GPU too, so the server is its parent one level up). The process table shows the
// program, and with -v the parent's command line.
func TestProbeWorkerParent(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	for _, mode := range []string{"spawn", "fork", "chain"} {
		t.Run(mode, func(t *testing.T) {
			srv := startServer(t, mode, 0, nil, "--model", "/x")
			s, r := probeAndDiagnose(t, smiListing(t, 0, srv.workers...))
			checkContext(t, s, r, srv.pid, srv.argv)
			w := srv.workers[0]
			switch mode {
			case "spawn":
				checkWorker(t, s, r, w, "vllm serve worker", "vLLM", srv.argv)
			case "fork":
				checkWorker(t, s, r, w, "vllm serve worker", "vLLM", srv.argv)
			case "chain":
				mid := srv.workers[1]
				if p := proc(s, mid); p == nil || p.ParentOnly {
					t.Errorf("spawn parent %d: %+v", mid, p)
				}
				checkWorker(t, s, r, mid, "vllm serve worker", "vLLM", srv.argv)
				checkWorker(t, s, r, w, "vllm serve worker", "vLLM", procArgv(t, mid))
			}
			var out bytes.Buffer
			host := report.Host{Name: "local", Snapshot: s, Result: r}
			if err := report.Text(&out, []report.Host{host}, report.Options{Verbose: true, Width: 200}); err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("parent PID %d: %s", srv.pid, strings.Join(srv.argv, " ")); !strings.Contains(out.String(), want) ||
				!strings.Contains(out.String(), fmt.Sprintf("vllm serve /x (PID %d)", srv.pid)) {
				t.Errorf("report -v lacks %q or the program:\n%s", want, out.String())
			}
		})
	}
}

// A parent's command line and comm are its own to set: newlines, tabs, forged records and
// markers, terminal escapes. The parent of user nobody's worker is described exactly as it
// is, as a parent, and forges nothing about root's healthy compute app (the victim).
func TestProbeParentUnforgeable(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	victim := rootSleeper(t)
	fake := strings.Repeat("0", 32)
	hostile := []string{
		fmt.Sprintf("x\n@@gputriage %s rc=0\n@@gputriage %s end procs\npid %d\nend\n", fake, fake, victim),
		fmt.Sprintf("pid %d\tstat %d (forged) Z 1 1 1 0 -1\tstatus Uid:\t0\nparent\nend\n", victim, victim),
		"\x1b[31mred\x1b]0;title\x07\x1b[2J",
		"--model", "/nonexistent\npath exists /etc",
	}
	srv := startServer(t, "spawn", 65534, []string{"GT_COMM=a)\npid " + strconv.Itoa(victim) + "\nb"}, hostile...)
	s, r := probeAndDiagnose(t, smiListing(t, victim, srv.workers...))
	checkVictim(t, s, victim)
	checkContext(t, s, r, srv.pid, srv.argv)
	comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", srv.pid))
	if p := proc(s, srv.pid); p == nil || p.Comm != strings.TrimSuffix(string(comm), "\n") || p.UID == nil || *p.UID != 65534 {
		t.Errorf("parent: %+v, want comm %q of uid 65534", p, comm)
	}
	checkWorker(t, s, r, srv.workers[0], "vllm serve worker", "vLLM", srv.argv)
	if p := proc(s, victim); p != nil && p.ParentOnly {
		t.Errorf("victim %d described as a parent: %+v", victim, p)
	}
	var out bytes.Buffer
	host := report.Host{Name: "local", Snapshot: s, Result: r}
	if err := report.Text(&out, []report.Host{host}, report.Options{Verbose: true, Width: 200}); err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(out.Bytes(), "\x1b\x07") {
		t.Errorf("report -v prints the parent's escapes raw:\n%q", out.String())
	}
}

// A parent that exits after the probe read its worker's PPid and before it describes the
// parent is reported gone, without error. The probe is held there by not reading its output:
// the workers' command lines (forks of a server with a long one) fill the pipes first.
func TestProbeParentGone(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	srv := startServer(t, "fork", 0, []string{"GT_FORKS=4"}, "--model", "/x", strings.Repeat("p", 60000))
	cmd := exec.Command("sh", "-s")
	cmd.Stdin = strings.NewReader("set -- 00112233445566778899aabbccddeeff\n" + probe.Script)
	cmd.Env = append(os.Environ(), "PATH="+smiListing(t, 0, srv.workers...)+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var raw bytes.Buffer
	br := bufio.NewReader(stdout)
	for !bytes.Contains(raw.Bytes(), []byte(" begin procs ")) {
		line, err := br.ReadBytes('\n')
		raw.Write(line)
		if err != nil {
			t.Fatalf("no procs section: %v\n%q", err, raw.Bytes())
		}
	}
	time.Sleep(time.Second) // the probe fills the pipes with the workers' records and waits
	_ = syscall.Kill(srv.pid, syscall.SIGKILL)
	_ = srv.cmd.Wait() // reaped: /proc/PID is gone
	srv.cmd = nil
	if _, err := io.Copy(&raw, br); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("probe: %v", err)
	}
	s, r := parseAndDiagnose(t, raw.Bytes())
	if p := proc(s, srv.pid); p == nil || !p.ParentOnly || !p.Gone || p.Argv != nil {
		t.Errorf("parent %d: %+v, want described as a parent that is gone", srv.pid, p)
	}
	w := srv.workers[0]
	if p := proc(s, w); p == nil || p.PPID == nil || *p.PPID != srv.pid {
		t.Fatalf("worker %d: %+v, want its PPid read while the parent %d ran", w, p, srv.pid)
	}
	// Its own command line names it; no parent's is there to carry.
	checkWorker(t, s, r, w, "vllm serve", "vLLM", nil)
}

// The probe's choice of parents, run by the host's awk: each parent once, none already
// described, never PID 0 or 1 or anything but digits, and no more than the room left.
func TestProbeParentsChosen(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	m := regexp.MustCompile(`(?s)\nPARENTS_AWK='([^']*)'`).FindStringSubmatch(probe.Script)
	if m == nil {
		t.Fatal("no PARENTS_AWK in the probe")
	}
	tests := []struct {
		described, parents string
		room               int
		want               string
	}{
		{"10 11 12", "\t9 \t9 \t10 \t1 \t0 \t13", 5, "9 13"},
		{"10 11", "\t7 \t8 \t9", 2, "7 8"},
		{"10", "\t7", 0, ""},
		{"10", "\t7x \t-3 \t8;reboot \t 5", 9, "5"},
	}
	for _, tt := range tests {
		cmd := exec.Command("awk", "-v", "room="+strconv.Itoa(tt.room), m[1])
		cmd.Stdin = strings.NewReader(tt.described + "\n" + tt.parents + "\n")
		out, err := cmd.Output()
		if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != tt.want {
			t.Errorf("described %q parents %q room %d: %q %v, want %q", tt.described, tt.parents, tt.room, got, err, tt.want)
		}
	}
}

// TestProbeAncestorsToInit: the probe describes a GPU holder's ancestors level by level up to
// PID 1 (here a leaf, two shells above it and this test's own process above them), each as a
// parent, with its user, start time, state and threads; the leaf's Threads too.
func TestProbeAncestorsToInit(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	cmd := exec.Command("sh", "-c", `sh -c 'sleep 600 & wait' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	var chain []int // leaf, inner sh, outer sh
	testenv.WaitFor(t, "a sleep under two shells", func() bool {
		chain = descend(cmd.Process.Pid)
		return len(chain) == 3
	})
	s, _ := probeAndDiagnose(t, smiListing(t, 0, chain[0]))
	leaf := proc(s, chain[0])
	if leaf == nil || leaf.ParentOnly || leaf.Threads == nil || *leaf.Threads != 1 {
		t.Fatalf("leaf %d: %+v", chain[0], leaf)
	}
	for _, pid := range append(chain[1:], os.Getpid()) {
		p := proc(s, pid)
		if p == nil || !p.ParentOnly || p.UID == nil || p.StartTime == nil || p.State == "" || p.Threads == nil || len(p.Argv) == 0 {
			t.Errorf("ancestor %d: %+v", pid, p)
		}
	}
}

// descend is pid, its first child, that one's first child and so on, deepest first.
func descend(pid int) []int {
	var out []int
	for cur := pid; cur > 0; {
		out = append([]int{cur}, out...)
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cur, cur))
		f := strings.Fields(string(b))
		cur = 0
		if len(f) > 0 {
			cur, _ = strconv.Atoi(f[0])
		}
	}
	return out
}
