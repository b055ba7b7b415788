package nodecheck

import (
	"fmt"
	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/snaptest"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
)

// idleFactsOf is what the gate would read on the host a capture was taken of: nvidia-smi's
// answers are the capture's own, /dev/shm's numbers and files df's and find's, the deleted
// /dev/shm files and the device fds those the probe saw.
func idleFactsOf(s *parse.Snapshot, perr error) IdleFacts {
	f := IdleFacts{SMI: s, ShmSizeBytes: s.Shm.SizeBytes, ShmUsedBytes: s.Shm.UsedBytes, ShmAvailBytes: s.Shm.AvailBytes,
		ShmListed: s.Shm.Listed && !s.Shm.Truncated}
	f.SMIUnparsed = perr != nil && strings.Contains(perr.Error(), "section smi-")
	for _, e := range s.Shm.Entries {
		if e.Type == 'f' {
			f.ShmFileBytes += e.Bytes
		}
	}
	described := map[int]*parse.Process{}
	for i := range s.Processes {
		p := &s.Processes[i]
		described[p.PID] = p
		for _, u := range p.Shm {
			if u.Deleted {
				f.DeletedShm = append(f.DeletedShm, IdleShmUse{PID: p.PID, Path: u.Path + " (deleted)"})
			}
		}
	}
	for _, d := range s.Holders {
		dev := IdleDevice{PID: d.PID, Device: d.Device}
		if p := described[d.PID]; p != nil {
			dev.Comm, dev.Argv, dev.Known = p.Comm, p.Argv, true
		}
		f.Devices = append(f.Devices, dev)
	}
	for _, n := range s.Notes {
		// A cut or forged capture has no counterpart in what the gate reads: the gate reads no
		// capture. Any other limit of the probe's view limits diagnose's as much as the gate's.
		switch n.Code {
		case parse.NoteCaptureTruncated, parse.NoteCaptureTampered:
			f.Unseen = append(f.Unseen, n.Code)
		}
	}
	return f
}

// idleScopes are the scopes node-check judges: the whole node, and jobs' GPUs named every
// way Slurm names them, a GPU the host lacks and a malformed list among them.
var idleScopes = []IdleScope{{}, {Job: true, SlurmGPUs: "0"}, {Job: true, SlurmGPUs: "0,1"}, {Job: true, SlurmGPUs: "7"},
	{Job: true, SlurmGPUs: "9"}, {Job: true, CUDAVisible: "1"}, {Job: true, CUDAVisible: "x"}}

// checkIdleGate is the property: whenever the gate proves a snapshot clean for a scope,
// Check on the full diagnosis reports nothing there. It returns how many scopes passed.
func checkIdleGate(t *testing.T, name string, s *parse.Snapshot, perr error) int {
	t.Helper()
	if perr != nil {
		s.Notes = append(s.Notes, parse.Note{Code: "parse-error", Message: perr.Error()}) // as node-check does
	}
	f := idleFactsOf(s, perr)
	r := diagnose.Diagnose(s, time.Unix(1796080492, 0))
	passed := 0
	for _, sc := range idleScopes {
		if len(IdleGate(f, sc)) > 0 {
			continue
		}
		passed++
		scope := Scope{}
		if sc.Job {
			gpus, missing, err := JobGPUs(s, sc.SlurmGPUs, sc.CUDAVisible)
			if err != nil {
				t.Errorf("%s, scope %+v: the gate passed a GPU list node-check refuses: %v", name, sc, err)
				continue
			}
			scope = Scope{GPUs: gpus, Missing: missing, RequireFree: true}
		}
		if ps := Check(r, scope); len(ps) > 0 {
			t.Errorf("%s, scope %+v: the gate proved the node clean, Check reports %s: %s", name, sc, ps[0].Code, ps[0].Title)
		}
	}
	return passed
}

