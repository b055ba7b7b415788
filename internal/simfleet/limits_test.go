package simfleet

import (
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
)

// limitCase is one capture of TestLimitCost: the sections filled to the client's bound.
type limitCase struct {
	name string
	full []string
}

// limitCases are every section the client bounds, alone, then all of them together.
func limitCases(t testing.TB) []limitCase {
	names := parse.SectionNames()
	var cs []limitCase
	for _, n := range names {
		if !slices.Contains(FilledSections(), n) {
			t.Errorf("the client bounds section %s, which LimitCapture cannot fill: add a filler to internal/simfleet/limits.go", n)
			continue
		}
		cs = append(cs, limitCase{n, []string{n}})
	}
	return append(cs, limitCase{"all", names})
}

// formats are the report's renderers: text, Markdown, JSON and Prometheus.
var formats = []func(io.Writer, []report.Host, report.Options) error{report.Text, report.Markdown, report.JSON, report.Prometheus}

// triage parses, diagnoses and reports one capture in every format, as one host, and returns
// a bound on the most heap it held at once: the largest, over its stages, of the heap live
// when the stage began plus what the stage allocated. Both are the runtime's counts, which do
// not depend on the machine's speed or load, and the bound holds whenever the collector runs.
func triage(raw []byte) (h *report.Host, peak, total uint64) {
	h = &report.Host{Name: "limit", Capture: raw}
	stages := []func(){
		func() { h.Snapshot, _ = parse.Parse(raw) },
		func() { h.Result = diagnose.Diagnose(h.Snapshot, time.Unix(1796033513, 0)) },
		func() { diagnose.Retain(&h.Result) }, // as the CLI does before it reports
	}
	for _, f := range formats {
		stages = append(stages, func() { _ = f(io.Discard, []report.Host{*h}, report.Options{}) })
	}
	var m runtime.MemStats
	for _, stage := range stages {
		runtime.GC()
		runtime.ReadMemStats(&m)
		live, before := m.HeapAlloc, m.TotalAlloc
		stage()
		runtime.ReadMemStats(&m)
		peak = max(peak, live+m.TotalAlloc-before)
		total += m.TotalAlloc - before
	}
	return h, peak, total
}

// HostBudget is the most memory one host may hold while in flight: its raw capture, and what
// its parse, diagnosis and reports allocate (issue 17 §3).
const HostBudget = 64 << 20

// TestLimitCost: a host answering with every section at the client's own bound (the most
// records of each kind it may send), alone and all together, is parsed, diagnosed and
// reported in every format holding at most HostBudget (64 MiB) in flight, its capture
// included (the parser's caps on records, parse.RecordCap, keep it there), and in time
// linear in what it sent:
// at most 4 × 16 times what the same sections filled to 1/16 of their bound cost (quadratic
// work would cost 256 times). A generous absolute bound (60 s, where the goal is 10 s: see
// docs/performance.md for the figures) is only an alarm for a machine gone very slow.
func TestLimitCost(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	for _, c := range limitCases(t) {
		t.Run(c.name, func(t *testing.T) {
			raw := LimitCapture(c.full...)
			start := time.Now()
			h, peak, total := triage(raw)
			elapsed := time.Since(start)
			checkAtLimit(t, h.Snapshot, c.full)
			if len(h.Snapshot.GPUs) > parse.MaxGPUs {
				t.Errorf("%d GPUs kept, want at most %d", len(h.Snapshot.GPUs), parse.MaxGPUs)
			}
			small := LimitCaptureAt(16, c.full...)
			peer := time.Duration(1<<63 - 1)
			for range 3 {
				start := time.Now()
				triage(small)
				peer = min(peer, time.Since(start))
			}
			t.Logf("%d KiB sent: at most %d MiB held (%d MiB allocated in all), %s (1/16 of it: %s); %d findings",
				len(raw)>>10, peak>>20, total>>20, elapsed.Round(time.Millisecond), peer.Round(time.Millisecond), len(h.Result.Findings))
			if peak > HostBudget {
				t.Errorf("held up to %d MiB in flight, want at most %d MiB", peak>>20, HostBudget>>20)
			}
			if elapsed > 64*peer+testenv.Scale(time.Second) || elapsed > testenv.Scale(time.Minute) {
				t.Errorf("took %s, while 1/16 of it took %s: not linear", elapsed, peer)
			}
		})
	}
}

// checkAtLimit fails unless each full section reached the client's bound (within one record)
// and was read whole, or was cut at its cap on records (parse.RecordCap) and says so: the
// section reads as cut, with the records dropped counted in it and in a note.
func checkAtLimit(t *testing.T, s *parse.Snapshot, full []string) {
	t.Helper()
	for _, name := range full {
		i := slices.IndexFunc(s.Sections, func(x parse.SectionInfo) bool { return x.Name == name })
		if i < 0 {
			t.Errorf("section %s missing", name)
			continue
		}
		sec := s.Sections[i]
		if sec.Dropped > 0 {
			noted := slices.ContainsFunc(s.Notes, func(n parse.Note) bool {
				return n.Code == parse.NoteSectionTruncated && strings.HasPrefix(n.Message, "section "+name+" ") && strings.Contains(n.Message, strconv.Itoa(sec.Dropped)+" more dropped")
			})
			if !sec.Truncated || !noted || parse.RecordCap(name) == 0 {
				t.Errorf("section %s: %d records dropped, truncated %v, noted %v: a cap on records must read as a cut, and say so", name, sec.Dropped, sec.Truncated, noted)
			}
			continue
		}
		if sec.Truncated || sec.Bytes > sec.Limit || sec.Bytes < sec.Limit-1024 {
			t.Errorf("section %s: %d bytes of %d, truncated %v: not filled to its bound", name, sec.Bytes, sec.Limit, sec.Truncated)
		}
	}
}

// BenchmarkLimitCost times parsing, diagnosing and reporting (every format) one host whose
// sections are each at the client's bound: alone, for the costliest, and all together. Its
// figures are in docs/performance.md.
func BenchmarkLimitCost(b *testing.B) {
	for _, c := range []limitCase{{"fds", []string{"fds"}}, {"smi-apps", []string{"smi-apps"}}, {"shm-ls", []string{"shm-ls"}}, {"all", parse.SectionNames()}} {
		raw := LimitCapture(c.full...)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				s, _ := parse.Parse(raw)
				h := report.Host{Name: "limit", Snapshot: s, Result: diagnose.Diagnose(s, time.Unix(1796033513, 0))}
				diagnose.Retain(&h.Result)
				for _, f := range formats {
					_ = f(io.Discard, []report.Host{h}, report.Options{})
				}
			}
		})
	}
}
