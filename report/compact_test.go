package report

import (
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
)

func TestFoldPaths(t *testing.T) {
	series := func(format string, nums ...string) []string {
		var out []string
		for _, n := range nums {
			out = append(out, strings.Replace(format, "N", n, 1))
		}
		return out
	}
	const m = "/dev/shm/Qwen3.6-27B/model-N-of-00012.safetensors"
	all := series(m, "00001", "00002", "00003", "00004", "00005", "00006", "00007", "00008", "00009", "00010", "00011", "00012")
	tests := []struct {
		name  string
		paths []string
		want  []string
	}{
		{"twelve shards", all, []string{"/dev/shm/Qwen3.6-27B/model-000{01..12}-of-00012.safetensors"}},
		{"with a gap", series(m, "00001", "00002", "00003", "00005", "00007", "00008", "00009"),
			[]string{"/dev/shm/Qwen3.6-27B/model-0000{1..3,5,7..9}-of-00012.safetensors"}},
		{"two are listed", series(m, "00001", "00002"), series(m, "00001", "00002")},
		// Numbers of different widths are no series: "{8..11}" would not say how they pad.
		{"widths differ", series("/dev/shm/seg.N", "8", "9", "10", "11"), series("/dev/shm/seg.N", "8", "9", "10", "11")},
		{"unpadded, one width", series("/dev/shm/seg.N", "10", "11", "12"), []string{"/dev/shm/seg.1{0..2}"}},
		{"other files kept apart", append(series("/dev/shm/a-N", "1", "2", "3"), "/dev/shm/lock", "/dev/shm/a-9x"),
			[]string{"/dev/shm/a-{1..3}", "/dev/shm/lock", "/dev/shm/a-9x"}},
		{"host text sanitized", []string{"/dev/shm/\x1b[31mx"}, []string{`/dev/shm/\x1b[31mx`}},
		// A name with braces of its own is one file: it must not read as a folded series, nor
		// make a real series read as more files than there are.
		{"a name that looks folded", []string{"/dev/shm/model-{0001..0012}.safetensors"},
			[]string{`/dev/shm/model-\{0001..0012\}.safetensors`}},
		{"braces around a real series", series("/dev/shm/x{N}", "1", "2", "3"), []string{`/dev/shm/x\{{1..3}\}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := foldPaths(tt.paths)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("foldPaths = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestShmLines(t *testing.T) {
	mib4 := int64(4 << 20)
	var files []diagnose.ShmFile
	for i := 1; i <= 12; i++ {
		files = append(files, diagnose.ShmFile{Path: "/dev/shm/Qwen3.6-27B/model-" + pad5(i) + "-of-00012.safetensors",
			Bytes: &mib4, Deleted: true, Mapped: true, Open: true, PIDs: []int{20629}})
	}
	odd := int64(1 << 30)
	files = append(files, diagnose.ShmFile{Path: "/dev/shm/torch_123", Bytes: &odd, Mapped: true})
	got := shmLines(files)
	want := []string{
		"/dev/shm/Qwen3.6-27B/model-000{01..12}-of-00012.safetensors (deleted, mapped and open), 4 MiB each, 48 MiB in all",
		"/dev/shm/torch_123 (mapped), 1 GiB",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("shmLines =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func pad5(i int) string {
	s := "0000" + string(rune('0'+i/10)) + string(rune('0'+i%10))
	return s[len(s)-5:]
}

// typedIncident is ct200 as the facts branch describes it: typed reasons, actions and files.
func typedIncident() Host {
	h := incidentHost()
	fs := h.Result.Findings
	mib4 := int64(4 << 20)
	var shm []diagnose.ShmFile
	var paths []string
	for i := 1; i <= 12; i++ {
		p := "/dev/shm/Qwen3.6-27B/model-" + pad5(i) + "-of-00012.safetensors"
		paths = append(paths, p)
		shm = append(shm, diagnose.ShmFile{Path: p, Bytes: &mib4, Deleted: true, Mapped: true, Open: true, PIDs: []int{20629}})
	}
	kill := diagnose.Action{Kind: diagnose.ActionKill, Target: "20629", PIDs: []int{20629},
		Steps: []diagnose.Command{{Line: "kill 20629"}, {Line: "sleep 30; kill -0 20629 2>/dev/null && kill -9 20629"}}}
	gpu := kill
	gpu.Frees = diagnose.Impact{GPUMiB: map[int]int64{0: 55286}}
	ram := kill
	ram.Frees = diagnose.Impact{ShmBytes: 48 << 20}
	fs[0].Reasons = []diagnose.Reason{
		{Code: diagnose.ReasonShmDeleted, Strong: true, PID: 20629, Paths: paths},
		{Code: diagnose.ReasonModelPathGone, Strong: true, PID: 20629, Paths: []string{"/dev/shm/Qwen3.6-27B"}},
		{Code: diagnose.ReasonOrphaned, PID: 20629},
	}
	fs[0].Actions = []diagnose.Action{gpu}
	fs[0].Checks = []diagnose.Command{{Line: "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"}}
	fs[1].Shm, fs[1].Actions = shm, []diagnose.Action{ram}
	fs[1].Checks = []diagnose.Command{{Line: "df -h /dev/shm"}, {Line: "nvidia-smi --query-compute-apps=pid,used_memory --format=csv"}}
	// A cheaper fix of another finding, listed first: "what to do" orders by what frees most.
	unit := diagnose.Finding{Code: "stray-thing", Severity: diagnose.Critical, Title: "a stray unit",
		Actions: []diagnose.Action{{Kind: diagnose.ActionStopUnit, Target: "x.service",
			Frees: diagnose.Impact{GPUMiB: map[int]int64{1: 100}},
			Steps: []diagnose.Command{{Line: "systemctl stop x.service", Note: "stops every process of the unit"}}}}}
	h.Result.Findings = append([]diagnose.Finding{unit}, fs...)
	return h
}

// TestWhatToDo: the same action suggested by two findings is one item listing both, with what
// each frees; items are ordered by GPU memory freed; a note is prose before its command; the
// checks are said once.
func TestWhatToDo(t *testing.T) {
	out := render(t, Text, []Host{typedIncident()}, Options{Width: 100})
	_, todo, ok := strings.Cut(out, "  what to do\n")
	if !ok {
		t.Fatalf("no what to do:\n%s", out)
	}
	todo, _, _ = strings.Cut(todo, "\n\n")
	want := `  1. Stop PID 20629 (sglang.launch_server, ubuntu): frees 55,286 MiB on GPU 0 and 48 MiB of
     /dev/shm; resolves leftover-process, shm-deleted-mapped
       kill 20629
       sleep 30; kill -0 20629 2>/dev/null && kill -9 20629
  2. Stop x.service: frees 100 MiB on GPU 1; resolves stray-thing
     stops every process of the unit:
       systemctl stop x.service
  then check:
       nvidia-smi --query-compute-apps=pid,used_memory --format=csv
       df -h /dev/shm`
	if todo != want {
		t.Errorf("what to do:\n%s\nwant:\n%s", todo, want)
	}
	if strings.Count(out, "kill 20629\n") != 1 {
		t.Errorf("the shared fix is not shown once:\n%s", out)
	}
}

// TestWhatToDoResolvesOnlyAlone: an item says it resolves a finding only when it does so by
// itself; with another action of that finding needed too, or healthy work that keeps an
// imbalanced GPU short, it only helps with it.
func TestWhatToDoResolvesOnlyAlone(t *testing.T) {
	stop := func(pid string) diagnose.Action {
		return diagnose.Action{Kind: diagnose.ActionKill, Target: pid, Steps: []diagnose.Command{{Line: "kill " + pid}}}
	}
	rm := func(p string) diagnose.Action {
		return diagnose.Action{Kind: diagnose.ActionRemoveFiles, Target: p, Steps: []diagnose.Command{{Line: "rm -rf -- " + p}}}
	}
	narrow := diagnose.Action{Kind: diagnose.ActionNarrowLaunch, Target: "CUDA_VISIBLE_DEVICES=0,2"}
	tests := []struct {
		name string
		f    diagnose.Finding
		want []string // each item's resolves clause, in order
	}{
		{"one action", diagnose.Finding{Code: "leftover-process", Actions: []diagnose.Action{stop("7")}},
			[]string{"resolves leftover-process"}},
		{"balanced once stopped", diagnose.Finding{Code: "memory-imbalance", Imbalance: &diagnose.Imbalance{BalancedAfter: true},
			Actions: []diagnose.Action{stop("7"), narrow}}, []string{"resolves memory-imbalance"}},
		{"healthy work keeps a GPU short", diagnose.Finding{Code: "memory-imbalance", Imbalance: &diagnose.Imbalance{},
			Actions: []diagnose.Action{stop("7"), narrow}}, []string{"helps with memory-imbalance"}},
		{"two leftovers", diagnose.Finding{Code: "memory-imbalance", Imbalance: &diagnose.Imbalance{BalancedAfter: true},
			Actions: []diagnose.Action{stop("7"), stop("8")}}, []string{"helps with memory-imbalance", "helps with memory-imbalance"}},
		{"two stale files", diagnose.Finding{Code: "shm-stale", Actions: []diagnose.Action{rm("/dev/shm/a"), rm("/dev/shm/b")}},
			[]string{"helps with shm-stale", "helps with shm-stale"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, it := range hostTodo([]diagnose.Finding{tt.f}).items {
				if it.kind != diagnose.ActionNarrowLaunch {
					got = append(got, diagnose.ResolvesWords(it.codes, it.partly))
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCompactFinding: a finding shows its strong reasons once, as short bullets, and its files
// folded; weak reasons, the explanation and the evidence only with -v.
func TestCompactFinding(t *testing.T) {
	h := typedIncident()
	out := render(t, Text, []Host{h}, Options{Width: 140})
	for _, want := range []string{
		"- 12 files it maps from /dev/shm were deleted (see shm-deleted-mapped)\n",
		"- its model path /dev/shm/Qwen3.6-27B no longer exists\n",
		"- /dev/shm/Qwen3.6-27B/model-000{01..12}-of-00012.safetensors (deleted, mapped and open), 4 MiB each, 48 MiB in all\n",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("compact report does not show once %q:\n%s", want, out)
		}
	}
	for _, hidden := range []string{"orphaned", "looks abandoned: its systemd unit", "ActiveState=inactive"} {
		if strings.Contains(out, hidden) {
			t.Errorf("compact report shows %q, detail for -v:\n%s", hidden, out)
		}
	}
	v := render(t, Text, []Host{h}, Options{Width: 140, Verbose: true})
	for _, want := range []string{"orphaned: parent PID 1", "looks abandoned: its systemd unit", "ActiveState=inactive"} {
		if !strings.Contains(v, want) {
			t.Errorf("-v lacks %q:\n%s", want, v)
		}
	}
	md := render(t, Markdown, []Host{h}, Options{})
	_, details, _ := strings.Cut(md, "<details><summary>Details</summary>")
	details, _, _ = strings.Cut(details, "</details>")
	if !strings.Contains(details, "ActiveState=inactive") || !strings.Contains(details, "weak reason: orphaned") {
		t.Errorf("Markdown does not keep the detail in <details>:\n%s", md)
	}
}

// TestWrapKeepsUnits: wrapping at any width never parts a number from its unit, the factors of
// a product, or a GPU or PID from its number.
func TestWrapKeepsUnits(t *testing.T) {
	text := "PID 20629 holds 55,286 MiB on GPU 0 for 2h13m while 12 files of 4 MiB each wait: 41,958 < 0.9 × 97,252 = 87,527 MiB → fails (90 %)"
	whole := []string{"PID 20629", "55,286 MiB", "GPU 0", "4 MiB", "0.9 × 97,252", "87,527 MiB", "2h13m", "90 %"}
	for width := 12; width <= 80; width++ {
		ls := wrapWords(text, width, width)
		joined := strings.Join(ls, "\n")
		for _, w := range whole {
			if !strings.Contains(joined, w) {
				t.Errorf("width %d parts %q:\n%s", width, w, joined)
			}
		}
		for _, l := range ls {
			if len([]rune(l)) > width {
				t.Errorf("width %d: line %q too wide", width, l)
			}
		}
	}
}
