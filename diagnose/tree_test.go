package diagnose

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// treeHost is a host with two GPUs whose processes are procs; each of holders holds 30 GB on
// GPU i (its place in holders).
func treeHost(holders []int, procs ...parse.Process) *parse.Snapshot {
	s := &parse.Snapshot{Host: baseHost(0), GPUs: idleRTX(2), Processes: procs, Shm: okShm()}
	for i, pid := range holders {
		s.Apps = append(s.Apps, app(pid, i, 30_000, "python3"))
		s.GPUs[i].MemoryUsedMiB = i64(30_005)
	}
	for i := range s.Processes {
		if !slices.Contains(holders, s.Processes[i].PID) {
			s.Processes[i].ParentOnly = true
		}
	}
	return s
}

// leftoverOf is the leftover-process finding that names pid, or nil.
func leftoverOf(fs []Finding, pid int) *Finding {
	for i := range fs {
		if fs[i].Code == CodeLeftoverProcess && slices.Contains(fs[i].PIDs, pid) {
			return &fs[i]
		}
	}
	return nil
}

func reasonOf(f *Finding, code ReasonCode) *Reason {
	if f == nil {
		return nil
	}
	for i := range f.Reasons {
		if f.Reasons[i].Code == code {
			return &f.Reasons[i]
		}
	}
	return nil
}

func titled(pid, ppid, uid int, age time.Duration, title string) parse.Process {
	p := proc(pid, ppid, "S", uid, "alice", age, title)
	return p
}

var serveArgv = []string{"/usr/bin/python3", "/usr/local/bin/vllm", "serve", "meta-llama/Llama-3.1-8B", "--tensor-parallel-size", "2"}

