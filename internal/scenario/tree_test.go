package scenario_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// The process tree (issue 16 §1): workers whose launcher died, an older generation beside a
// newer one, zombie leaders and zombies, each staged with real processes whose command lines
// read like the real programs'.

// orphanWorkers starts a launcher with n workers titled title ("VLLM::Worker_TP%d"),
// SIGKILLs the launcher as a crash or a forced stop would, and waits until the kernel has
// re-parented every worker. The workers are killed when the test ends.
func (s *stage) orphanWorkers(srv scenario.Server, n int) []int {
	s.t.Helper()
	srv.Children = n
	l := s.server(srv, false)
	prefix, _, _ := strings.Cut(srv.WorkerTitle, "%d")
	ws := scenario.WaitChildren(l.PID, n, prefix)
	if len(ws) != n {
		s.t.Fatalf("workers of %d: %v", l.PID, ws)
	}
	s.t.Cleanup(func() {
		for _, w := range ws {
			_ = syscall.Kill(w, syscall.SIGKILL)
		}
	})
	if err := syscall.Kill(l.PID, syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	for _, w := range ws {
		testenv.WaitFor(s.t, fmt.Sprintf("worker %d re-parented", w), func() bool { return ppid(w) != l.PID })
	}
	return ws
}

// restartedTrainer stages a torchrun restart on GPU 0: the first start's rank, left behind
// (orphaned) three hours ago, and a torchrun agent started two hours ago, as uid (root when
// 0), whose rank runs exactly the first rank's command line; both with the interpreter python,
// a path (python3 on PATH may be a shim, such as pyenv's, that execs under another argv[0]). The
// ages are such that the old rank is not "much older".
func (s *stage) restartedTrainer(uid int, python string) (old, agent, rank int) {
	s.t.Helper()
	o := s.server(scenario.Server{Module: "train", Args: trainArgs, Orphan: true, Python: python}, false)
	a := s.server(scenario.Server{Module: "torch.distributed.run", Args: append([]string{"--nproc-per-node=1", "-m", "train"}, trainArgs...),
		RankModule: "train", RankArgs: trainArgs, UID: uid, Python: python}, false)
	ranks := scenario.WaitChildren(a.PID, 1, python+"\x00-m\x00train\x00")
	if len(ranks) != 1 {
		s.t.Fatalf("ranks of %d: %v", a.PID, ranks)
	}
	s.aged[o.PID], s.aged[a.PID], s.aged[ranks[0]] = 3*time.Hour, 2*time.Hour, 2*time.Hour-time.Minute
	s.hold(o.PID, 0, 30_000)
	s.hold(ranks[0], 0, 40_000)
	return o.PID, a.PID, ranks[0]
}

// ppid is pid's parent as the kernel says it, or -1.
func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// procState is pid's state letter, or "".
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// killOf is a fix command that would signal pid.
func killOf(pid int) *regexp.Regexp {
	return regexp.MustCompile(fmt.Sprintf(`kill\b[^|;&]*\b%d\b`, pid))
}

var trainArgs = []string{"--config", "configs/llama-8b.yaml", "--max-steps", "20000"}

func TestStagedTree(t *testing.T) {
	cases := []struct {
		name string
		// build stages the host; what it adds to said must appear in the Markdown report
		// (the text report's table clips its "who" column).
		build func(s *stage, said *[]string) expect
	}{
		{"the TP workers of a SIGKILLed vllm serve", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559, 81559})
			ws := s.orphanWorkers(scenario.Server{Module: "vllm.entrypoints.cli.main",
				Args: []string{"serve", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"}, WorkerTitle: "VLLM::Worker_TP%d"}, 2)
			s.hold(ws[0], 0, 60_000)
			s.hold(ws[1], 1, 60_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: ws[0], fix: []string{fmt.Sprint("kill ", ws[0])},
				text:     []string{"vLLM worker", "its launcher died: it was re-parented to"},
				innocent: scenario.Innocents{PIDs: []int{os.Getpid()}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"a Ray actor whose raylet is gone", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559})
			ws := s.orphanWorkers(scenario.Server{Module: "ray.scripts.scripts", Args: []string{"start", "--head", "--block"},
				WorkerTitle: "ray::RayWorkerWrapper"}, 1)
			s.hold(ws[0], 0, 70_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: ws[0], fix: []string{fmt.Sprint("kill ", ws[0])},
				text:     []string{"Ray worker"},
				innocent: scenario.Innocents{PIDs: []int{os.Getpid()}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"a live vllm serve's workers are healthy", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559, 81559})
			l := s.server(scenario.Server{Module: "vllm.entrypoints.cli.main", Orphan: true, Children: 2, WorkerTitle: "VLLM::Worker_TP%d",
				Args: []string{"serve", "meta-llama/Llama-3.1-8B-Instruct", "--tensor-parallel-size", "2"}}, false)
			ws := scenario.WaitChildren(l.PID, 2, "VLLM::Worker_TP")
			if len(ws) != 2 {
				s.t.Fatalf("workers of %d: %v", l.PID, ws)
			}
			s.hold(ws[0], 0, 60_000)
			s.hold(ws[1], 1, 60_000)
			*said = []string{fmt.Sprintf("vllm serve meta-llama/Llama-3.1-8B-Instruct (PID %d), worker 0 of 2", l.PID),
				fmt.Sprintf("vllm serve meta-llama/Llama-3.1-8B-Instruct (PID %d), worker 1 of 2", l.PID)}
			return expect{noWorse: true, notCodes: []string{diagnose.CodeLeftoverProcess},
				innocent: scenario.Innocents{PIDs: append(ws, l.PID), Commands: []*regexp.Regexp{anySystemctl, killOf(ws[0]), killOf(ws[1])}}}
		}},
		{"a torchrun restart left the old rank beside the new one", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559})
			old, agent, rank := s.restartedTrainer(0, "/usr/bin/python3")
			return expect{code: diagnose.CodeLeftoverProcess, culprit: old, fix: []string{fmt.Sprint("kill ", old)},
				text:     []string{"it is the older generation"},
				innocent: scenario.Innocents{PIDs: []int{agent, rank}, Commands: []*regexp.Regexp{anySystemctl, killOf(rank), killOf(agent)}}}
		}},
		{"another user's copy of a trainer does not make it an older generation", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559})
			// The first start is the user's own nohup'd trainer; nobody (65534) runs the copy.
			v, _, _ := s.restartedTrainer(65534, "/usr/bin/python3")
			return expect{notCodes: []string{diagnose.CodeLeftoverProcess},
				innocent: scenario.Innocents{PIDs: []int{v}, Commands: []*regexp.Regexp{killOf(v)}}}
		}},
		{"a zombie leader whose threads run on is stopped by PID", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559})
			z := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", ZombieLeader: true}, false)
			testenv.WaitFor(s.t, "the zombie leader", func() bool { return procState(z.PID) == "Z" })
			s.hold(z.PID, 0, 50_000)
			// Its parent is this test: no command may end it (the evidence names it as the parent).
			return expect{code: diagnose.CodeLeftoverProcess, culprit: z.PID, fix: []string{fmt.Sprintf("kill -9 %d  # its main thread has exited: only SIGKILL reaches the threads that run on", z.PID)},
				text:     []string{"its main thread has exited"},
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{killOf(os.Getpid())}}}
		}},
		{"a zombie whose parent is a unit's main process: no kill of the parent", func(s *stage, said *[]string) expect {
			s.gpuSet([]int64{81559})
			m := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Zombie: true, Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: m.PID})
			s.hold(m.Zombie, 0, 5_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: m.Zombie,
				text:     []string{"only restarting vllm.service would reap it, and that also stops its service"},
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{killOf(m.PID), anySystemctl}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStage(t)
			var said []string
			want := c.build(s, &said)
			r := s.run()
			checkStaged(t, r, want)
			for _, x := range said {
				if !strings.Contains(r.md, x) {
					t.Errorf("the Markdown report does not say %q:\n%s", x, r.md)
				}
			}
		})
	}
}
