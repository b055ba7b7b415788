//go:build linux

package scenario_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/nodecheck"
	"github.com/gputriage/gputriage/report"
)

// The library of everyday situations (issue 16 §5): each is a host of its own (scenario.Box:
// PID, mount and cgroup namespaces, a private /dev with plain /dev/nvidiaN files, a private
// /dev/shm, its own /etc/passwd), its processes real (the actor program, with the real
// programs' command lines, users, cgroups, device files and /dev/shm maps), nvidia-smi the
// fake answering for the box's PIDs, and the real probe run inside. Each is judged by the
// rule: the right culprit named (code, PID, GPU) and no innocent blamed in any sentence,
// bullet, fix command, Prometheus label or node-check drain reason; where nothing is wrong,
// no finding at warning or worse and no drain.
//
// To add a situation: write its processes as a tree of scenario.Actor (children of the box's
// PID 1; cgroups relative to the box's root, e.g. "system.slice/vllm.service"), what
// nvidia-smi says of each (GPUMiB, Type), its units, and the verdict; put the public report
// it comes from in a comment above it.

// pendingClass lists the situations the code gets wrong today, each with the branch that
// owns the fix: a failure of one of these skips with the failure's text instead of failing.
// Remove an entry once its branch is merged.
var pendingClass = map[string]string{}

// situation is one staged host.
type situation struct {
	name    string
	gpus    []int64 // each GPU's total MiB, nvidia-smi's order (H100 80GB; RTX 4090 below 40 GB)
	devices int     // /dev/nvidiaN files; one per GPU when 0
	users   []string
	procs   []scenario.Actor
	units   []libUnit
	extra   map[int]int64 // MiB in use on a GPU that no process is listed for
	want    verdict
}

// libUnit is a systemd unit the fake systemctl knows, its main process named by actor.
type libUnit struct {
	name, state, main string
	uid               *int
}

// verdict is what the reports must say.
type verdict struct {
	healthy  bool     // nothing is wrong: no finding at warning or worse, no node-check problem
	code     string   // the finding that names the culprits
	culprits []string // actors the finding must name
	// gpus the finding may name; the GPUs the culprits hold memory on when nil.
	gpus []int
	// mayName: actors that may be named either way (a culprit's dead launcher, a zombie's
	// parent). Every other actor is innocent, and so are the units whose main process is.
	mayName []string
	// notKilled: actors that may be named (as a parent, a unit's main process) but that no
	// line may suggest killing.
	notKilled []string
	notSaid   []*regexp.Regexp // claims that would be false here, in the text and Markdown
}

var (
	libPIDBase atomic.Int64
	abandoned  = regexp.MustCompile(`(?i)looks (abandoned|left over)`)
)

// TestLibrary stages every situation of the library in a box of its own and judges it.
func TestLibrary(t *testing.T) {
	testenv.SkipShort(t, "scenario library")
	if os.Geteuid() != 0 {
		testenv.SkipSuite(t, "scenario library", "run as root", "boxes need root: namespaces, mounts and cgroups")
	}
	testenv.Programs(t, "scenario library", "apt-get install util-linux", []string{"unshare", "nsenter"}, nil)
	actor := buildActor(t)
	names := map[string]bool{}
	for _, sit := range library() {
		if names[sit.name] {
			t.Fatalf("two situations named %q", sit.name)
		}
		names[sit.name] = true
		t.Run(sit.name, func(t *testing.T) {
			t.Parallel()
			problems, debug := sit.stage(t, actor)
			if os.Getenv("GT_SHOW") != "" {
				t.Log(debug)
			}
			owner, pending := pendingClass[sit.name]
			switch {
			case len(problems) > 0 && pending:
				t.Skipf("pending on branch %s:\n  %s", owner, strings.Join(problems, "\n  "))
			case len(problems) > 0:
				t.Errorf("%s\n%s", strings.Join(problems, "\n"), debug)
			case pending:
				t.Logf("passes now: remove it from pendingClass (%s)", owner)
			}
		})
	}
}

// buildActor builds the actor program once for the run, where every user may run it.
func buildActor(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gt-actor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "actor")
	cmd := exec.Command("go", "build", "-o", bin, "./actor")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./actor: %v\n%s", err, out)
	}
	return bin
}