func TestOrphanedWorkers(t *testing.T) {
	bash := proc(700, 1, "S", 1000, "alice", 10*time.Hour, "bash")
	// containerBash is bash run as a container's command: PID 1 of its PID namespace, which
	// adopts every orphan there.
	containerBash := func(pid, uid int, user string, age time.Duration) parse.Process {
		p := proc(pid, 1, "S", uid, user, age, "bash")
		p.NSPIDs = []int{pid, 1}
		return p
	}
	cases := []struct {
		name   string
		snap   *parse.Snapshot
		pid    int
		orphan bool
		other  int // the re-parented worker above pid, when not pid
	}{
		{"a VLLM::Worker_TP0 under an engine core re-parented to PID 1", treeHost([]int{30},
			titled(20, 1, 1000, time.Hour, "VLLM::EngineCore"), titled(30, 20, 1000, time.Hour, "VLLM::Worker_TP0")), 30, true, 20},
		{"an sglang scheduler re-parented to a container's bash, its init", treeHost([]int{30},
			containerBash(700, 1000, "alice", 10*time.Hour), titled(30, 700, 1000, time.Hour, "sglang::scheduler_TP0")), 30, true, 0},
		{"an sglang scheduler under the user's interactive bash: a shell adopts nothing", treeHost([]int{30},
			bash, titled(30, 700, 1000, time.Hour, "sglang::scheduler_TP0")), 30, false, 0},
		{"a Ray actor re-parented to PID 1", treeHost([]int{30}, titled(30, 1, 1000, time.Hour, "ray::RayWorkerWrapper")), 30, true, 0},
		{"a spawn worker re-parented to PID 1", treeHost([]int{30}, proc(30, 1, "S", 1000, "alice", time.Hour,
			"/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=4, pipe_handle=6)", "--multiprocessing-fork")), 30, true, 0},
		{"a worker under another user's namespace init is not made orphaned", treeHost([]int{30},
			containerBash(700, 1001, "mallory", 10*time.Hour), titled(30, 700, 1000, time.Hour, "VLLM::Worker_TP0")), 30, false, 0},
		{"a namespace init that started after the worker holds a reused PID", treeHost([]int{30},
			containerBash(700, 1000, "alice", time.Minute), titled(30, 700, 1000, time.Hour, "VLLM::Worker_TP0")), 30, false, 0},
		{"a worker under a live vllm serve", treeHost([]int{30, 31},
			proc(20, 700, "S", 1000, "alice", time.Hour, serveArgv...), bash,
			titled(30, 20, 1000, time.Hour, "VLLM::Worker_TP0"), titled(31, 20, 1000, time.Hour, "VLLM::Worker_TP1")), 30, false, 0},
		{"a torchrun rank re-parented to PID 1", treeHost([]int{30}, elastic(proc(30, 1, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 30, true, 0},
		{"a torchrun rank re-parented to the user's systemd --user", treeHost([]int{30}, userSystemd,
			elastic(proc(30, 600, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 30, true, 0},
		{"a torchrun rank under the user's interactive bash: a shell adopts nothing", treeHost([]int{30},
			bash, elastic(proc(30, 700, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 30, false, 0},
		{"a torchrun rank under its live agent", treeHost([]int{30}, bash, proc(20, 700, "S", 1000, "alice", time.Hour, torchrunArgv...),
			elastic(proc(30, 20, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 30, false, 0},
		{"a torchrun rank under another user's namespace init is not made orphaned", treeHost([]int{30},
			containerBash(700, 1001, "mallory", 10*time.Hour), elastic(proc(30, 700, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 30, false, 0},
		{"a fork of a torchrun rank re-parented to PID 1", treeHost([]int{31},
			elastic(proc(30, 1, "S", 1000, "alice", time.Hour, trainArgv...), "run-1"), elastic(proc(31, 30, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), 31, true, 30},
		{"a nohup'd script that sets LOCAL_RANK alone stays weak", treeHost([]int{30}, func() parse.Process {
			p := proc(30, 1, "S", 1000, "alice", time.Hour, trainArgv...)
			p.Launch = &parse.LaunchEnv{LocalRank: ip(0)}
			return p
		}()), 30, false, 0},
		{"workers of a vllm serve that is its container's PID 1: its own, not adopted", treeHost([]int{30, 31},
			func() parse.Process {
				p := proc(20, 1, "S", 1000, "alice", time.Hour, serveArgv...)
				p.NSPIDs = []int{20, 1}
				return p
			}(),
			titled(30, 20, 1000, time.Hour, "VLLM::Worker_TP0"), titled(31, 20, 1000, time.Hour, "VLLM::Worker_TP1")), 30, false, 0},
		{"workers of a vllm serve that is the probe's own PID 1 (the probe ran in its container)", treeHost([]int{30},
			proc(1, 0, "S", 1000, "alice", time.Hour, serveArgv...), titled(30, 1, 1000, time.Hour, "VLLM::Worker_TP0")), 30, false, 0},
		{"an engine core re-parented to supervisord, its container's PID 1, when vllm serve died", treeHost([]int{30},
			func() parse.Process {
				p := proc(20, 1, "S", 1000, "alice", 10*time.Hour, "/usr/bin/python3", "/usr/bin/supervisord", "-n", "-c", "/etc/supervisor/supervisord.conf")
				p.NSPIDs = []int{20, 1}
				return p
			}(),
			titled(25, 20, 1000, time.Hour, "VLLM::EngineCore"), titled(30, 25, 1000, time.Hour, "VLLM::Worker_TP0")), 30, true, 25},
		{"a nohup'd vllm serve alone stays weak", treeHost([]int{20}, proc(20, 1, "S", 1000, "alice", 5*time.Hour, serveArgv...)), 20, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Diagnose(c.snap, refTime)
			f := leftoverOf(res.Findings, c.pid)
			r := reasonOf(f, ReasonOrphanedWorker)
			if (r != nil) != c.orphan || (f != nil) != c.orphan {
				t.Fatalf("orphaned-worker %v, leftover %v; want %v:\n%+v", r != nil, f != nil, c.orphan, res.Findings)
			}
			if r != nil && r.Other != c.other {
				t.Errorf("re-parented worker %d, want %d", r.Other, c.other)
			}
		})
	}
}

var (
	trainArgv    = []string{"/usr/bin/python3", "-u", "train.py", "--config", "llama.yaml"}
	torchrunArgv = []string{"/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py", "--config", "llama.yaml"}
	// userSystemd is alice's systemd --user, a subreaper.
	userSystemd = func() parse.Process {
		p := proc(600, 1, "S", 1000, "alice", 10*time.Hour, "/usr/lib/systemd/systemd", "--user")
		p.Comm = "systemd"
		return p
	}()
)

// elastic gives p the environment the torchrun elastic agent gives its ranks.
func elastic(p parse.Process, runID string) parse.Process {
	p.Launch = &parse.LaunchEnv{RunID: runID, RestartCount: ip(0), LocalRank: ip(0), GroupRank: ip(0)}
	return p
}

func TestWorkersNamedAsTheirLaunchers(t *testing.T) {
	s := treeHost([]int{30, 31}, proc(20, 700, "S", 1000, "alice", time.Hour, serveArgv...), proc(700, 1, "S", 1000, "alice", 10*time.Hour, "bash"),
		titled(30, 20, 1000, time.Hour, "VLLM::Worker_TP0"), titled(31, 20, 1000, time.Hour, "VLLM::Worker_TP1"))
	res := Diagnose(s, refTime)
	want := map[int]int{30: 0, 31: 1}
	for _, p := range res.Processes {
		if w, ok := want[p.PID]; ok && (p.Launcher != "vllm serve meta-llama/Llama-3.1-8B" || p.LauncherPID != 20 || p.WorkerIndex != w || p.Workers != 2) {
			t.Errorf("PID %d: launcher %q (PID %d), worker %d of %d", p.PID, p.Launcher, p.LauncherPID, p.WorkerIndex, p.Workers)
		}
	}
}

func TestOlderGeneration(t *testing.T) {
	rank := []string{"/usr/bin/python3", "-u", "train.py", "--config", "llama.yaml"}
	agent := proc(40, 700, "S", 1000, "alice", 2*time.Hour, "/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node=1", "train.py", "--config", "llama.yaml")
	bash := proc(700, 1, "S", 1000, "alice", 10*time.Hour, "bash")
	build := func(newUID int) *parse.Snapshot {
		old := proc(30, 1, "S", 1000, "alice", 3*time.Hour, rank...)
		cur := proc(41, 40, "S", newUID, "bob", time.Hour, rank...)
		a := agent
		a.UID = ip(newUID)
		s := treeHost([]int{30}, old, cur, a, bash)
		s.Apps = append(s.Apps, app(41, 0, 20_000, "python3"))
		s.Processes[1].ParentOnly = false
		return s
	}
	res := Diagnose(build(1000), refTime)
	if r := reasonOf(leftoverOf(res.Findings, 30), ReasonOlderGeneration); r == nil || r.Other != 41 {
		t.Fatalf("the old rank is not named the older generation of PID 41: %+v", res.Findings)
	}
	if f := leftoverOf(res.Findings, 41); f != nil {
		t.Errorf("the live rank is blamed: %s", f.Title)
	}
	for _, f := range res.Findings {
		for _, s := range append([]string{f.Title, f.Explanation}, f.Evidence...) {
			if strings.Contains(s, "41") && f.Code == CodeLeftoverProcess {
				t.Errorf("the live generation is named in %q", s)
			}
		}
	}
	res = Diagnose(build(1001), refTime)
	if f := leftoverOf(res.Findings, 30); f != nil {
		t.Errorf("another user's copy makes PID 30 a leftover: %s", f.Explanation)
	}
}

func TestZombieParents(t *testing.T) {
	zombie := func(ppid int) parse.Process { return proc(30, ppid, "Z", 1000, "alice", time.Hour) }
	cases := []struct {
		name   string
		parent parse.Process
		units  []parse.Unit
		role   string
		kill   bool
		says   string
	}{
		{"the same user's ordinary process", proc(20, 700, "S", 1000, "alice", 2*time.Hour, "python3", "launch.py"), nil, "", true, "its parent is the same user's process"},
		{"another user's process", proc(20, 700, "S", 1001, "bob", 2*time.Hour, "python3", "launch.py"), nil, parentOtherUser, false, "is another user's process"},
		{"a container's init", func() parse.Process {
			p := proc(20, 700, "S", 1000, "alice", 2*time.Hour, "tini", "--", "python3", "serve.py")
			p.NSPIDs = []int{20, 1}
			p.Cgroup = parse.Cgroup{ContainerID: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Runtime: "docker"}
			return p
		}(), nil, parentContainerInit, false, "only restarting container"},
		{"a unit's main process", proc(20, 1, "S", 1000, "alice", 2*time.Hour, "python3", "serve.py"),
			[]parse.Unit{{Name: "serve.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(20)}}, parentUnitMain, false, "only restarting serve.service would reap it, and that also stops its service"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := treeHost([]int{30}, c.parent, zombie(20))
			s.Units = c.units
			res := Diagnose(s, refTime)
			f := leftoverOf(res.Findings, 30)
			r := reasonOf(f, ReasonZombie)
			if r == nil || r.Detail != c.role {
				t.Fatalf("zombie reason %+v, want role %q", r, c.role)
			}
			killsParent := slices.ContainsFunc(f.Fix, func(l string) bool { return strings.HasPrefix(l, "kill 20") })
			if killsParent != c.kill {
				t.Errorf("fix kills the parent: %v, want %v:\n%s", killsParent, c.kill, strings.Join(f.Fix, "\n"))
			}
			if !strings.Contains(f.Explanation, c.says) {
				t.Errorf("explanation lacks %q:\n%s", c.says, f.Explanation)
			}
		})
	}
	t.Run("PID 1", func(t *testing.T) {
		res := Diagnose(treeHost([]int{30}, zombie(1)), refTime)
		f := leftoverOf(res.Findings, 30)
		if r := reasonOf(f, ReasonZombie); r == nil || r.Detail != parentInit || slices.ContainsFunc(f.Fix, func(l string) bool { return strings.HasPrefix(l, "kill") }) {
			t.Fatalf("zombie of PID 1: %+v\n%s", r, strings.Join(f.Fix, "\n"))
		}
	})
	t.Run("a zombie leader with live threads", func(t *testing.T) {
		z := zombie(20)
		z.Threads = ip(3)
		res := Diagnose(treeHost([]int{30}, proc(20, 1, "S", 1000, "alice", 2*time.Hour, "python3", "launch.py"), z), refTime)
		f := leftoverOf(res.Findings, 30)
		if reasonOf(f, ReasonZombieLeader) == nil || reasonOf(f, ReasonZombie) != nil || !slices.ContainsFunc(f.Fix, func(l string) bool { return strings.HasPrefix(l, "kill -9 30 ") }) ||
			slices.ContainsFunc(f.Fix, func(l string) bool { return strings.Contains(l, "kill 20") }) {
			t.Fatalf("zombie leader: %+v\n%s", f.Reasons, strings.Join(f.Fix, "\n"))
		}
	})
}

// TestTorchrunRankWords: a rank whose agent died is named as one, with what says so.
func TestTorchrunRankWords(t *testing.T) {
	res := Diagnose(treeHost([]int{30}, elastic(proc(30, 1, "S", 1000, "alice", time.Hour, trainArgv...), "run-1")), refTime)
	f := leftoverOf(res.Findings, 30)
	if r := reasonOf(f, ReasonOrphanedWorker); r == nil || r.Detail != torchrunRank {
		t.Fatalf("no orphaned torchrun rank: %+v", res.Findings)
	}
	text := f.Title + "\n" + f.Explanation + "\n" + strings.Join(f.Evidence, "\n")
	if !strings.Contains(text, "torchrun rank") || !strings.Contains(text, "TORCHELASTIC_RUN_ID") || !strings.Contains(text, "agent died") {
		t.Errorf("words:\n%s", text)
	}
}

// TestOlderAttempt: a rank of an earlier restart of a torchrun run, still under its live agent
// beside the ranks of the agent's newer attempt, is the older generation; never the newer
// rank, and never across users, runs or agents.
func TestOlderAttempt(t *testing.T) {
	bash := proc(700, 1, "S", 1000, "alice", 10*time.Hour, "bash")
	attempt := func(p parse.Process, runID string, restart int) parse.Process {
		p = elastic(p, runID)
		p.Launch.RestartCount = ip(restart)
		return p
	}
	agent := proc(20, 700, "S", 1000, "alice", 3*time.Hour, torchrunArgv...)
	otherAgent := proc(21, 700, "S", 1000, "alice", 3*time.Hour, torchrunArgv...)
	cases := []struct {
		name  string
		newer parse.Process
		older bool
	}{
		{"a newer attempt under the same agent", attempt(proc(31, 20, "S", 1000, "alice", time.Hour, trainArgv...), "run-1", 1), true},
		{"the same attempt", attempt(proc(31, 20, "S", 1000, "alice", time.Hour, trainArgv...), "run-1", 0), false},
		{"another run", attempt(proc(31, 20, "S", 1000, "alice", time.Hour, trainArgv...), "run-2", 1), false},
		{"another agent", attempt(proc(31, 21, "S", 1000, "alice", time.Hour, trainArgv...), "run-1", 1), false},
		{"another user's process", attempt(proc(31, 20, "S", 1001, "mallory", time.Hour, trainArgv...), "run-1", 1), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			old := attempt(proc(30, 20, "D", 1000, "alice", 2*time.Hour, trainArgv...), "run-1", 0)
			res := Diagnose(treeHost([]int{30, 31}, bash, agent, otherAgent, old, c.newer), refTime)
			r := reasonOf(leftoverOf(res.Findings, 30), ReasonOlderGeneration)
			if (r != nil) != c.older || r != nil && (r.Detail != restartAttempt || r.Other != 31) {
				t.Fatalf("older-generation %+v, want %v: %+v", r, c.older, res.Findings)
			}
			if f := leftoverOf(res.Findings, 31); f != nil {
				t.Errorf("the newer rank is blamed: %s", f.Title)
			}
			blamed := res.BlamedPIDs()
			for _, pid := range []int{20, 31} {
				if _, ok := blamed[pid]; ok {
					t.Errorf("PID %d, the live agent or the newer rank, is blamed", pid)
				}
			}
			if f := leftoverOf(res.Findings, 30); f != nil && (strings.Contains(f.Title+f.Explanation, "PID 31") || strings.Contains(f.Title+f.Explanation, "PID 20")) {
				t.Errorf("the finding names the newer rank or the live agent: %s\n%s", f.Title, f.Explanation)
			}
		})
	}
}
