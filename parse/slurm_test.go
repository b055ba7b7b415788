package parse

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// slurmRecording is a real `scontrol show job -d -o` output, recorded from Slurm 22.05 on
// this project's machines (testdata/slurm).
func slurmRecording(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "slurm", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// slurmSection is a slurm section body asking for one job per record, with scontrol's rc.
func slurmSection(tz string, jobs ...any) string {
	var b strings.Builder
	if tz != "" {
		fmt.Fprintf(&b, "tz %s\n", tz)
	}
	for i := 0; i+2 < len(jobs)+1; i += 3 {
		fmt.Fprintf(&b, "%s %d %s\n", jobs[i], jobs[i+1], base64.StdEncoding.EncodeToString([]byte(jobs[i+2].(string))))
	}
	return b.String()
}

func TestSlurmJobRecordings(t *testing.T) {
	utc := func(s string) *time.Time {
		v, err := time.Parse("2006-01-02T15:04:05", s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	root := 0
	// A job's comment is its user's text: one holding a newline and a forged per-node entry
	// after the real ones changes nothing.
	forgedComment := strings.Replace(slurmRecording(t, "forged-name-running.txt"), "JobName=x UserId=alice(1000) JobState=COMPLETED", "JobName=train llama; rm -rf /", 1)
	tests := []struct {
		name, id, text string
		rc             int
		want           SlurmJob
	}{
		{"running on gpu 0", "4", slurmRecording(t, "running-gpu0.txt"), 0, SlurmJob{
			Name: "escapee", State: "RUNNING", User: "root", UID: &root, StartTime: utc("2026-12-01T00:57:45"), NodeList: "node1",
			Alloc: []SlurmAlloc{{Nodes: "node1", GPUs: []int{0}, GPUsKnown: true}}}},
		// Completing: the GRES are released already.
		{"completing", "4", slurmRecording(t, "completing.txt"), 0, SlurmJob{
			Name: "escapee", State: "COMPLETING", User: "root", UID: &root, StartTime: utc("2026-12-01T00:57:45"), EndTime: utc("2026-12-01T00:57:53"), NodeList: "node1",
			Alloc: []SlurmAlloc{{Nodes: "node1", GPUsKnown: true}}}},
		{"cancelled", "4", slurmRecording(t, "cancelled.txt"), 0, SlurmJob{
			Name: "escapee", State: "CANCELLED", User: "root", UID: &root, StartTime: utc("2026-12-01T00:57:45"), EndTime: utc("2026-12-01T00:57:53"), NodeList: "node1",
			Alloc: []SlurmAlloc{{Nodes: "node1", GPUsKnown: true}}}},
		{"two nodes, one entry", "6", slurmRecording(t, "two-nodes.txt"), 0, SlurmJob{
			Name: "multi", State: "RUNNING", User: "root", UID: &root, StartTime: utc("2026-12-01T01:02:46"), NodeList: "node[1-2]",
			Alloc: []SlurmAlloc{{Nodes: "node[1-2]", GPUs: []int{0}, GPUsKnown: true}}}},
		{"pending", "7", slurmRecording(t, "pending.txt"), 0, SlurmJob{Name: "a b", State: "PENDING", User: "root", UID: &root}},
		{"purged", "4242", slurmRecording(t, "purged.txt"), 1, SlurmJob{Purged: true, Output: "slurm_load_jobs error: Invalid job id specified"}},
		{"controller down is not purged", "4242", "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n", 1, SlurmJob{
			Output: "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"}},
		// The job's name precedes the keys: one holding " UserId=" and " JobState=" would
		// make another user's finished job of a running one. Nothing but the id is read.
		{"name forging keys", "3", slurmRecording(t, "forged-name-running.txt"), 0, SlurmJob{Ambiguous: true}},
		{"name forging keys, cancelled", "3", slurmRecording(t, "forged-name-cancelled.txt"), 0, SlurmJob{Ambiguous: true}},
		{"comment forging an entry", "3", forgedComment, 0, SlurmJob{
			Name: "train llama; rm -rf /", State: "RUNNING", User: "root", UID: &root, StartTime: utc("2026-12-01T00:57:45"), NodeList: "node2",
			Alloc: []SlurmAlloc{{Nodes: "node2", GPUs: []int{0, 1}, GPUsKnown: true}}}},
		// The record must be the job asked for.
		{"another job's record", "5", slurmRecording(t, "running-gpu0.txt"), 0, SlurmJob{Ambiguous: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, contested, err := ParseSlurmJobs(strings.NewReader(slurmSection("+0000", tt.id, tt.rc, tt.text)))
			if err != nil || len(contested) > 0 || len(jobs) != 1 {
				t.Fatalf("err %v contested %v jobs %d", err, contested, len(jobs))
			}
			want := tt.want
			want.ID, want.Asked, want.ExitCode = tt.id, true, &tt.rc
			if got := fmt.Sprintf("%+v", showJob(jobs[0])); got != fmt.Sprintf("%+v", showJob(want)) {
				t.Errorf("got  %s\nwant %+v", got, showJob(want))
			}
		})
	}
}

// showJob is a job with its pointers shown by value, for comparing.
func showJob(j SlurmJob) string {
	p := func(t *time.Time) string {
		if t == nil {
			return "nil"
		}
		return t.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("id=%s asked=%v rc=%v purged=%v amb=%v name=%q state=%s user=%s uid=%v start=%s end=%s nodes=%s alloc=%+v out=%q",
		j.ID, j.Asked, showPtr(j.ExitCode), j.Purged, j.Ambiguous, j.Name, j.State, j.User, showPtr(j.UID), p(j.StartTime), p(j.EndTime), j.NodeList, j.Alloc, j.Output)
}

func TestSlurmJobsSection(t *testing.T) {
	running := slurmRecording(t, "running-gpu0.txt")
	t.Run("zone", func(t *testing.T) {
		jobs, _, _ := ParseSlurmJobs(strings.NewReader(slurmSection("+0130", "4", 0, running)))
		if got := jobs[0].StartTime; got == nil || !got.Equal(time.Date(2026, 11, 30, 23, 27, 45, 0, time.UTC)) {
			t.Errorf("start %v, want 23:27:45 UTC", got)
		}
	})
	t.Run("no zone, no times", func(t *testing.T) {
		jobs, _, _ := ParseSlurmJobs(strings.NewReader(slurmSection("", "4", 0, running)))
		if jobs[0].StartTime != nil || jobs[0].State != "RUNNING" {
			t.Errorf("got %s", showJob(jobs[0]))
		}
	})
	t.Run("not asked", func(t *testing.T) {
		jobs, _, err := ParseSlurmJobs(strings.NewReader("tz +0000\n4 -\n"))
		if err != nil || len(jobs) != 1 || jobs[0].Asked || jobs[0].State != "" {
			t.Errorf("got %v %v", jobs, err)
		}
	})
	t.Run("job twice", func(t *testing.T) {
		body := slurmSection("+0000", "4", 0, running) + slurmSection("", "4", 0, strings.Replace(running, "RUNNING", "CANCELLED", 1))
		jobs, contested, _ := ParseSlurmJobs(strings.NewReader(body))
		if len(jobs) != 0 || !slices.Equal(contested, []string{"job 4"}) {
			t.Errorf("jobs %v contested %v", jobs, contested)
		}
	})
	t.Run("bad lines", func(t *testing.T) {
		jobs, _, err := ParseSlurmJobs(strings.NewReader("tz +0000\nx 0 AAAA\n4 0 !!!\n4x 0\n"))
		if len(jobs) != 0 || err == nil {
			t.Errorf("jobs %v err %v", jobs, err)
		}
	})
}

func TestGRESGPUs(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"gpu:2(IDX:0-1)", []int{0, 1}, true},
		{"gpu:a100:1(IDX:0),gpu:v100:2(IDX:2-3)", []int{0, 2, 3}, true},
		{"gpu:3(IDX:0,2,5),mps:100(0/100,0/100)", nil, false},
		{"shard:2(2/8,0/8)", nil, false},
		{"mps:100(0/100)", nil, false},
		{"", nil, true},
		{"gpu:2", nil, false},
		{"gpu:2(IDX:N/A)", nil, false},
		{"gpu:2(IDX:0-99999999)", nil, false},
		{"gpu:2(IDX:3-1)", nil, false},
	}
	for _, tt := range tests {
		got, ok := gresGPUs(tt.in)
		if !slices.Equal(got, tt.want) || ok != tt.ok {
			t.Errorf("%q: %v %v, want %v %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestAncestors(t *testing.T) {
	anc, contested, err := ParseAncestors(strings.NewReader("300 200 1000 -\n200 1 0 4242.batch\n9 8 0 -\n9 7 0 -\nbad line\n5 1 0 42.x/y\n"))
	if err == nil {
		t.Error("bad lines: no error")
	}
	want := []Ancestor{{PID: 200, PPID: 1, UID: 0, SlurmJob: "4242", SlurmStep: "batch"}, {PID: 300, PPID: 200, UID: 1000}}
	if !slices.Equal(anc, want) || !slices.Equal(contested, []int{9}) {
		t.Errorf("got %+v %v", anc, contested)
	}
}

func TestSlurmTimeoutsLine(t *testing.T) {
	for _, tt := range []struct {
		body   string
		kw, us *time.Duration
		bad    bool
	}{
		{"tz +0000\n4 -\ntimeouts 7 75\n", dur(7 * time.Second), dur(75 * time.Second), false},
		{"tz +0000\n4 -\ntimeouts - 60\n", nil, dur(time.Minute), false},
		{"tz +0000\n4 -\ntimeouts - -\n", nil, nil, false},
		{"tz +0000\n4 -\n", nil, nil, false},
		{"tz +0000\ntimeouts 30x 60\n", nil, nil, true},
		{"tz +0000\ntimeouts 1234567890 60\n", nil, nil, true},
		{"tz +0000\ntimeouts 30\n", nil, nil, true},
		{"tz +0000\ntimeouts 30 60\ntimeouts 1 1\n", nil, nil, true},
	} {
		jobs, to, _, err := ParseSlurm(strings.NewReader(tt.body))
		if !eqDur(to.KillWait, tt.kw) || !eqDur(to.UnkillableStep, tt.us) || (err != nil) != tt.bad {
			t.Errorf("%q: KillWait %v, UnkillableStepTimeout %v, err %v; want %v, %v, bad %v", tt.body, to.KillWait, to.UnkillableStep, err, tt.kw, tt.us, tt.bad)
		}
		if strings.Contains(tt.body, "\n4 -") && len(jobs) != 1 {
			t.Errorf("%q: jobs %d", tt.body, len(jobs))
		}
	}
}

func FuzzSlurmJobs(f *testing.F) {
	f.Add([]byte(slurmSection("+0000", "4", 0, slurmRecording(f, "running-gpu0.txt"))))
	f.Add([]byte(slurmSection("-0530", "6", 0, slurmRecording(f, "two-nodes.txt"))))
	f.Add([]byte(slurmSection("+0000", "3", 0, slurmRecording(f, "forged-name-running.txt"))))
	f.Add([]byte("tz +0000\n4 -\n4242 1 " + base64.StdEncoding.EncodeToString([]byte(slurmRecording(f, "purged.txt"))) + "\n"))
	f.Add([]byte("tz +0000\n4 -\ntimeouts 7 75\n"))
	f.Add([]byte("tz +0000\ntimeouts - 999999999\ntimeouts 1 x\n"))
	f.Add([]byte("tz +0000\nnode node2 0 " + base64.StdEncoding.EncodeToString([]byte(slurmRecording(f, "node-gres.txt"))) + "\ngres gpu no task/cgroup\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		jobs, to, _, err := ParseSlurm(strings.NewReader(string(b)))
		checkErr(t, err)
		sec, _ := ParseSlurmSection(strings.NewReader(string(b)))
		if len(sec.Nodes) > maxSlurmNodes {
			t.Fatalf("%d nodes", len(sec.Nodes))
		}
		for _, n := range sec.Nodes {
			if !isNodeName(n.Name) || (n.Ambiguous || n.NotFound || !n.Asked) && n.GPUGres != nil || len(n.Gres) > maxNodeGres {
				t.Fatalf("bad node %+v", n)
			}
		}
		for _, d := range []*time.Duration{to.KillWait, to.UnkillableStep} {
			if d != nil && (*d < 0 || *d >= 1e9*time.Second) {
				t.Fatalf("timeout %v", *d)
			}
		}
		if len(jobs) > maxSlurmJobs {
			t.Fatalf("%d jobs", len(jobs))
		}
		for _, j := range jobs {
			if !isDigits(j.ID) || len(j.Alloc) > maxSlurmAllocs || j.Ambiguous && (j.State != "" || j.Alloc != nil) {
				t.Fatalf("bad job %s", showJob(j))
			}
			for _, a := range j.Alloc {
				if len(a.GPUs) > maxGRESIndex {
					t.Fatalf("%d gpus", len(a.GPUs))
				}
			}
		}
	})
}

func FuzzSlurmRecord(f *testing.F) {
	for _, n := range []string{"running-gpu0.txt", "two-nodes.txt", "forged-name-running.txt", "completing.txt", "pending.txt"} {
		f.Add([]byte(slurmRecording(f, n)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rc := 0
		j := SlurmJob{ID: "4", ExitCode: &rc}
		readSlurmJob(&j, b, time.UTC)
		if j.Ambiguous && j.State != "" {
			t.Fatalf("ambiguous yet read: %s", showJob(j))
		}
	})
}

func FuzzAncestors(f *testing.F) {
	f.Add([]byte("300 200 1000 -\n200 1 0 4242.batch\n"))
	f.Add([]byte("9 8 0 -\n9 7 0 -\n5 1 0 42.x/y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		anc, _, err := ParseAncestors(strings.NewReader(string(b)))
		checkErr(t, err)
		for i, a := range anc {
			if i > 0 && anc[i-1].PID >= a.PID || a.SlurmJob != "" && (!isDigits(a.SlurmJob) || !isStepName(a.SlurmStep)) {
				t.Fatalf("bad ancestors %+v", anc)
			}
		}
	})
}

func dur(d time.Duration) *time.Duration { return &d }

func eqDur(a, b *time.Duration) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