// stage builds the situation's box, probes it and judges the reports: the problems found,
// and the text report for a failure's message.
func (sit situation) stage(t *testing.T, actor string) ([]string, string) {
	s := newStage(t)
	procs := slices.Clone(sit.procs)
	for i := range procs {
		procs[i].Walk(func(a *scenario.Actor) {
			if a.Cgroup != "" {
				dir, err := scenario.MakeCgroup(s.root, s.id+"/"+a.Cgroup)
				if err != nil {
					t.Fatal(err)
				}
				a.Cgroup = dir
			}
		})
	}
	devices := sit.devices
	if devices == 0 {
		devices = len(sit.gpus)
	}
	// PIDs of five digits, each box its own range: a PID reads as no other number.
	base := 20000 + int(libPIDBase.Add(1)%40)*300
	box, err := scenario.StartBox(scenario.BoxSpec{Actor: actor, Cgroup: filepath.Join(s.root, s.id), Devices: devices,
		Passwd: sit.users, Procs: procs, PIDBase: base})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(box.Stop)
	s.enter = box.Enter()
	s.gpuSet(sit.gpus)
	for g, mib := range sit.extra {
		s.extra[g] += mib
	}
	for i := range sit.procs {
		sit.procs[i].Walk(func(a *scenario.Actor) { s.smiRow(a, box.PIDs[a.Name]) })
	}
	for _, u := range sit.units {
		sub := map[string]string{"active": "running", "inactive": "dead", "failed": "failed"}[u.state]
		s.units = append(s.units, scenario.Unit{Name: u.name, UserUID: u.uid, ActiveState: u.state, SubState: sub, MainPID: box.PIDs[u.main]})
	}
	r := s.run()
	return sit.judge(r, box.PIDs), r.text
}

// smiRow adds what nvidia-smi says of the actor a, PID pid, with its type: the fake lists
// compute processes (C, C+G, M+C) in --query-compute-apps and every process, graphics (G)
// included, in its full listing (-q -d PIDS).
func (s *stage) smiRow(a *scenario.Actor, pid int) {
	if a.Age > 0 {
		s.aged[pid] = a.Age
	}
	for g, mib := range a.GPUMiB {
		s.apps = append(s.apps, scenario.App{PID: pid, GPUUUID: s.gpus[g].UUID, UsedMiB: mib, Name: a.Argv[0], Type: a.Type})
	}
}

// judge checks the reports against the verdict and returns what is wrong.
func (sit situation) judge(r rendered, pids map[string]int) []string {
	var problems []string
	errorf := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	v := sit.want
	innocent, allowedGPUs := sit.innocents(pids)
	var b strings.Builder
	if err := report.Prometheus(&b, []report.Host{{Name: "staged", Snapshot: r.snap, Result: r.res}}, report.Options{}); err != nil {
		errorf("prometheus: %v", err)
	}
	metrics := blamingMetrics(b.String())
	nodeProblems := nodecheck.Check(r.res, nodecheck.Scope{})
	drain := nodecheck.DrainReason(nodeProblems)
	if v.healthy {
		for _, f := range r.jsonFindings {
			if f.Severity != "info" {
				errorf("nothing is wrong, yet %s %s: %s", f.Severity, f.Code, f.Title)
			}
		}
		if drain != "" {
			errorf("nothing is wrong, yet node-check drains: %q", drain)
		}
		for _, m := range metrics {
			errorf("nothing is wrong, yet the metric %s", m)
		}
	}
	if v.code != "" {
		problems = append(problems, sit.culpritNamed(r, pids, allowedGPUs, metrics)...)
	}
	for _, re := range v.notSaid {
		for _, out := range []string{r.text, r.verbose, r.md} {
			if m := re.FindString(out); m != "" {
				errorf("the report says %q in %q", m, lineOf(out, m))
			}
		}
	}
	units := append(slices.Clone(r.blamingUnits), drain)
	units = append(units, metrics...)
	for _, bad := range innocent.Blamed(units...) {
		errorf("innocent blamed: %s", bad)
	}
	for pid := range r.res.BlamedPIDs() {
		if slices.Contains(innocent.PIDs, pid) {
			errorf("PID %d, innocent, is blamed (colored in the process table)", pid)
		}
	}
	return problems
}

