package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// TestFiguresReconcile: for every fixture and every nvidia-smi listing of the shared corpus
// that parse reads (query-gpu, with the compute-apps listing taken at the same second;
// compute-apps and -q process listings alone), the
// figures of the text, Markdown, JSON and Prometheus reports reconcile: each GPU's used,
// reserved, free and total are nvidia-smi's in every format (none derived), used + reserved
// + free is within diagnose.RoundingMiB of total where all four are known, no sentence gives
// a GPU a free figure other than its own, and the processes' memory is set against used so
// that the two add up.
func TestFiguresReconcile(t *testing.T) {
	hosts := reconcileHosts(t)
	// A driver without memory.reserved: reserved is unknown and said to be, never derived.
	old := ct200FixtureHost(t)
	old.Name = "old-driver"
	for i := range old.Snapshot.GPUs {
		old.Snapshot.GPUs[i].MemoryReservedMiB = nil
	}
	old.Result = diagnose.Diagnose(old.Snapshot, *old.Snapshot.Host.Time)
	hosts = append(hosts, old)
	// Two GPUs alike in used and total, not in reserved and free: their bars are not folded
	// into one that gives the first one's figures for both.
	split := captureHost(t, "../fixtures/clean.capture")
	split.Name = "reserved-differs"
	g := &split.Snapshot.GPUs[1]
	g.MemoryReservedMiB, g.MemoryFreeMiB = ptr(int64(600)), ptr(*g.MemoryFreeMiB-32)
	split.Result = diagnose.Diagnose(split.Snapshot, *split.Snapshot.Host.Time)
	hosts = append(hosts, split)
	for _, h := range hosts {
		t.Run(h.Name, func(t *testing.T) {
			gpus := reconcileJSON(t, h)
			reconcileText(t, h, gpus)
			reconcileMarkdown(t, h, gpus)
			reconcilePrometheus(t, h, gpus)
		})
	}
	text := render(t, Text, []Host{old}, Options{Width: 400})
	if !strings.Contains(text, "reserved unknown") {
		t.Errorf("a host without memory.reserved does not say reserved is unknown:\n%s", text)
	}
}

// rGPU is one GPU of the JSON report, the figures every other format is checked against.
type rGPU struct {
	Index        int
	Total        *int64 `json:"memory_total_mib"`
	Used         *int64 `json:"memory_used_mib"`
	Free         *int64 `json:"memory_free_mib"`
	Reserved     *int64 `json:"memory_reserved_mib"`
	Balance      string `json:"memory_balance"`
	OffBy        *int64 `json:"memory_off_by_mib"`
	ProcMiB      int64  `json:"memory_processes_mib"`
	Procs        int    `json:"memory_processes"`
	Unattributed *int64 `json:"memory_unattributed_mib"`
}

