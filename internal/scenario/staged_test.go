package scenario_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/report"
)

// stage is one staged host: real processes in real cgroups, mapping real /dev/shm files, with
// a fake nvidia-smi and systemctl answering for them.
type stage struct {
	t      *testing.T
	root   string // this stage's cgroup tree
	id     string
	gpus   []scenario.GPU
	apps   []scenario.App
	extra  map[int]int64 // GPU index -> MiB used that no process is listed for
	units  []scenario.Unit
	shmDir int
	// aged makes processes older than a test can wait for: PID -> its age when probed. Only
	// the start time in the parsed capture is moved back; all else is the real process.
	aged map[int]time.Duration
	// enter, when set, is a command prefix the probe runs behind (e.g. nsenter into a mount
	// namespace with a /dev/shm of its own).
	enter []string
	// appendK8s, when set, appends the client's Kubernetes block to the capture (k8sBlock).
	appendK8s func(raw []byte) []byte
}

func newStage(t *testing.T) *stage {
	t.Helper()
	testenv.SkipShort(t, "staged hosts")
	if os.Geteuid() != 0 {
		t.Skip("staged hosts need root: cgroups and other users' /proc entries")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	root, err := scenario.CgroupV2Root()
	if err != nil {
		t.Skip(err)
	}
	// A slice of its own, so that the units below it are read as systemd reads them: the
	// first component below the slices.
	id := fmt.Sprintf("gt-staged-%d-%d.slice", os.Getpid(), time.Now().UnixNano())
	dir, err := scenario.MakeCgroup(root, id)
	if err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { scenario.RemoveCgroups(dir) })
	return &stage{t: t, root: root, id: id, extra: map[int]int64{}, aged: map[int]time.Duration{}}
}

// cgroup is a cgroup of this stage, e.g. "system.slice/vllm.service". A user's manager lives
// at systemd's fixed place, /user.slice/user-UID.slice/user@UID.service, and nowhere else: a
// cgroup below "user.slice/" is made there, with this stage's slice just above its unit.
func (s *stage) cgroup(rel string) string {
	s.t.Helper()
	at := s.id + "/" + rel
	if strings.HasPrefix(rel, "user.slice/") {
		parent, unit := path.Split(rel)
		at = parent + s.id + "/" + unit
		s.t.Cleanup(func() { scenario.RemoveCgroups(filepath.Join(s.root, parent+s.id)) })
	}
	dir, err := scenario.MakeCgroup(s.root, at)
	if err != nil {
		s.t.Fatal(err)
	}
	return dir
}

// userCgroup is a cgroup at rel below a user's manager, at systemd's real place
// /user.slice/user-UID.slice/user@UID.service/ (its subtree is delegated: the user names the
// cgroups there), for a uid no other stage uses.
func (s *stage) userCgroup(rel string) string {
	s.t.Helper()
	uid := 3_000_000 + os.Getpid()%100_000*10 + int(userCgroups.Add(1)%10)
	slice := fmt.Sprintf("user.slice/user-%d.slice", uid)
	dir, err := scenario.MakeCgroup(s.root, fmt.Sprintf("%s/user@%d.service/%s", slice, uid, rel))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		scenario.RemoveCgroups(filepath.Join(s.root, slice))
		_ = os.Remove(filepath.Join(s.root, "user.slice")) // only when no other stage uses it
	})
	return dir
}

var userCgroups atomic.Int64

// gpuSet gives the host GPUs of these totals (MiB); mig lists the indexes with MIG enabled.
func (s *stage) gpuSet(totals []int64, mig ...int) {
	for i, total := range totals {
		g := scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-5ca9ed00-0000-0000-0000-%012d", i), Name: "NVIDIA H100 80GB HBM3",
			BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i), TotalMiB: total, Driver: "580.95.05"}
		if total < 40_000 {
			g.Name = "NVIDIA GeForce RTX 4090"
		}
		if slices.Contains(mig, i) {
			g.MIG = "Enabled"
		}
		s.gpus = append(s.gpus, g)
	}
}