// idleCaptures are every capture to hand: the fixtures; the probe's captures of the node
// boxes of cmd/gputriage's TestNodeCheckIdleGate (testdata/idle: nvidia-persistenced and a
// stopped process holding a GPU's device, a compute snaptest.App, ghost memory, /dev/shm filled by a
// deleted file still mapped; GPUTRIAGE_IDLE_CAPTURES=DIR writes them again); and
// ../shared/corpus's nvidia-smi outputs wrapped into the clean fixture in place of its own.
func idleCaptures(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	for _, glob := range []string{"../fixtures/*.capture", "../fixtures/v1/*.capture", "testdata/idle/*.capture"} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = b
		}
	}
	clean := out["../fixtures/clean.capture"]
	if clean == nil {
		t.Fatal("fixtures/clean.capture is missing")
	}
	corpus, _ := filepath.Glob("../../shared/corpus/*")
	for _, p := range corpus {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		base := filepath.Base(p)
		switch {
		case strings.HasPrefix(base, "query-gpu_"):
			out[p] = replaceSection(clean, "smi-gpu", b, 0)
		case strings.HasPrefix(base, "compute-apps_"):
			out[p] = replaceSection(clean, "smi-apps", b, 0)
		case strings.HasPrefix(base, "smi-error_"):
			out[p] = replaceSection(clean, "smi-gpu", b, 9)
			out[p+" (apps)"] = replaceSection(clean, "smi-apps", b, 9)
		}
	}
	return out
}

// replaceSection puts body, with exit status rc, in place of a text section of a capture.
func replaceSection(capture []byte, name string, body []byte, rc int) []byte {
	c := string(capture)
	nonce := strings.TrimPrefix(strings.SplitN(c, "\n", 2)[0], "gputriage-capture v2 nonce=")
	begin := fmt.Sprintf("@@gputriage %s begin %s limit=", nonce, name)
	end := fmt.Sprintf("@@gputriage %s end %s\n", nonce, name)
	i, j := strings.Index(c, begin), strings.Index(c, end)
	if i < 0 || j < i {
		return capture
	}
	sec := fmt.Sprintf("%s1048576\n%s\n@@gputriage %s rc=%d\n", begin, strings.TrimRight(string(body), "\n"), nonce, rc)
	return []byte(c[:i] + sec + c[j:])
}

// TestIdleGateNeverPassesAProblem: on every capture to hand and thousands of variants of
// each (every GPU's used memory swept around the snaptest.Idle threshold, compute apps added,
// /dev/shm's use swept, files and deleted files added, device snaptest.Holders of every kind,
// nvidia-smi failing), the gate never proves clean a node Check has a problem with; and
// it does prove clean the snaptest.Idle ones, so the property is not vacuous.
func TestIdleGateNeverPassesAProblem(t *testing.T) {
	passed, total := 0, 0
	for name, raw := range idleCaptures(t) {
		s, err := parse.Parse(raw)
		passed += checkIdleGate(t, name, s, err)
		rng := rand.New(rand.NewPCG(uint64(len(raw)), 1))
		for i := 0; i < 400; i++ {
			s, err := parse.Parse(raw)
			var did []string
			for n := 1 + rng.IntN(3); n > 0; n-- {
				did = append(did, mutateIdle(s, rng))
			}
			passed += checkIdleGate(t, fmt.Sprintf("%s %v", name, did), s, err)
			total += len(idleScopes)
		}
	}
	t.Logf("the gate passed %d of %d variant scopes", passed, total)
	if passed < total/50 {
		t.Errorf("the gate passed only %d of %d variant scopes: the property is nearly vacuous", passed, total)
	}
	if t.Failed() {
		return
	}
	// The snaptest.Idle captures pass; those of nodes the gate must send to the probe do not.
	for name, want := range map[string]bool{"../fixtures/clean.capture": true, "testdata/idle/idle.capture": true,
		"testdata/idle/a-stopped-process-holding-GPU-0s-device.capture": false, "testdata/idle/ghost-memory.capture": false,
		"testdata/idle/devshm-filled-by-a-deleted-file-still-mapped.capture": false, "testdata/idle/a-compute-app.capture": false} {
		s, err := parse.Parse(idleCaptures(t)[name])
		if d := IdleGate(idleFactsOf(s, err), IdleScope{}); (len(d) == 0) != want {
			t.Errorf("%s: the gate's doubts %v; want it to pass: %v", name, d, want)
		}
	}
}