// reconcileJSON checks the JSON report's figures against each other and returns its GPUs.
func reconcileJSON(t *testing.T, h Host) []rGPU {
	t.Helper()
	var doc struct {
		Hosts []struct {
			GPUs      []rGPU `json:"gpus"`
			Processes []struct {
				Mem map[string]int64 `json:"gpu_memory_mib"`
			} `json:"processes"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(render(t, JSON, []Host{h}, Options{})), &doc); err != nil || len(doc.Hosts) != 1 {
		t.Fatalf("JSON: %v", err)
	}
	jh := doc.Hosts[0]
	for _, g := range jh.GPUs {
		var listed int64
		n := 0
		for _, p := range jh.Processes {
			if v, ok := p.Mem[strconv.Itoa(g.Index)]; ok {
				listed += v
				n++
			}
		}
		if g.ProcMiB != listed || g.Procs != n {
			t.Errorf("GPU %d: memory_processes %d (%d MiB), the processes listed on it %d (%d MiB)", g.Index, g.Procs, g.ProcMiB, n, listed)
		}
		if g.Unattributed != nil && (g.Used == nil || *g.Unattributed != *g.Used-listed) {
			t.Errorf("GPU %d: memory_unattributed_mib %d is not used − processes (%v − %d)", g.Index, *g.Unattributed, show(g.Used), listed)
		}
		known := g.Total != nil && g.Used != nil && g.Free != nil
		switch {
		case known && g.Reserved != nil:
			off := *g.Used + *g.Reserved + *g.Free - *g.Total
			if off < -diagnose.RoundingMiB || off > diagnose.RoundingMiB {
				t.Errorf("GPU %d: used + reserved + free = %d + %d + %d is %d MiB off the total %d", g.Index, *g.Used, *g.Reserved, *g.Free, off, *g.Total)
			}
			if g.OffBy == nil || *g.OffBy != off || (g.Balance != "exact") != (off != 0) || (off != 0 && g.Balance != "rounding") {
				t.Errorf("GPU %d: balance %q off by %v, want %d", g.Index, g.Balance, show(g.OffBy), off)
			}
		case known:
			if g.Balance != "reserved-unknown" || g.OffBy != nil {
				t.Errorf("GPU %d: reserved unknown, balance %q off by %v", g.Index, g.Balance, show(g.OffBy))
			}
		default:
			if g.Balance != "unknown" || g.OffBy != nil {
				t.Errorf("GPU %d: figures unknown, balance %q off by %v", g.Index, g.Balance, show(g.OffBy))
			}
		}
	}
	return jh.GPUs
}

var (
	barRow = regexp.MustCompile(`^  (GPUs? [0-9, -]+?)\s+(?:\[[#-]+\]\s+)?(\S+)\s+(\S+)\s+(\S+)\s+(\S+) MiB( each)?$`)
	// Sentences that give one GPU's free memory, with the GPU's index and the figure.
	freeOfGPU = []*regexp.Regexp{
		regexp.MustCompile(`GPU (?P<gpu>\d+) has (?P<mib>[\d,]+) MiB free`),
		regexp.MustCompile(`free vs (?P<mib>[\d,]+) MiB on GPU (?P<gpu>\d+)`),
		regexp.MustCompile(`(?:min|max) free (?P<mib>[\d,]+) MiB \(GPU (?P<gpu>\d+)\)`),
		regexp.MustCompile(`on GPU (?P<gpu>\d+) \(lowest (?P<mib>[\d,]+) MiB free\)`),
	}
	totalLessReserved = regexp.MustCompile(`([\d,]+) total − ([\d,]+) reserved`)
	attribution       = regexp.MustCompile(`^  (GPUs? [0-9, -]+?): ([\d,]+) MiB used(?: in all)?(?:: processes listed ([\d,]+) MiB(?:; not attributed to a listed process (-?[\d,]+) MiB|, ([\d,]+) MiB more .*)|, none of it by a listed process)$`)
)

// reconcileText checks the text report (wide enough that nothing wraps) against the JSON's
// figures: the bars, the sentences that give a GPU's free memory, the reservation the
// findings subtract, and the line that sets the processes' memory against used.
func reconcileText(t *testing.T, h Host, gpus []rGPU) {
	t.Helper()
	byIndex := map[int]rGPU{}
	for _, g := range gpus {
		byIndex[g.Index] = g
	}
	text := render(t, Text, []Host{h}, Options{Width: 400, Only: OnlyAll})
	seen := map[int]bool{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		l := sc.Text()
		if m := barRow.FindStringSubmatch(l); m != nil {
			for _, i := range gpuList(t, m[1]) {
				seen[i] = true
				g := byIndex[i]
				for k, want := range []*int64{g.Used, g.Reserved, g.Free, g.Total} {
					if m[2+k] != opt(want) {
						t.Errorf("GPU %d's %s is %s in the text, %s in the JSON: %q", i, diagnose.MemoryHeads[k], m[2+k], opt(want), l)
					}
				}
			}
		}
		for _, re := range freeOfGPU {
			for _, m := range re.FindAllStringSubmatch(l, -1) {
				i, _ := strconv.Atoi(m[re.SubexpIndex("gpu")])
				if g, ok := byIndex[i]; !ok || opt(g.Free) != m[re.SubexpIndex("mib")] {
					t.Errorf("GPU %d: %q gives a free figure other than nvidia-smi's %s", i, m[0], opt(g.Free))
				}
			}
		}
		for _, m := range totalLessReserved.FindAllStringSubmatch(l, -1) {
			ok := false
			for _, g := range gpus {
				ok = ok || (opt(g.Total) == m[1] && opt(g.Reserved) == m[2])
			}
			if !ok {
				t.Errorf("%q: no GPU has that total and reservation", m[0])
			}
		}
		if m := attribution.FindStringSubmatch(l); m != nil {
			var used, listed int64
			for _, i := range gpuList(t, m[1]) {
				used += *byIndex[i].Used
				listed += byIndex[i].ProcMiB
			}
			if m[2] != mib(used) || (m[3] != "" && m[3] != mib(listed)) || (m[4] != "" && m[4] != mib(used-listed)) ||
				(m[5] != "" && m[5] != mib(listed-used)) || (m[3] == "" && listed != 0) {
				t.Errorf("%q: the JSON has %s MiB used, processes listed %s MiB", l, mib(used), mib(listed))
			}
		} else if strings.Contains(l, "processes listed") {
			t.Errorf("an attribution line the test does not read: %q", l)
		}
	}
	if len(gpus) > 0 && h.Snapshot.SMI.Failure == nil {
		for _, g := range gpus {
			if !seen[g.Index] && (g.Total != nil || g.Used != nil || g.Reserved != nil || g.Free != nil) {
				t.Errorf("GPU %d has no bar:\n%s", g.Index, text)
			}
		}
	}
}

// reconcileMarkdown checks the Markdown GPU table's figures against the JSON's.
func reconcileMarkdown(t *testing.T, h Host, gpus []rGPU) {
	t.Helper()
	byIndex := map[int]rGPU{}
	for _, g := range gpus {
		byIndex[g.Index] = g
	}
	for _, r := range tableRows(render(t, Markdown, []Host{h}, Options{})) {
		if len(r) != 9 || strings.Contains(r[0], "GPU") || strings.HasPrefix(r[0], "-") {
			continue
		}
		first := strings.Fields(strings.TrimSpace(r[0]))[0]
		lo, hi, _ := strings.Cut(first, "-")
		if hi == "" {
			hi = lo
		}
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		for i := a; i <= b; i++ {
			g := byIndex[i]
			for k, want := range []*int64{g.Used, g.Reserved, g.Free, g.Total} {
				if got := strings.TrimSpace(r[2+k]); got != opt(want) {
					t.Errorf("GPU %d's %s is %s in the Markdown table, %s in the JSON", i, diagnose.MemoryHeads[k], got, opt(want))
				}
			}
		}
	}
}

// reconcilePrometheus checks the memory gauges against the JSON's figures.
func reconcilePrometheus(t *testing.T, h Host, gpus []rGPU) {
	t.Helper()
	prom := render(t, Prometheus, []Host{h}, Options{})
	series := map[string]string{}
	for _, l := range strings.Split(prom, "\n") {
		if name, v, ok := strings.Cut(l, " "); ok && !strings.HasPrefix(l, "#") {
			series[name] = v
		}
	}
	for _, g := range gpus {
		for _, c := range []struct {
			name string
			mib  *int64
		}{{"total", g.Total}, {"used", g.Used}, {"reserved", g.Reserved}, {"free", g.Free}, {"processes", &g.ProcMiB}} {
			key := ""
			for k := range series {
				if strings.HasPrefix(k, "gputriage_gpu_memory_"+c.name+"_bytes{") && strings.Contains(k, `gpu="`+strconv.Itoa(g.Index)+`"`) {
					key = k
				}
			}
			switch {
			case c.mib == nil && key != "":
				t.Errorf("GPU %d: %s unknown, yet %s", g.Index, c.name, key)
			case c.mib != nil && series[key] != strconv.FormatInt(*c.mib<<20, 10):
				t.Errorf("GPU %d: %s is %d MiB, the gauge %q", g.Index, c.name, *c.mib, series[key])
			}
		}
	}
}

// gpuList reads "GPU 3", "GPUs 0-3, 5" back into indexes.
func gpuList(t *testing.T, s string) []int {
	t.Helper()
	var out []int
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(s, "GPUs "), "GPU "), ", ") {
		lo, hi, _ := strings.Cut(part, "-")
		if hi == "" {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil {
			t.Fatalf("GPU list %q", s)
		}
		for i := a; i <= b; i++ {
			out = append(out, i)
		}
	}
	return out
}

func show(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}

// reconcileHosts are every fixture, and every query-gpu listing of the shared corpus with the
// compute-apps listing of the same second where there is one (and the others alone, and the
// -q process listings).
func reconcileHosts(t *testing.T) []Host {
	var hosts []Host
	for _, pattern := range []string{"../fixtures/*.capture", "../fixtures/*/*.capture"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			hosts = append(hosts, captureHost(t, file))
		}
	}
	if len(hosts) < 6 {
		t.Fatalf("only %d fixtures found", len(hosts))
	}
	corpus := filepath.Join("..", "..", "shared", "corpus")
	gpuFiles, _ := filepath.Glob(filepath.Join(corpus, "query-gpu_*.csv"))
	appFiles, _ := filepath.Glob(filepath.Join(corpus, "compute-apps_*.csv"))
	if len(gpuFiles) == 0 {
		t.Logf("no corpus at %s: fixtures only", corpus)
		return hosts
	}
	paired := map[string]bool{}
	for _, gf := range gpuFiles {
		b, _ := os.ReadFile(gf)
		gpus, err := parse.ParseGPUCSV(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", gf, err)
		}
		s := &parse.Snapshot{GPUs: gpus}
		for _, af := range appFiles {
			ab, _ := os.ReadFile(af)
			if second(b) != "" && second(b) == second(ab) {
				if s.Apps, err = parse.ParseAppsCSV(bytes.NewReader(ab)); err != nil {
					t.Fatalf("%s: %v", af, err)
				}
				paired[af] = true
			}
		}
		hosts = append(hosts, Host{Name: filepath.Base(gf), Snapshot: s, Result: diagnose.Diagnose(s, reportTime)})
	}
	if len(paired) == 0 {
		t.Error("no compute-apps listing of the corpus pairs with a query-gpu listing")
	}
	for _, af := range appFiles {
		if !paired[af] {
			ab, _ := os.ReadFile(af)
			apps, err := parse.ParseAppsCSV(bytes.NewReader(ab))
			if err != nil {
				t.Fatalf("%s: %v", af, err)
			}
			s := &parse.Snapshot{Apps: apps}
			hosts = append(hosts, Host{Name: filepath.Base(af), Snapshot: s, Result: diagnose.Diagnose(s, reportTime)})
		}
	}
	// nvidia-smi -q's process listing: processes with memory, and no GPU figures to set it against.
	qFiles, _ := filepath.Glob(filepath.Join(corpus, "smi-q_*.txt"))
	for _, qf := range qFiles {
		b, _ := os.ReadFile(qf)
		s := &parse.Snapshot{SMIProcs: parse.ParseSMIPIDs(bytes.NewReader(b)), SMIProcsKnown: true}
		hosts = append(hosts, Host{Name: filepath.Base(qf), Snapshot: s, Result: diagnose.Diagnose(s, reportTime)})
	}
	return hosts
}

// second is the timestamp, to the second, of a listing's first row: "2026/07/14 09:00:44".
func second(b []byte) string {
	lines := strings.SplitN(string(b), "\n", 3)
	if len(lines) < 2 || len(lines[1]) < 19 || !regexp.MustCompile(`^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d`).MatchString(lines[1]) {
		return ""
	}
	return lines[1][:19]
}

// captureHost is a capture file replayed: parsed, diagnosed at its probe's time.
func captureHost(t *testing.T, file string) Host {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := parse.Parse(raw)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	now := reportTime
	if snap.Host.Time != nil {
		now = *snap.Host.Time
	}
	return Host{Name: file, Snapshot: snap, Result: diagnose.Diagnose(snap, now), Capture: raw}
}

func ct200FixtureHost(t *testing.T) Host { return captureHost(t, "../fixtures/ct200.capture") }

// TestMemoryOfFoldedTable: a process table cut to its bound (diagnose.Retain) leaves the
// memory figures whole: the processes nvidia-smi listed are still counted, so their memory is
// not called unattributed.
func TestMemoryOfFoldedTable(t *testing.T) {
	h := captureHost(t, "../fixtures/busy.capture")
	want := h.Result.Memory
	h.Result.Processes = h.Result.Processes[:2] // as Retain folds a table past its bound
	for i, m := range memoryOf(h) {
		if m.ListedMiB != want[i].ListedMiB || m.Listed != 1 || *m.UnattributedMiB != *want[i].UnattributedMiB || *m.UnattributedMiB > 10 {
			t.Errorf("GPU %d: %d processes, %d MiB, %d unattributed; want 1, %d, %d", i, m.Listed, m.ListedMiB, *m.UnattributedMiB, want[i].ListedMiB, *want[i].UnattributedMiB)
		}
	}
	text := render(t, Text, []Host{h}, Options{Width: 400})
	if !strings.Contains(text, "processes listed 587,160 MiB; not attributed to a listed process 80 MiB") {
		t.Errorf("the attribution line counts the table, not nvidia-smi's listing:\n%s", text)
	}
}