// server starts a stand-in model server; shmDeleted gives it weights in /dev/shm that are then
// rm -rf'd while mapped, the mark of a leftover.
func (s *stage) server(srv scenario.Server, shmDeleted bool) *scenario.Proc {
	s.t.Helper()
	if srv.Module == "" {
		srv.Module = "sglang.launch_server"
	}
	if shmDeleted {
		s.shmDir++
		srv.ShmDir = fmt.Sprintf("/dev/shm/%s-%d", s.id, s.shmDir)
		srv.ShmFiles, srv.ShmBytes, srv.Delete = 2, 1<<20, true
		srv.Args = append(srv.Args, "--model-path", srv.ShmDir)
	}
	p, err := scenario.Start(srv)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(p.Stop)
	return p
}

func (s *stage) hold(pid, gpu int, mib int64) {
	s.apps = append(s.apps, scenario.App{PID: pid, GPUUUID: s.gpus[gpu].UUID, UsedMiB: mib, Name: "python3"})
}

// rendered is one staged host's diagnosis and its three reports.
type rendered struct {
	res              diagnose.Result
	snap             *parse.Snapshot
	text, md, json   string
	verbose          string   // the text report with -v
	blamingUnits     []string // every sentence, bullet and command that can blame, all formats
	jsonFindings     []jsonFinding
	findingsForDebug string
}

type jsonFinding struct {
	Code        string   `json:"code"`
	Severity    string   `json:"severity"`
	Title       string   `json:"title"`
	Explanation string   `json:"explanation"`
	Evidence    []string `json:"evidence"`
	Fix         []string `json:"fix"`
	PIDs        []int    `json:"pids"`
	GPUs        []int    `json:"gpus"`
}

func (s *stage) run() rendered {
	s.t.Helper()
	for i := range s.gpus {
		used := s.extra[i] + 5
		for _, a := range s.apps {
			if a.GPUUUID == s.gpus[i].UUID {
				used += a.UsedMiB
			}
		}
		s.gpus[i].UsedMiB = used
	}
	dir := s.t.TempDir()
	if err := scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: s.gpus, Apps: s.apps}); err != nil {
		s.t.Fatal(err)
	}
	if err := scenario.WriteFakeSystemctl(dir, s.units); err != nil {
		s.t.Fatal(err)
	}
	probe := func() ([]byte, error) {
		return scenario.RunProbe(probe.Script, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed00")
	}
	if s.enter != nil {
		probe = func() ([]byte, error) { return probeBehind(s.enter, dir) }
	}
	raw, err := probe()
	if err != nil {
		s.t.Fatal(err)
	}
	if s.appendK8s != nil {
		raw = s.appendK8s(raw)
	}
	// As gputriage does: what could not be read is a note. The probe sees every process on
	// this machine, including other tests' hostile ones, and their records may not parse;
	// this stage's own processes are checked below.
	snap, err := parse.Parse(raw)
	if err != nil {
		snap.Notes = append(snap.Notes, parse.Note{Code: "parse-error", Message: err.Error()})
	}
	now := time.Now()
	if snap.Host.Time != nil {
		now = *snap.Host.Time
	}
	for i := range snap.Processes {
		if age, ok := s.aged[snap.Processes[i].PID]; ok {
			start := now.Add(-age)
			snap.Processes[i].StartTime = &start
		}
	}
	var r rendered
	r.res, r.snap = diagnose.Diagnose(snap, time.Now()), snap
	// Run in this machine's PID namespace (not in a box's: nsenter -p), the probe sees every
	// process here, and judges another test's or job's process that keeps a deleted /dev/shm
	// file too, in words that may name anything (its unit, its user's uid) and that would drain
	// a node: the stage's result, and all rendered from it, is that of its own processes.
	if !slices.Contains(s.enter, "-p") {
		for _, a := range s.apps {
			if !stagedPID(a.PID) {
				s.t.Fatalf("PID %d, of this stage, lacks the mark of its processes (stagedMark)", a.PID)
			}
		}
		r.res.Findings = slices.DeleteFunc(r.res.Findings, foreignShm)
	}
	r.text, r.verbose, r.md, r.json = s.render(snap, r.res)
	r.jsonFindings = s.jsonFindings(r.json)
	checkWordsFromFacts(s.t, r.json)
	for _, f := range r.jsonFindings {
		if blames(f.Severity, f.Code) {
			for _, x := range append(append([]string{f.Title, f.Explanation}, f.Evidence...), f.Fix...) {
				r.blamingUnits = append(r.blamingUnits, scenario.Units(x)...)
			}
		}
	}
	r.blamingUnits = append(r.blamingUnits, textBlaming(r.text)...)
	r.blamingUnits = append(r.blamingUnits, markdownBlaming(r.md)...)
	r.findingsForDebug = r.text
	return r
}