// mutateIdle changes one thing of s that a finding may rest on, and says what.
func mutateIdle(s *parse.Snapshot, rng *rand.Rand) string {
	gi := -1
	if len(s.GPUs) > 0 {
		gi = rng.IntN(len(s.GPUs))
	}
	switch k := rng.IntN(11); {
	case k <= 2 && gi >= 0:
		return mutateGPUMemory(s, gi, rng)
	case k == 3 && gi >= 0:
		pid := 4000 + rng.IntN(3)
		s.Apps = append(s.Apps, parse.ComputeApp{PID: pid, GPUUUID: s.GPUs[gi].UUID, UsedMiB: snaptest.I64(int64(rng.IntN(3) * 200))})
		if rng.IntN(2) == 0 {
			addProcess(s, pid, "python3", rng)
		}
		return fmt.Sprintf("snaptest.App PID %d on GPU %d", pid, gi)
	case k == 4:
		return mutateShmUse(s, rng)
	case k == 5:
		var held int64 // what the files already there hold: the sweep is of the sum
		for _, e := range s.Shm.Entries {
			if e.Type == 'f' {
				held += e.Bytes
			}
		}
		// A file has no negative size: past the bound already, the sweep's first two are 0.
		size := max(0, []int64{64*mib - held - 1, 64*mib - held, 64 * mib, gib - 1, gib, 3 * gib}[rng.IntN(6)])
		name := []string{"/dev/shm/nccl-x", "/dev/shm/data", "/dev/shm/d/torch_1", "/dev/shm/d/w"}[rng.IntN(4)]
		addShmFile(s, name, size)
		return fmt.Sprintf("shm file %s %d", name, size)
	case k == 6:
		pid := 5000 + rng.IntN(3)
		p := addProcess(s, pid, []string{"python3", "nvidia-persiste", "nv-hostengine"}[rng.IntN(3)], rng)
		dev := []string{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia7"}[rng.IntN(5)]
		s.Holders = append(s.Holders, parse.DeviceHolder{PID: pid, FD: 3 + rng.IntN(5), Device: dev})
		return fmt.Sprintf("holder %d (%s, %s) of %s", pid, p.Comm, p.State, dev)
	case k == 7:
		pid := 6000 + rng.IntN(3)
		p := addProcess(s, pid, "python3", rng)
		path := []string{"/dev/shm/w/model.safetensors", "/dev/shm/sem.x", "/dev/shm/nccl-1", "/dev/shm/blob"}[rng.IntN(4)]
		p.Shm = append(p.Shm, parse.ShmUse{Path: path, Deleted: rng.IntN(4) > 0, Mapped: true, Bytes: snaptest.I64(4 * mib)})
		return fmt.Sprintf("PID %d maps %s", pid, path)
	case k == 8:
		return mutateSMI(s, rng)
	case k == 9 && gi >= 0:
		g := &s.GPUs[gi]
		g.MIGMode = []string{"Enabled", "Disabled", ""}[rng.IntN(3)]
		return fmt.Sprintf("GPU %d MIG %q", gi, g.MIGMode)
	default:
		s.Host.UID = snaptest.IP(rng.IntN(2) * 1000)
		return fmt.Sprintf("uid %d", *s.Host.UID)
	}
}

// addShmFile lists a file under /dev/shm, with its directory, as the probe's find would.
func addShmFile(s *parse.Snapshot, name string, size int64) {
	if dir := filepath.Dir(name); dir != "/dev/shm" {
		s.Shm.Entries = append(s.Shm.Entries, parse.ShmEntry{Path: dir, Type: 'd', Bytes: 60})
	}
	s.Shm.Entries = append(s.Shm.Entries, parse.ShmEntry{Path: name, Type: 'f', Bytes: size})
	for i := range s.Shm.Entries {
		e := &s.Shm.Entries[i]
		e.TreeBytes = 0
		for _, f := range s.Shm.Entries {
			if f.Type == 'f' && (f.Path == e.Path || strings.HasPrefix(f.Path, e.Path+"/")) {
				e.TreeBytes += f.Bytes
			}
		}
	}
}

// mutateGPUMemory sets a GPU's used (and free) memory around the snaptest.Idle threshold, or its
// total or reserved memory off its siblings'.
func mutateGPUMemory(s *parse.Snapshot, gi int, rng *rand.Rand) string {
	g := &s.GPUs[gi]
	total := int64(81559)
	if g.MemoryTotalMiB != nil {
		total = *g.MemoryTotalMiB
	}
	used := []int64{0, 1, 299, 300, 301, 1023, 1024, 1025, total / 20, total / 10, total / 2, total}[rng.IntN(12)]
	switch rng.IntN(6) {
	case 0:
		g.MemoryUsedMiB = nil
		return fmt.Sprintf("GPU %d used unknown", gi)
	case 1:
		g.MemoryTotalMiB = snaptest.I64(total - total/[]int64{50, 20, 10}[rng.IntN(3)])
		return fmt.Sprintf("GPU %d total %d", gi, *g.MemoryTotalMiB)
	case 2:
		g.MemoryReservedMiB = snaptest.I64(used)
	case 3: // free memory nvidia-smi does not account for in used (another partition's, say)
		g.MemoryFreeMiB = snaptest.I64(total * []int64{80, 89, 90, 95}[rng.IntN(4)] / 100)
		return fmt.Sprintf("GPU %d free %d", gi, *g.MemoryFreeMiB)
	}
	reserved := int64(0)
	if g.MemoryReservedMiB != nil {
		reserved = *g.MemoryReservedMiB
	}
	g.MemoryUsedMiB, g.MemoryFreeMiB = snaptest.I64(used), snaptest.I64(max(total-used-reserved, 0))
	return fmt.Sprintf("GPU %d used %d", gi, used)
}

// mutateShmUse sets /dev/shm's size, use and free space around shm-full's thresholds.
func mutateShmUse(s *parse.Snapshot, rng *rand.Rand) string {
	size := []int64{64 * mib, gib, 8 * gib, 512 * gib}[rng.IntN(4)]
	pct := []int64{0, 50, 89, 90, 97, 98, 100}[rng.IntN(7)]
	used := size * pct / 100
	avail := size - used
	if rng.IntN(3) == 0 {
		avail = []int64{gib - 1, gib, gib + 1}[rng.IntN(3)]
	}
	s.Shm.SizeBytes, s.Shm.UsedBytes, s.Shm.AvailBytes = snaptest.I64(size), snaptest.I64(used), snaptest.I64(avail)
	if rng.IntN(5) == 0 {
		s.Shm.SizeBytes = nil
	}
	return fmt.Sprintf("shm %d/%d avail %d", used, size, avail)
}

// mutateSMI makes nvidia-smi fail, cut or refuse fields, or its snaptest.App query fail.
func mutateSMI(s *parse.Snapshot, rng *rand.Rand) string {
	kinds := []parse.SMIFailureKind{parse.SMIMissing, parse.SMINoDriver, parse.SMITimeout, parse.SMINoDevices, parse.SMIOther}
	switch rng.IntN(4) {
	case 0:
		k := kinds[rng.IntN(len(kinds))]
		s.SMI.Failure = &parse.SMIFailure{Kind: k, Message: "failed", ExitCode: snaptest.IP(9)}
		return "smi failed " + string(k)
	case 1:
		for i := range s.Sections {
			if s.Sections[i].Name == "smi-apps" {
				s.Sections[i].ExitCode = snaptest.IP([]int{9, 124, 0}[rng.IntN(3)])
			}
		}
		return "apps rc"
	case 2:
		if rng.IntN(3) == 0 { // the snaptest.App query not run, as after the GPU query timed out
			s.Sections = slices.DeleteFunc(s.Sections, func(sec parse.SectionInfo) bool { return sec.Name == "smi-apps" })
			return "no snaptest.App query"
		}
		i := rng.IntN(len(s.Sections) + 1)
		if i < len(s.Sections) {
			s.Sections[i].Truncated = true
			return "cut " + s.Sections[i].Name
		}
		s.Truncated = true
		return "capture cut"
	default:
		s.SMI.FieldFallback = true
		return "field fallback"
	}
}

// addProcess describes a process in s (or returns the one described) in a random state: a
// zombie, stopped, an orphan of a login session, a much older one.
func addProcess(s *parse.Snapshot, pid int, comm string, rng *rand.Rand) *parse.Process {
	for i := range s.Processes {
		if s.Processes[i].PID == pid {
			return &s.Processes[i]
		}
	}
	state := []string{"S", "Z", "T", "R"}[rng.IntN(4)]
	age := []time.Duration{time.Minute, 48 * time.Hour}[rng.IntN(2)]
	p := snaptest.Proc(pid, []int{1, 77}[rng.IntN(2)], state, 1000, "alice", age, comm, "-m", "vllm.entrypoints.openai.api_server",
		"--model", "/models/gone")
	p.Comm = comm
	p.ModelPaths = []parse.PathCheck{{Path: "/models/gone", Exists: rng.IntN(2) == 0}}
	if rng.IntN(2) == 0 {
		p.Cgroup = snaptest.SessionCgroup(3)
	}
	s.Processes = append(s.Processes, p)
	return &s.Processes[len(s.Processes)-1]
}

// FuzzIdleGate: on any capture, and any variant of it, the gate never proves clean a node
// Check has a problem with.
func FuzzIdleGate(f *testing.F) {
	for _, raw := range idleCaptures(f) {
		f.Add(raw, uint64(1), uint8(0))
		f.Add(raw, uint64(7), uint8(2))
	}
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64, n uint8) {
		s, err := parse.Parse(raw)
		if s == nil {
			return
		}
		rng := rand.New(rand.NewPCG(seed, 2))
		for i := 0; i < int(n%4); i++ {
			mutateIdle(s, rng)
		}
		checkIdleGate(t, "fuzz", s, err)
	})
}

// An snaptest.Idle node whose compute-snaptest.App list reached the client's cap on records is not passed: the
// apps past the cap are unseen, and the doubt says it was the cap, not a byte bound.
func TestIdleGateDoubtsACappedAppList(t *testing.T) {
	s, err := parse.Parse(idleCaptures(t)["testdata/idle/idle.capture"])
	if d := IdleGate(idleFactsOf(s, err), IdleScope{}); len(d) != 0 {
		t.Fatalf("the snaptest.Idle capture has doubts %v", d)
	}
	i := slices.IndexFunc(s.Sections, func(x parse.SectionInfo) bool { return x.Name == "smi-apps" })
	if i < 0 {
		t.Fatal("no smi-apps section")
	}
	s.Sections[i].Truncated, s.Sections[i].Dropped = true, 3
	d := IdleGate(idleFactsOf(s, err), IdleScope{})
	if !slices.ContainsFunc(d, func(x IdleDoubt) bool {
		return x.Code == "smi" && strings.Contains(x.Detail, "cap on records (3 more dropped)")
	}) {
		t.Errorf("doubts %v: want one saying the snaptest.App list reached the cap on records", d)
	}
}

const (
	mib = int64(1) << 20
	gib = int64(1) << 30
)