// culpritNamed checks that a finding of the verdict's code names each culprit, on the GPUs
// allowed, in JSON, text and Prometheus.
func (sit situation) culpritNamed(r rendered, pids map[string]int, allowed []int, metrics []string) []string {
	var problems []string
	v := sit.want
	if len(v.culprits) == 0 {
		if f := r.finding(v.code); f == nil {
			problems = append(problems, fmt.Sprintf("no %s finding", v.code))
		} else if !subset(f.GPUs, allowed) || len(f.GPUs) == 0 {
			problems = append(problems, fmt.Sprintf("%s on GPUs %v, want within %v", v.code, f.GPUs, allowed))
		}
	}
	for _, c := range v.culprits {
		pid := pids[c]
		f := r.findingNaming(v.code, []int{pid})
		switch {
		case f == nil || !slices.Contains(f.PIDs, pid):
			problems = append(problems, fmt.Sprintf("no %s finding names %s (PID %d)", v.code, c, pid))
			continue
		case !subset(f.GPUs, allowed) || len(f.GPUs) == 0:
			problems = append(problems, fmt.Sprintf("%s names %s on GPUs %v, want within %v", v.code, c, f.GPUs, allowed))
		}
		if !scenario.HasToken(r.text, strconv.Itoa(pid)) {
			problems = append(problems, fmt.Sprintf("the text report never names %s (PID %d)", c, pid))
		}
	}
	for _, m := range metrics {
		if !strings.Contains(m, `code="`+v.code+`"`) {
			continue
		}
		if g := metricGPUs(m); !subset(g, allowed) {
			problems = append(problems, fmt.Sprintf("the metric names GPUs %v, want within %v: %s", g, allowed, m))
		}
	}
	return problems
}

// innocents are the actors that may not be blamed: all but the culprits and those that may
// be named, with the units whose main process is innocent; and the GPUs the finding may name.
func (sit situation) innocents(pids map[string]int) (scenario.Innocents, []int) {
	v := sit.want
	var in scenario.Innocents
	allowed := slices.Clone(v.gpus)
	notKilled := slices.Clone(v.notKilled)
	var culpritCgroups []string
	var walk func(a *scenario.Actor, cgroup string, ancestors []string)
	walk = func(a *scenario.Actor, cgroup string, ancestors []string) {
		if a.Cgroup != "" {
			cgroup = a.Cgroup
		}
		if slices.Contains(v.culprits, a.Name) {
			// What a culprit descends from may be named (its launcher, its shell), not killed.
			notKilled = append(notKilled, ancestors...)
			culpritCgroups = append(culpritCgroups, cgroup)
			if v.gpus == nil {
				for g := range a.GPUMiB {
					allowed = append(allowed, g)
				}
			}
		}
		for i := range a.Children {
			walk(&a.Children[i], cgroup, append(slices.Clone(ancestors), a.Name))
		}
	}
	for i := range sit.procs {
		walk(&sit.procs[i], "", nil)
	}
	for i := range sit.procs {
		sit.procs[i].Walk(func(a *scenario.Actor) {
			pid := pids[a.Name]
			switch {
			case slices.Contains(v.culprits, a.Name) || slices.Contains(v.mayName, a.Name):
			case slices.Contains(notKilled, a.Name):
				in.Commands = append(in.Commands, regexp.MustCompile(fmt.Sprintf(`\bkill\b[^;|&]*\b%d\b`, pid)))
			default:
				in.PIDs = append(in.PIDs, pid)
			}
		})
	}
	for _, u := range sit.units {
		if !slices.Contains(in.PIDs, pids[u.main]) {
			continue
		}
		// A unit a culprit runs in (a stray in its cgroup) may be named, never stopped.
		if slices.ContainsFunc(culpritCgroups, func(cg string) bool { return strings.HasSuffix(cg, "/"+u.name) }) {
			in.Commands = append(in.Commands, regexp.MustCompile(`systemctl\b[^;|&]*\b(stop|kill|restart)\b[^;|&]*`+regexp.QuoteMeta(u.name)))
			continue
		}
		in.Names = append(in.Names, u.name)
	}
	// PID 1 is never to be killed.
	in.Commands = append(in.Commands, regexp.MustCompile(`\bkill\b[^;|&]* 1\b`))
	slices.Sort(allowed)
	return in, slices.Compact(allowed)
}

var metricSeverity = regexp.MustCompile(`severity="(warning|error|critical)"`)

// blamingMetrics are the finding series at warning or worse.
func blamingMetrics(exposition string) []string {
	var out []string
	for _, l := range strings.Split(exposition, "\n") {
		if strings.HasPrefix(l, "gputriage_finding{") && metricSeverity.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

var metricGPU = regexp.MustCompile(`gpu="([0-9,]*)"`)

func metricGPUs(series string) []int {
	m := metricGPU.FindStringSubmatch(series)
	if m == nil || m[1] == "" {
		return nil
	}
	var out []int
	for _, f := range strings.Split(m[1], ",") {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// lineOf is the line of text where s first occurs.
func lineOf(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

func subset(xs, of []int) bool {
	for _, x := range xs {
		if !slices.Contains(of, x) {
			return false
		}
	}
	return true
}

var _ = time.Hour
