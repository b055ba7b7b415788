package diagnose

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
)

// userCgroup is a process in unit of user uid's systemd manager, read as parse reads it.
func userCgroup(uid int, unit string) parse.Cgroup {
	return parse.ParseCgroup("0::/user.slice/user-" + strconv.Itoa(uid) + ".slice/user@" + strconv.Itoa(uid) + ".service/app.slice/" + unit + "\n")
}

// deletedWeights makes p a leftover by a strong reason that says nothing about units.
func deletedWeights(p *parse.Process) {
	p.Shm = []parse.ShmUse{{Path: "/dev/shm/llama/model-00001-of-00002.safetensors", Deleted: true, Mapped: true, Bytes: i64(gib)}}
}

// blaming is every sentence, bullet and command of the findings that blame something: those
// at warning or worse, and memory-imbalance, whatever its severity.
func blaming(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		if f.Severity < Warning && f.Code != CodeMemoryImbalance {
			continue
		}
		for _, s := range append(append([]string{f.Title, f.Explanation}, f.Evidence...), f.Fix...) {
			out = append(out, scenario.Units(s)...)
		}
	}
	return out
}

var systemSSHDStop = regexp.MustCompile(`systemctl +(stop|kill|restart)( --)? +'?sshd\.service`)

// TestAttribution: the right culprit is named, with a command that acts on it and on nothing
// else, and no innocent process, unit or job appears in any sentence, bullet or command.
func TestAttribution(t *testing.T) {
	const culprit = 41017
	sysSSHD := parse.Unit{Name: "sshd.service", LoadState: "loaded", ActiveState: "active", SubState: "running", Result: "success", MainPID: ip(900)}
	cases := []struct {
		name     string
		snap     func() *parse.Snapshot
		code     string // the finding that must name the culprit
		fix      []string
		fixHas   []string
		evHas    []string
		textHas  []string
		innocent scenario.Innocents
		notCode  []string
	}{
		{
			name: "user's own sshd.service, state unknown: the PID, never the system's sshd",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "S", 1000, "bob", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = userCgroup(1000, "sshd.service")
				deletedWeights(&p)
				return withLeftover(culprit, 0, 30_000, p, sysSSHD)
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			evHas:    []string{"systemd unit: user unit sshd.service of bob (uid 1000) (state unknown"},
			innocent: scenario.Innocents{PIDs: []int{900}, Commands: []*regexp.Regexp{systemSSHDStop, regexp.MustCompile(`sshd\.service is`)}},
		},
		{
			name: "user unit tied by its own manager: stopped through that manager, as root",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "T", 1000, "bob", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = userCgroup(1000, "sshd.service")
				// Stopped (state T): a reason only its owner or root can give, unlike deleted files.
				return withLeftover(culprit, 0, 30_000, p, sysSSHD,
					parse.Unit{Name: "sshd.service", UserManagerUID: ip(1000), LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(culprit)})
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"systemctl --user --machine=bob@ stop -- sshd.service"},
			evHas:    []string{"user unit sshd.service of bob (uid 1000) (active/running)"},
			innocent: scenario.Innocents{PIDs: []int{900}, Commands: []*regexp.Regexp{systemSSHDStop}},
		},
		{
			name: "user unit its manager reports failed: a leftover, judged from the right manager",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "S", 1000, "bob", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = userCgroup(1000, "vllm.service")
				return withLeftover(culprit, 0, 30_000, p,
					parse.Unit{Name: "vllm.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(777)},
					parse.Unit{Name: "vllm.service", UserManagerUID: ip(1000), LoadState: "loaded", ActiveState: "failed", SubState: "failed", Result: "exit-code"})
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			evHas:    []string{"reason: its systemd unit user unit vllm.service of bob (uid 1000) is failed"},
			innocent: scenario.Innocents{PIDs: []int{777}, Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl stop`)}},
		},
		{
			name: "a unit its manager does not know is not inactive",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 4000, "S", 998, "svc", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = serviceCgroup("ghost-unit.service")
				return withLeftover(culprit, 0, 30_000, p,
					parse.Unit{Name: "ghost-unit.service", LoadState: "not-found", ActiveState: "inactive", SubState: "dead", MainPID: ip(0)})
			},
			code:     CodeGPUBusy,
			evHas:    []string{"ghost-unit.service (state unknown"},
			innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`inactive|kill|systemctl`)}},
			notCode:  []string{CodeLeftoverProcess},
		},
		{
			name: "a unit named -H.service is quoted and placed after --",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "T", 998, "svc", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = serviceCgroup("-H.service")
				// Stopped (state T): a reason only its owner or root can give, unlike deleted files.
				return withLeftover(culprit, 0, 30_000, p,
					parse.Unit{Name: "-H.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(culprit)})
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"systemctl stop -- '-H.service'"},
			innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`stop -H`)}},
		},
		{
			name: "a unit name with shell syntax is single-quoted",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "T", 998, "svc", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = serviceCgroup("a$(reboot);b.service")
				// Stopped (state T): a reason only its owner or root can give, unlike deleted files.
				return withLeftover(culprit, 0, 30_000, p,
					parse.Unit{Name: "a$(reboot);b.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(culprit)})
			},
			code: CodeLeftoverProcess,
			fix:  []string{"systemctl stop -- 'a$(reboot);b.service'"},
		},
		{
			name: "a process in the system's sshd.service (no pam_systemd): the PID, not sshd",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "S", 1000, "bob", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = serviceCgroup("sshd.service")
				deletedWeights(&p)
				return withLeftover(culprit, 0, 30_000, p, sysSSHD)
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{PIDs: []int{900}, Commands: []*regexp.Regexp{systemSSHDStop}},
		},
		{
			name: "a process in user@1000.service itself: the PID, not the user's manager",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "S", 1000, "bob", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = parse.Cgroup{Path: "/user.slice/user-1000.slice/user@1000.service", Unit: "user@1000.service"}
				deletedWeights(&p)
				return withLeftover(culprit, 0, 30_000, p)
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl`)}},
		},
		{
			name: "a worker left behind by KillMode=process next to the unit's new server",
			snap: func() *parse.Snapshot {
				s := busyTP8()
				// The unit restarted an hour ago (new main process 3000, its TP workers
				// below it); a worker of the previous run, orphaned, still holds GPU 0.
				for i := range s.Processes {
					if p := &s.Processes[i]; p.PID >= 3000 && p.PID < 3100 {
						st := refTime.Add(-time.Hour)
						p.StartTime = &st
					}
				}
				w := proc(culprit, 1, "S", 998, "sglang", 30*time.Hour, "sglang::scheduler_TP0")
				w.Cgroup = serviceCgroup("sglang.service")
				s.Processes = append(s.Processes, w)
				s.Apps = append(s.Apps, app(culprit, 0, 9_000, "sglang::scheduler_TP0"))
				*s.GPUs[0].MemoryUsedMiB += 9_000
				*s.GPUs[0].MemoryFreeMiB -= 9_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			evHas:    []string{"not under the unit's current main process", "KillMode=process"},
			innocent: scenario.Innocents{PIDs: []int{3000, 3010, 3011, 3012, 3013, 3014, 3015, 3016, 3017}, Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl`)}},
		},
		{
			name: "imbalance: the leftover is not enough, the healthy job on GPU 1 is named healthy",
			snap: imbalanceLeftoverAndHealthy(20_000),
			code: CodeMemoryImbalance,
			textHas: []string{"PID 41017 (python3 serve.py, 30,000 MiB) looks left over",
				"that alone does not restore balance: afterwards GPU 1 would have 77,252 MiB free, below the 87,527 MiB (0.9 × the largest free) the check needs, because healthy work holds it: PID 52021",
				"launch only on GPUs 0, 2-7 (CUDA_VISIBLE_DEVICES=0,2,3,4,5,6,7)"},
			fix:      []string{"kill 41017", "export CUDA_VISIBLE_DEVICES=0,2,3,4,5,6,7  # the GPUs with room once the leftovers are stopped"},
			evHas:    []string{"GPU 1: PID 52021 holds 20,000 MiB: python3 -m vllm.entrypoints.openai.api_server (looks healthy)"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`kill .*52021|systemctl`)}},
		},
		{
			name:     "imbalance: stopping the leftover is enough; the small healthy holder stays",
			snap:     imbalanceLeftoverAndHealthy(0),
			code:     CodeMemoryImbalance,
			textHas:  []string{"stopping it brings the GPUs back into balance", "PID 52021 (python3 -m vllm.entrypoints.openai.api_server, 2,000 MiB) is healthy work, not left over"},
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`kill .*52021|CUDA_VISIBLE_DEVICES`)}},
		},
		{
			name: "a stopped worker of a healthy service: its PID, not the service it shares",
			snap: func() *parse.Snapshot {
				s := busyTP8()
				// One more rank, stopped with SIGSTOP, below the healthy launcher.
				w := proc(culprit, 3000, "T", 998, "sglang", time.Hour, "sglang::scheduler_TP8")
				w.Cgroup = serviceCgroup("sglang.service")
				s.Processes = append(s.Processes, w)
				s.Apps = append(s.Apps, app(culprit, 0, 9_000, "sglang::scheduler_TP8"))
				*s.GPUs[0].MemoryUsedMiB += 9_000
				*s.GPUs[0].MemoryFreeMiB -= 9_000
				// The launcher holds memory too, so the parent line speaks of healthy work.
				s.Apps = append(s.Apps, app(3000, 1, 500, "python3"))
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017; kill -CONT 41017"},
			evHas:    []string{"parent: PID 3000 (/opt/sglang/bin, looks healthy)"},
			innocent: scenario.Innocents{PIDs: []int{3010, 3011, 3012, 3013, 3014, 3015, 3016, 3017}, Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl`)}},
		},
		{
			name: "a leftover beside a healthy server in one container: its PID, not the container",
			snap: func() *parse.Snapshot {
				// A dev container (cgroupfs driver): its main process serves from GPU 1; an
				// older server started in it by docker exec outlived its weights on GPU 0.
				id := "4963a592eabfbc4824e5a603a50aa4b6a118f51f91f1c02280aec8437d01a97b"
				cg := parse.ParseCgroup("4:memory:/docker/" + id + "\n0::/docker/" + id + "\n")
				p := proc(culprit, 4990, "S", 0, "root", 3*time.Hour, "python3", "-m", "sglang.launch_server")
				p.Cgroup = cg
				deletedWeights(&p)
				s := withLeftover(culprit, 0, 30_000, p)
				v := proc(52021, 4990, "S", 0, "root", time.Hour, "python3", "-m", "sglang.launch_server")
				v.Cgroup = cg
				s.Processes = append(s.Processes, v)
				s.Apps = append(s.Apps, app(52021, 1, 20_000, "python3"))
				*s.GPUs[1].MemoryUsedMiB += 20_000
				*s.GPUs[1].MemoryFreeMiB -= 20_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			evHas:    []string{"container: docker:4963a592eabf"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`docker stop`)}},
		},
		{
			// The procs section was cut (a user's flood of described processes) before a
			// healthy server: its container is unknown and may be the leftover's.
			name: "a leftover in a container beside GPU work the capture does not describe: its PID",
			snap: func() *parse.Snapshot {
				id := "4963a592eabfbc4824e5a603a50aa4b6a118f51f91f1c02280aec8437d01a97b"
				p := proc(culprit, 4990, "S", 0, "root", 3*time.Hour, "python3", "-m", "sglang.launch_server")
				p.Cgroup = parse.ParseCgroup("0::/system.slice/docker-" + id + ".scope\n")
				deletedWeights(&p)
				s := withLeftover(culprit, 0, 30_000, p)
				s.Apps = append(s.Apps, app(52021, 1, 20_000, "python3"))
				*s.GPUs[1].MemoryUsedMiB += 20_000
				*s.GPUs[1].MemoryFreeMiB -= 20_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`docker stop`)}},
		},
		{
			name: "a unit's stopped main process beside GPU work the capture does not describe: its PID",
			snap: func() *parse.Snapshot {
				p := proc(culprit, 1, "T", 998, "svc", 3*time.Hour, "python3", "serve.py")
				p.Cgroup = serviceCgroup("serve.service")
				s := withLeftover(culprit, 0, 30_000, p,
					parse.Unit{Name: "serve.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(culprit)})
				s.Apps = append(s.Apps, app(52021, 1, 20_000, "python3"))
				*s.GPUs[1].MemoryUsedMiB += 20_000
				*s.GPUs[1].MemoryFreeMiB -= 20_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017; kill -CONT 41017"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl`)}},
		},
		{
			name: "a leftover beside a healthy server in one Slurm job: its PID, not scancel",
			snap: func() *parse.Snapshot {
				// An earlier step of a running job left its server behind on GPU 0, its weights
				// deleted; the job's current step serves from GPU 1.
				cg := func(step string) parse.Cgroup {
					return parse.ParseCgroup("4:memory:/slurm/uid_0/job_4242/step_" + step + "\n0::/\n")
				}
				p := proc(culprit, 4990, "S", 0, "root", 3*time.Hour, "python3", "-m", "sglang.launch_server")
				p.Cgroup = cg("0")
				deletedWeights(&p)
				s := withLeftover(culprit, 0, 30_000, p)
				v := proc(52021, 4990, "S", 0, "root", time.Hour, "python3", "-m", "sglang.launch_server")
				v.Cgroup = cg("1")
				s.Processes = append(s.Processes, v)
				s.Apps = append(s.Apps, app(52021, 1, 20_000, "python3"))
				*s.GPUs[1].MemoryUsedMiB += 20_000
				*s.GPUs[1].MemoryFreeMiB -= 20_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`scancel`)}},
		},
		{
			name: "a leftover beside a healthy container in one pod: its PID, not the pod",
			snap: func() *parse.Snapshot {
				pod := "/kubepods.slice/kubepods-pod1b2c3d4e_0000_1111_2222_333344445555.slice/cri-containerd-"
				cg := func(id string) parse.Cgroup { return parse.ParseCgroup("0::" + pod + id + ".scope\n") }
				p := proc(culprit, 4990, "S", 0, "root", 3*time.Hour, "python3", "-m", "sglang.launch_server")
				p.Cgroup = cg("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
				deletedWeights(&p)
				s := withLeftover(culprit, 0, 30_000, p)
				v := proc(52021, 4990, "S", 0, "root", time.Hour, "python3", "-m", "sglang.launch_server")
				v.Cgroup = cg("bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb")
				s.Processes = append(s.Processes, v)
				s.Apps = append(s.Apps, app(52021, 1, 20_000, "python3"))
				*s.GPUs[1].MemoryUsedMiB += 20_000
				*s.GPUs[1].MemoryFreeMiB -= 20_000
				return s
			},
			code:     CodeLeftoverProcess,
			fix:      []string{"kill 41017"},
			innocent: scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl delete`)}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := Diagnose(c.snap(), refTime).Findings
			checkFinding(t, fs, want{code: c.code, severity: findCode(fs, c.code).severityOr(Error), fix: c.fix, fixHas: c.fixHas, evidence: c.evHas, text: c.textHas})
			if f := findCode(fs, c.code); f == nil || !containsInt(f.PIDs, culprit) {
				t.Errorf("no %s finding names PID %d:\n%s", c.code, culprit, dump(fs))
			}
			for _, code := range c.notCode {
				if findCode(fs, code) != nil {
					t.Errorf("unexpected %s:\n%s", code, dump(fs))
				}
			}
			// The culprit's own findings may name it; nothing may name an innocent.
			if bad := c.innocent.Blamed(blaming(fs)...); len(bad) > 0 {
				t.Errorf("innocents blamed:\n  %s", strings.Join(bad, "\n  "))
			}
		})
	}
}

func (f *Finding) severityOr(s Severity) Severity {
	if f == nil {
		return s
	}
	return f.Severity
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// imbalanceLeftoverAndHealthy: a leftover (PID 41017, 30,000 MiB on GPU 0) and a healthy vLLM
// server (PID 52021) with 2,000 MiB on GPU 0 and, when onGPU1 > 0, that much on GPU 1 too.
func imbalanceLeftoverAndHealthy(onGPU1 int64) func() *parse.Snapshot {
	return func() *parse.Snapshot {
		p := proc(41017, 1, "S", 1000, "bob", 3*time.Hour, "python3", "serve.py")
		p.Cgroup = sessionCgroup(4)
		deletedWeights(&p)
		s := withLeftover(41017, 0, 30_000, p)
		v := proc(52021, 1, "S", 998, "vllm", 2*time.Hour, "python3", "-m", "vllm.entrypoints.openai.api_server")
		v.Cgroup = serviceCgroup("vllm.service")
		s.Processes = append(s.Processes, v)
		s.Units = append(s.Units, parse.Unit{Name: "vllm.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(52021)})
		s.Apps = append(s.Apps, app(52021, 0, 2_000, "python3"))
		*s.GPUs[0].MemoryUsedMiB += 2_000
		*s.GPUs[0].MemoryFreeMiB -= 2_000
		if onGPU1 > 0 {
			s.Apps = append(s.Apps, app(52021, 1, onGPU1, "python3"))
			*s.GPUs[1].MemoryUsedMiB += onGPU1
			*s.GPUs[1].MemoryFreeMiB -= onGPU1
		}
		return s
	}
}

// TestImbalanceJudgement checks the typed facts the words are composed from.
func TestImbalanceJudgement(t *testing.T) {
	fs := Diagnose(imbalanceLeftoverAndHealthy(20_000)(), refTime).Findings
	f := findCode(fs, CodeMemoryImbalance)
	if f == nil || f.Imbalance == nil {
		t.Fatalf("no memory-imbalance judgement:\n%s", dump(fs))
	}
	im := f.Imbalance
	if !slices.Equal(im.Leftover, []int{41017}) || !slices.Equal(im.Healthy, []int{52021}) ||
		im.BalancedAfter || !slices.Equal(im.StillShort, []int{1}) || !slices.Equal(im.RoomAfter, []int{0, 2, 3, 4, 5, 6, 7}) ||
		im.FreeAfterMiB[0] != 95_242 || im.FreeAfterMiB[1] != 77_252 || im.NeedAfterMiB != 87_527 {
		t.Errorf("judgement = %+v", *im)
	}
	if f.Severity != Error {
		t.Errorf("severity %v, want error (a leftover is involved)", f.Severity)
	}
}

// TestGhostBlamesNoListedProcess: a healthy server that nvidia-smi lists on GPU 1 has every
// device node open, as CUDA does; GPU 0's memory with no process listed is not its doing.
func TestGhostBlamesNoListedProcess(t *testing.T) {
	s := idle()
	v := proc(52021, 1, "S", 998, "vllm", 2*time.Hour, "python3", "-m", "vllm.entrypoints.openai.api_server")
	v.Cgroup = serviceCgroup("vllm.service")
	s.Processes = append(s.Processes, v)
	s.Units = append(s.Units, parse.Unit{Name: "vllm.service", LoadState: "loaded", ActiveState: "active", SubState: "running", MainPID: ip(52021)})
	s.Apps = append(s.Apps, app(52021, 1, 30_000, "python3"))
	s.Holders = append(s.Holders, holders(52021, "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia1")...)
	*s.GPUs[1].MemoryUsedMiB, *s.GPUs[1].MemoryFreeMiB = 30_010, 97_252-30_010
	*s.GPUs[0].MemoryUsedMiB, *s.GPUs[0].MemoryFreeMiB = 30_000, 97_252-30_000
	fs := Diagnose(s, refTime).Findings
	g := findCode(fs, CodeGhostMemory)
	if g == nil || len(g.PIDs) != 0 {
		t.Fatalf("ghost-memory should name no process:\n%s", dump(fs))
	}
	in := scenario.Innocents{PIDs: []int{52021}, Commands: []*regexp.Regexp{regexp.MustCompile(`kill|systemctl`)}}
	if bad := in.Blamed(blaming(fs)...); len(bad) > 0 {
		t.Errorf("innocents blamed:\n  %s", strings.Join(bad, "\n  "))
	}
}