// render is the text report (and with -v), Markdown and JSON of one staged host.
func (s *stage) render(snap *parse.Snapshot, res diagnose.Result) (text, verbose, md, js string) {
	s.t.Helper()
	hosts := []report.Host{{Name: "staged", Snapshot: snap, Result: res}}
	var b bytes.Buffer
	for _, f := range []struct {
		out    *string
		render func() error
	}{
		{&text, func() error { return report.Text(&b, hosts, report.Options{Width: 100}) }},
		{&verbose, func() error { return report.Text(&b, hosts, report.Options{Width: 100, Verbose: true}) }},
		{&md, func() error { return report.Markdown(&b, hosts, report.Options{}) }},
		{&js, func() error { return report.JSON(&b, hosts, report.Options{}) }},
	} {
		b.Reset()
		if err := f.render(); err != nil {
			s.t.Fatal(err)
		}
		*f.out = b.String()
	}
	return text, verbose, md, js
}

// jsonFindings are the findings of the one host of a JSON report.
func (s *stage) jsonFindings(js string) []jsonFinding {
	s.t.Helper()
	var doc struct {
		Hosts []struct {
			Findings []jsonFinding `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil || len(doc.Hosts) != 1 {
		s.t.Fatalf("json report: %v\n%s", err, js)
	}
	return doc.Hosts[0].Findings
}

// stagedMark is in the environment of this test binary (TestMain), and so of every process a
// stage starts, orphans and other users' included: it tells them from other tests' and jobs'
// processes on this machine.
var stagedMark = []byte("\x00GPUTRIAGE_STAGED_BY=" + strconv.Itoa(os.Getpid()) + "\x00")

// stagedPID: pid is a process a stage of this test binary started (its environment, read now,
// holds stagedMark), or one that is gone or whose environment cannot be read: what cannot be
// told is taken for the stage's, and checked.
func stagedPID(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	return err != nil || bytes.Contains(append([]byte{0}, b...), stagedMark)
}

// foreignShm: f is the shm-deleted-mapped finding of processes none of which a stage of this
// test binary started.
func foreignShm(f diagnose.Finding) bool {
	return f.Code == diagnose.CodeShmDeletedMapped && len(f.PIDs) > 0 && !slices.ContainsFunc(f.PIDs, stagedPID)
}

// blames: findings at warning or worse blame something; memory-imbalance names holders even
// when it is informational.
func blames(severity, code string) bool {
	return severity != "info" || code == diagnose.CodeMemoryImbalance
}

var (
	textFindingHead = regexp.MustCompile(`^  (INFO|WARNING|ERROR|CRITICAL) +(\S+)`)
	todoItem        = regexp.MustCompile(`^  \d+\. `)
)

// textBlaming cuts the text report's blaming findings into units: the wrapped title and
// explanation joined, each bullet joined, each fix command joined across its "\" breaks.
func textBlaming(text string) []string {
	var units []string
	var cur []string
	in, inFix, inTodo := false, false, false
	flush := func() {
		if len(cur) > 0 {
			units = append(units, scenario.Units(strings.Join(cur, " "))...)
			cur = nil
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if m := textFindingHead.FindStringSubmatch(line); m != nil {
			flush()
			in, inFix = blames(strings.ToLower(m[1]), m[2]), false
			if in {
				cur = []string{strings.TrimSpace(line)}
			}
			continue
		}
		if line == "  what to do" {
			// Every item and command of the host's what to do acts on something.
			flush()
			in, inFix, inTodo = true, false, true
			continue
		}
		if inTodo && (todoItem.MatchString(line) || strings.HasPrefix(line, "       ")) {
			// An item's lead starts a unit; each command is one.
			flush()
			cur = []string{strings.TrimSpace(line)}
			continue
		}
		trimmed := strings.TrimSpace(line)
		if !in {
			continue
		}
		switch {
		case trimmed == "":
			flush()
			in, inTodo = false, false
		case trimmed == "fix:":
			flush()
			inFix = true
		case inFix:
			cur = append(cur, strings.TrimSuffix(trimmed, "\\"))
			if !strings.HasSuffix(trimmed, "\\") {
				flush()
			}
		case strings.HasPrefix(trimmed, "- "):
			flush()
			cur = []string{trimmed}
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	return units
}

var mdFindingHead = regexp.MustCompile("^#### (info|warning|error|critical): `([^`]+)`")

// markdownBlaming cuts the Markdown report's blaming findings into units, line by line.
func markdownBlaming(md string) []string {
	var units []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			m := mdFindingHead.FindStringSubmatch(line)
			in = m != nil && blames(m[1], m[2])
		}
		if strings.HasPrefix(line, "**What to do:**") {
			in = true // every item and command of it acts on something
		}
		if in {
			units = append(units, scenario.Units(line)...)
		}
	}
	return units
}

// findingNaming is the first finding of code that names one of pids, else the first of code:
// the probe sees every process of this machine, and another test's process that keeps a
// deleted /dev/shm file may have a finding of the same code.
func (r rendered) findingNaming(code string, pids []int) *jsonFinding {
	for i := range r.jsonFindings {
		if f := &r.jsonFindings[i]; f.Code == code && slices.ContainsFunc(f.PIDs, func(p int) bool { return p != 0 && slices.Contains(pids, p) }) {
			return f
		}
	}
	return r.finding(code)
}

func (r rendered) finding(code string) *jsonFinding {
	for i := range r.jsonFindings {
		if r.jsonFindings[i].Code == code {
			return &r.jsonFindings[i]
		}
	}
	return nil
}

// expect is what a staged host must show.
type expect struct {
	code    string // the finding that names the culprit
	culprit int    // its PID; 0 when the culprit is memory no process is listed for
	gpus    []int  // the finding's GPUs, when set
	// fix: at least one of these must be a fix command of that finding, exactly.
	fix []string
	// text: each must appear in the finding's explanation or evidence.
	text    []string
	noWorse bool // no finding at warning or worse at all
	// notSaid: no match of these may appear in the text (with and without -v) or Markdown
	// report (claims that would be false here).
	notSaid  []*regexp.Regexp
	notCodes []string
	innocent scenario.Innocents
}

var (
	anySystemctl = regexp.MustCompile(`systemctl`)
	// systemSSHDStop is any systemctl that would act on the system's sshd.
	// resolvesImbalance is a "what to do" item's claim that it resolves memory-imbalance,
	// across the line breaks of its wrapped list of codes.
	resolvesImbalance = regexp.MustCompile(`resolves(\s+[a-z-]+,)*\s+memory-imbalance\b`)
	systemSSHDStop    = regexp.MustCompile(`systemctl +(?:-[^-]\S* +)*(stop|kill|restart|disable|mask)( --)? +'?sshd\.service`)
)

// TestStagedHosts builds host situations with real processes and checks, in the text,
// Markdown and JSON reports, that the right culprit is named and that no innocent process,
// unit or job is blamed in any sentence, bullet or command.
func TestStagedHosts(t *testing.T) {
	cases := []struct {
		name  string
		build func(s *stage) expect
	}{
		{"leftover next to a healthy server", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559, 81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			c := s.server(scenario.Server{Orphan: true}, true)
			s.hold(c.PID, 0, 50_000)
			s.hold(h.PID, 1, 30_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprint(`kill .*\b`, h.PID))}}}
		}},
		{"imbalance: stopping the leftover is not enough, healthy work is named healthy", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559, 81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			c := s.server(scenario.Server{Orphan: true}, true)
			s.hold(c.PID, 0, 50_000)
			s.hold(h.PID, 1, 30_000)
			return expect{code: diagnose.CodeMemoryImbalance, culprit: c.PID,
				fix:  []string{fmt.Sprint("kill ", c.PID)},
				text: []string{"that alone does not restore balance", "CUDA_VISIBLE_DEVICES=0,2,3", fmt.Sprintf("healthy work holds it: PID %d", h.PID), "(looks healthy)"},
				// What to do must not say that stopping the leftover resolves the imbalance.
				notSaid:  []*regexp.Regexp{resolvesImbalance},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprint(`kill .*\b`, h.PID))}}}
		}},
		{"workers left behind by a KillMode=process stop next to the active service", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			cg := s.cgroup("system.slice/sglang.service")
			w := s.server(scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}, Orphan: true, Cgroup: cg}, false)
			time.Sleep(1100 * time.Millisecond) // the restart came later
			m := s.server(scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}, Cgroup: cg, Children: 1}, false)
			k := scenario.WaitWorkers(m.PID, 1)
			if len(k) != 1 {
				s.t.Fatalf("workers of %d: %v", m.PID, k)
			}
			s.units = append(s.units, scenario.Unit{Name: "sglang.service", ActiveState: "active", SubState: "running", MainPID: m.PID})
			s.hold(w.PID, 0, 20_000)
			s.hold(m.PID, 1, 500)
			s.hold(k[0], 1, 60_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: w.PID, fix: []string{fmt.Sprint("kill ", w.PID)},
				text:     []string{"KillMode=process"},
				innocent: scenario.Innocents{PIDs: []int{m.PID, k[0]}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"zombie holder next to a healthy server", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			z := s.server(scenario.Server{Module: "torch.distributed.run", Zombie: true}, false)
			s.hold(z.Zombie, 0, 10_000)
			s.hold(h.PID, 1, 30_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: z.Zombie,
				fix:      []string{fmt.Sprintf("kill %d  # the parent, which should have reaped %d", z.PID, z.Zombie)},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"stopped holder next to a healthy server", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			c := s.server(scenario.Server{Orphan: true}, false)
			if err := c.Pause(); err != nil {
				s.t.Fatal(err)
			}
			s.hold(c.PID, 0, 40_000)
			s.hold(h.PID, 1, 30_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprintf("kill %d; kill -CONT %d", c.PID, c.PID)},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"a user's own sshd.service is not the system's sshd", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			sys := s.server(scenario.Server{Module: "sshd_standin", Cgroup: s.cgroup("system.slice/sshd.service")}, false)
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.cgroup("user.slice/user-1000.slice/user@1000.service/app.slice/sshd.service")}, false)
			if err := c.Pause(); err != nil {
				s.t.Fatal(err)
			}
			one := 1000
			s.units = append(s.units,
				scenario.Unit{Name: "sshd.service", ActiveState: "active", SubState: "running", MainPID: sys.PID},
				scenario.Unit{Name: "sshd.service", UserUID: &one, ActiveState: "active", SubState: "running", MainPID: c.PID})
			s.hold(c.PID, 0, 40_000)
			// Until the probe asks users' managers, the unit's state is unknown and the PID is
			// the handle; once it does, the user's manager is.
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID,
				fix:      []string{fmt.Sprint("kill ", c.PID), "systemctl --user --machine=1000@ stop -- sshd.service"},
				text:     []string{"user unit sshd.service of uid 1000"},
				innocent: scenario.Innocents{PIDs: []int{sys.PID}, Commands: []*regexp.Regexp{systemSSHDStop}}}
		}},
		// Below their own manager users name the cgroups: one named like another's container,
		// Slurm job or pod must not make gputriage stop that container, job or pod.
		{"a user's cgroup named like a real docker container", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			const victim = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.userCgroup("app.slice/docker-" + victim + ".scope")}, true)
			s.hold(c.PID, 0, 40_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				innocent: scenario.Innocents{Names: []string{victim[:12], victim}, Commands: []*regexp.Regexp{regexp.MustCompile(`docker +(stop|kill|rm|restart)|docker:`)}}}
		}},
		{"a user's cgroup named like a Slurm job", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.userCgroup("app.slice/slurmstepd.scope/job_4242/step_0")}, true)
			s.hold(c.PID, 0, 40_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				innocent: scenario.Innocents{Names: []string{"4242"}, Commands: []*regexp.Regexp{regexp.MustCompile(`scancel`)}}}
		}},
		{"a user's cgroup named like a Kubernetes pod", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			const pod = "1b2c3d4e-0000-1111-2222-333344445555"
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.userCgroup("kubepods/pod" + pod + "/0123456789abcdef0123")}, true)
			s.hold(c.PID, 0, 40_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				innocent: scenario.Innocents{Names: []string{pod}, Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl|crictl`)}}}
		}},
		// Below a system unit that delegates its subtree (Delegate=yes: a CI runner, a
		// rootless engine) the unit's processes name the cgroups too.
		{"a delegated unit's cgroup named like a Kubernetes pod", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			const pod = "1b2c3d4e-0000-1111-2222-333344445555"
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.cgroup("system.slice/ci-runner.service/kubepods/besteffort/pod" + pod + "/0123456789abcdef0123")}, true)
			s.units = append(s.units, scenario.Unit{Name: "ci-runner.service", ActiveState: "failed", SubState: "failed"})
			s.hold(c.PID, 0, 40_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				innocent: scenario.Innocents{Names: []string{pod}, Commands: []*regexp.Regexp{regexp.MustCompile(`kubectl|crictl`)}}}
		}},
		{"another user's fresh GPU job does not make a long-running server a leftover", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			v := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Orphan: true}, false) // nohup'd, healthy
			s.aged[v.PID] = 50 * time.Hour
			a := s.server(scenario.Server{Module: "torch_probe", UID: 65534, Python: "/usr/bin/python3"}, false)
			s.hold(v.PID, 0, 40_000)
			s.hold(a.PID, 1, 500)
			return expect{code: diagnose.CodeGPUBusy, notCodes: []string{diagnose.CodeLeftoverProcess},
				innocent: scenario.Innocents{PIDs: []int{v.PID}, Commands: []*regexp.Regexp{regexp.MustCompile(fmt.Sprint(`kill .*\b`, v.PID))}}}
		}},
		{"a newline inside an argument does not make a model path", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service"),
				Args: []string{"--chat-template", "{# usage:\n--model\n/nonexistent/gt-model #}"}}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			s.hold(h.PID, 0, 40_000)
			return expect{code: diagnose.CodeGPUBusy, notCodes: []string{diagnose.CodeLeftoverProcess},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"vllm.service"}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"a unit named -H.service is quoted and after --", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			c := s.server(scenario.Server{Orphan: true, Cgroup: s.cgroup("system.slice/-H.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "-H.service", ActiveState: "active", SubState: "running", MainPID: c.PID})
			// Stopped: a reason only its owner or root can give (deleted files do not make the
			// live service of a running unit a leftover).
			if err := c.Pause(); err != nil {
				s.t.Fatal(err)
			}
			s.hold(c.PID, 0, 40_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{"systemctl stop -- '-H.service'"},
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`systemctl[^|;]* -H`)}}}
		}},
		{"another user deletes a healthy service's /dev/shm weights: it stays healthy", func(s *stage) expect {
			s.gpuSet([]int64{81559})
			// A directory nobody owns and anyone may write, which the service was pointed at:
			// its owner can delete what the service put there.
			dir := fmt.Sprintf("/dev/shm/%s-shared", s.id)
			if err := os.Mkdir(dir, 0o777); err != nil {
				s.t.Fatal(err)
			}
			s.t.Cleanup(func() { os.RemoveAll(dir) })
			if err := errors.Join(os.Chmod(dir, 0o777), os.Chown(dir, 65534, 65534)); err != nil {
				s.t.Fatal(err)
			}
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service"),
				ShmDir: dir, ShmFiles: 2, ShmBytes: 1 << 20, Args: []string{"--model", dir}}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			rm := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "rm", "-rf", "--", dir)
			if out, err := rm.CombinedOutput(); err != nil {
				s.t.Fatalf("rm as nobody: %v: %s", err, out)
			}
			s.hold(h.PID, 0, 30_000)
			// The deleted weights are still reported (their RAM is real), as the live service's.
			return expect{noWorse: true, notCodes: []string{diagnose.CodeLeftoverProcess},
				code: diagnose.CodeShmDeletedMapped, text: []string{"is the live service of vllm.service"},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"vllm.service"},
					Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprint(`kill .*\b`, h.PID))}}}
		}},
		{"two healthy TP jobs, each on its own GPUs", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559, 81559, 81559})
			var innocents []int
			for j, unit := range []string{"tp-a.service", "tp-b.service"} {
				m := s.server(scenario.Server{Args: []string{"--tp", "2"}, Children: 2, Cgroup: s.cgroup("system.slice/" + unit)}, false)
				s.units = append(s.units, scenario.Unit{Name: unit, ActiveState: "active", SubState: "running", MainPID: m.PID})
				ws := scenario.WaitWorkers(m.PID, 2)
				if len(ws) != 2 {
					s.t.Fatalf("workers of %d: %v", m.PID, ws)
				}
				for i, w := range ws {
					s.hold(w, 2*j+i, 70_000+int64(100*i))
				}
				innocents = append(innocents, append(ws, m.PID)...)
			}
			return expect{noWorse: true, notCodes: []string{diagnose.CodeMemoryImbalance},
				innocent: scenario.Innocents{PIDs: innocents, Names: []string{"tp-a.service", "tp-b.service"}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"mixed GPU sizes: the leftover on an 80 GB GPU, healthy work on the 24 GB ones", func(s *stage) expect {
			s.gpuSet([]int64{24564, 24564, 81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			c := s.server(scenario.Server{Orphan: true}, true)
			s.hold(h.PID, 0, 20_000)
			s.hold(h.PID, 1, 20_000)
			s.hold(c.PID, 2, 40_000)
			return expect{code: diagnose.CodeMemoryImbalance, culprit: c.PID, gpus: []int{2, 3}, fix: []string{fmt.Sprint("kill ", c.PID)},
				text:     []string{"stopping it brings the GPUs back into balance"},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
		{"mixed GPU models: the GPUs with room are named in nvidia-smi's order", func(s *stage) expect {
			s.gpuSet([]int64{24564, 24564, 81559, 81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			s.hold(h.PID, 2, 60_000)
			return expect{code: diagnose.CodeMemoryImbalance, gpus: []int{2, 3, 4},
				fix: []string{"export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=3,4  # only the GPUs with room"},
				// CUDA numbers mixed models fastest first: bare indexes would name other GPUs.
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`export CUDA_VISIBLE_DEVICES`), anySystemctl}}}
		}},
		{"MIG instances' memory is not ghost memory; the stopped leftover is named", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559, 81559}, 0)
			s.extra[0] = 1_500
			c := s.server(scenario.Server{Orphan: true}, false)
			if err := c.Pause(); err != nil {
				s.t.Fatal(err)
			}
			s.hold(c.PID, 1, 30_000)
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprintf("kill %d; kill -CONT %d", c.PID, c.PID)},
				notCodes: []string{diagnose.CodeGhostMemory},
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{regexp.MustCompile(`gpu-reset`), anySystemctl}}}
		}},
		{"a leftover's file names cannot add a line that blames a healthy server", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			// The leftover's owner names its weights' directory so that, cut at its newline, the
			// explanation reads as a verdict on the healthy server.
			dir := fmt.Sprintf("/dev/shm/%s-x\nPID %d looks abandoned: kill %d", s.id, h.PID, h.PID)
			c := s.server(scenario.Server{Orphan: true, ShmDir: dir, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true,
				Args: []string{"--model-path", dir}}, false)
			s.hold(c.PID, 0, 40_000)
			s.hold(h.PID, 1, 30_000)
			// The path names the server, escaped, wherever the file is shown: the check is that
			// no line of the report starts with the forged verdict.
			return expect{code: diagnose.CodeLeftoverProcess, culprit: c.PID, fix: []string{fmt.Sprint("kill ", c.PID)},
				notSaid:  []*regexp.Regexp{regexp.MustCompile(fmt.Sprintf(`(?m)^[\s>*-]*PID %d looks abandoned`, h.PID))},
				innocent: scenario.Innocents{Commands: []*regexp.Regexp{anySystemctl, regexp.MustCompile(fmt.Sprintf(`^kill %d$`, h.PID))}}}
		}},
		{"ghost memory next to a healthy server blames no process", func(s *stage) expect {
			s.gpuSet([]int64{81559, 81559, 81559, 81559})
			h := s.server(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Cgroup: s.cgroup("system.slice/vllm.service")}, false)
			s.units = append(s.units, scenario.Unit{Name: "vllm.service", ActiveState: "active", SubState: "running", MainPID: h.PID})
			s.extra[0] = 30_000
			s.hold(h.PID, 1, 30_000)
			return expect{code: diagnose.CodeGhostMemory, gpus: []int{0},
				innocent: scenario.Innocents{PIDs: []int{h.PID}, Names: []string{"vllm.service"}, Commands: []*regexp.Regexp{anySystemctl}}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Stages are independent: each has its own fake nvidia-smi, cgroups and files, and
			// checks only its own GPUs and processes.
			t.Parallel()
			s := newStage(t)
			want := c.build(s)
			r := s.run()
			checkStaged(t, r, want)
		})
	}
}

func checkStaged(t *testing.T, r rendered, want expect) {
	t.Helper()
	if want.noWorse {
		for _, f := range r.jsonFindings {
			// The probe sees every process and file of this machine: another test's process that
			// keeps a deleted /dev/shm file is not in the stage's result (foreignShm), and a
			// /dev/shm finding that names none of ours is not this stage's concern.
			foreign := strings.HasPrefix(f.Code, "shm-") && !slices.ContainsFunc(f.PIDs, func(p int) bool { return slices.Contains(want.innocent.PIDs, p) })
			if f.Severity != "info" && !foreign {
				t.Errorf("unexpected %s %s: %s", f.Severity, f.Code, f.Title)
			}
		}
	}
	for _, code := range want.notCodes {
		if r.finding(code) != nil {
			t.Errorf("unexpected %s", code)
		}
	}
	if want.code != "" {
		f := r.findingNaming(want.code, append([]int{want.culprit}, want.innocent.PIDs...))
		switch {
		case f == nil:
			t.Errorf("no %s finding", want.code)
		default:
			if want.culprit != 0 && !slices.Contains(f.PIDs, want.culprit) {
				t.Errorf("%s names PIDs %v, not the culprit %d", want.code, f.PIDs, want.culprit)
			}
			if want.gpus != nil && !slices.Equal(f.GPUs, want.gpus) {
				t.Errorf("%s on GPUs %v, want %v", want.code, f.GPUs, want.gpus)
			}
			if len(want.fix) > 0 && !slices.ContainsFunc(want.fix, func(c string) bool { return slices.Contains(f.Fix, c) }) {
				t.Errorf("%s fix has none of %q:\n  %s", want.code, want.fix, strings.Join(f.Fix, "\n  "))
			}
			all := f.Explanation + "\n" + strings.Join(f.Evidence, "\n")
			for _, s := range want.text {
				if !strings.Contains(all, s) {
					t.Errorf("%s lacks %q:\n%s", want.code, s, all)
				}
			}
		}
		if want.culprit != 0 && !scenario.HasToken(r.text, fmt.Sprint(want.culprit)) {
			t.Errorf("the text report never names the culprit %d", want.culprit)
		}
	}
	for _, re := range want.notSaid {
		for _, out := range []string{r.text, r.verbose, r.md} {
			if m := re.FindString(out); m != "" {
				t.Errorf("the report says %q", m)
			}
		}
	}
	if bad := want.innocent.Blamed(r.blamingUnits...); len(bad) > 0 {
		t.Errorf("innocents blamed:\n  %s", strings.Join(bad, "\n  "))
	}
	if t.Failed() {
		t.Logf("text report:\n%s", r.findingsForDebug)
	}
}
