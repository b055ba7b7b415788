package parse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// smiPID is what a test expects of one SMIProcess; mib -1 for unknown, gi/ci -1 for N/A.
type smiPID struct {
	pid      int
	bus, typ string
	mib      int64
	gi, ci   int
}

func (w smiPID) check(t *testing.T, got SMIProcess) {
	t.Helper()
	mib, gi, ci := int64(-1), -1, -1
	if got.UsedMiB != nil {
		mib = *got.UsedMiB
	}
	if got.GPUInstance != nil {
		gi = *got.GPUInstance
	}
	if got.ComputeInstance != nil {
		ci = *got.ComputeInstance
	}
	g := smiPID{got.PID, got.BusID, got.Type, mib, gi, ci}
	if g != w {
		t.Errorf("got %+v, want %+v", g, w)
	}
}

func checkSMIPIDs(t *testing.T, got []SMIProcess, want []smiPID) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d processes, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		want[i].check(t, got[i])
	}
}

// The corpus's nvidia-smi -q report (535, eight RTX 4090s, "Unknown Error" fields): three
// compute processes under three GPUs; "Processes : None" elsewhere; the other sections skipped.
func TestParseSMIPIDsCorpus(t *testing.T) {
	files := corpusFiles(t, "smi-q_*.txt")
	b, ok := files["smi-q_8x-rtx4090_535_unknown-error_processes.txt"]
	if !ok || len(files) != 1 {
		t.Fatalf("smi-q corpus files: %d; a new one needs its case here", len(files))
	}
	checkSMIPIDs(t, ParseSMIPIDs(bytes.NewReader(b)), []smiPID{
		{2180559, "00000000:01:00.0", "C", 22072, -1, -1},
		{2163744, "00000000:61:00.0", "C", 22198, -1, -1},
		{2177496, "00000000:E1:00.0", "C", 19884, -1, -1},
	})
	// The corpus's other process listings are other formats (the default table, XML): they
	// hold no -q listing, and reading them yields nothing and never panics.
	for _, pat := range []string{"smi-table_*.txt", "smi-xml_*.xml", "compute-apps_*.csv"} {
		for name, b := range corpusFiles(t, pat) {
			if got := ParseSMIPIDs(bytes.NewReader(b)); len(got) != 0 {
				t.Errorf("%s: %+v from another format", name, got)
			}
		}
	}
}

// smiQ writes nvidia-smi -q -d PIDS text: per GPU bus id, its process blocks (GI, CI, PID,
// type, name, memory, as nvidia-smi prints them) or "None".
func smiQ(gpus ...string) string {
	var b strings.Builder
	b.WriteString("\n==============NVSMI LOG==============\n\nTimestamp                                 : Fri Jun 26 11:59:44 2026\nDriver Version                            : 595.71.05\nCUDA Version                              : 13.2\n\nAttached GPUs                             : 1\n")
	b.WriteString(strings.Join(gpus, ""))
	return b.String()
}

func smiQGPU(bus string, procs ...string) string {
	if len(procs) == 0 {
		return "GPU " + bus + "\n    Processes                             : None\n\n"
	}
	return "GPU " + bus + "\n    Processes\n" + strings.Join(procs, "") + "\n"
}

func smiQProc(gi, ci string, pid int, typ, name, mem string) string {
	return fmt.Sprintf("        GPU instance ID                   : %s\n        Compute instance ID               : %s\n        Process ID                        : %d\n            Type                          : %s\n            Name                          : %s\n            Used GPU Memory               : %s\n",
		gi, ci, pid, typ, name, mem)
}

// The situations of the corpus's default tables, as -q -d PIDS prints them: a KDE
// workstation's C+G and G processes (595), MIG compute instances (590), Windows WDDM memory
// not available, an MPS server and its client.
func TestParseSMIPIDs(t *testing.T) {
	bus := "00000000:01:00.0"
	kde := smiQ(smiQGPU(bus,
		smiQProc("N/A", "N/A", 2165, "C+G", "/usr/bin/kwin_wayland", "25 MiB"),
		smiQProc("N/A", "N/A", 2496, "G", "/usr/bin/plasma-keyboard", "200 MiB"),
		smiQProc("N/A", "N/A", 2620, "G", "/usr/bin/Xwayland", "4 MiB"),
		smiQProc("N/A", "N/A", 2954, "G", "/usr/bin/plasmashell", "120 MiB")))
	got := ParseSMIPIDs(strings.NewReader(kde))
	checkSMIPIDs(t, got, []smiPID{{2165, bus, "C+G", 25, -1, -1}, {2496, bus, "G", 200, -1, -1}, {2620, bus, "G", 4, -1, -1}, {2954, bus, "G", 120, -1, -1}})
	if !got[0].Graphics() || !got[1].Graphics() || got[0].MPSClient() {
		t.Errorf("types: %+v", got[:2])
	}
	mig := smiQ(smiQGPU("00000000:4E:00.0",
		smiQProc("2", "0", 21180, "C", "/root/tools/memhog", "2296 MiB"),
		smiQProc("2", "0", 21198, "C", "./gpu_burn", "7484 MiB")))
	checkSMIPIDs(t, ParseSMIPIDs(strings.NewReader(mig)), []smiPID{{21180, "00000000:4E:00.0", "C", 2296, 2, 0}, {21198, "00000000:4E:00.0", "C", 7484, 2, 0}})
	win := smiQ(smiQGPU("00000000:01:00.0", smiQProc("N/A", "N/A", 1234, "C+G", `C:\Windows\explorer.exe`, "Not available in WDDM driver model")))
	checkSMIPIDs(t, ParseSMIPIDs(strings.NewReader(win)), []smiPID{{1234, bus, "C+G", -1, -1, -1}})
	mps := smiQ(smiQGPU(bus, smiQProc("N/A", "N/A", 700, "C", "nvidia-cuda-mps-server", "30 MiB"),
		smiQProc("N/A", "N/A", 801, "M+C", "python3", "4000 MiB")), smiQGPU("00000000:02:00.0"))
	got = ParseSMIPIDs(strings.NewReader(mps))
	checkSMIPIDs(t, got, []smiPID{{700, bus, "C", 30, -1, -1}, {801, bus, "M+C", 4000, -1, -1}})
	if !got[1].MPSClient() || got[1].Graphics() {
		t.Errorf("M+C: %+v", got[1])
	}
}

// A process name may hold newlines: what it forges is dropped where it shows (a field twice
// in one block, a PID twice under one GPU), and the name itself is never read.
func TestParseSMIPIDsForged(t *testing.T) {
	bus := "00000000:01:00.0"
	forged := "x\n            Used GPU Memory               : 1 MiB\n        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n        Process ID                        : 900\n            Type                          : G\n            Name                          : y"
	got := ParseSMIPIDs(strings.NewReader(smiQ(smiQGPU(bus,
		smiQProc("N/A", "N/A", 900, "C", "/usr/bin/python3", "5000 MiB"),
		smiQProc("N/A", "N/A", 901, "C", forged, "70000 MiB")))))
	// 901's block reads "1 MiB" (the forged line), and the forged block claims PID 900 again
	// under the same GPU: both of 900's blocks are dropped.
	checkSMIPIDs(t, got, []smiPID{{901, bus, "C", 1, -1, -1}})
	twice := smiQ(smiQGPU(bus, smiQProc("N/A", "N/A", 5, "C", "a", "1 MiB")+"            Type                          : G\n"))
	if got := ParseSMIPIDs(strings.NewReader(twice)); len(got) != 0 {
		t.Errorf("a block with Type twice: %+v", got)
	}
	for _, bad := range []string{"", "GPU \n", "GPU 0000:01:00.0\n    Processes\n        Process ID : 0\n            Type : C\n",
		"GPU 0000:01:00.0\n    Processes\n        Process ID : 7\n            Type : graphics\n",
		"    Processes\n        Process ID : 7\n            Type : C\n", strings.Repeat("x", 1<<13) + "\n"} {
		if got := ParseSMIPIDs(strings.NewReader(bad)); len(got) != 0 {
			t.Errorf("%q: %+v", bad, got)
		}
	}
}

// FuzzParseSMIPIDs: any text yields processes with a PID, a type of upper-case letters and
// '+', and never a panic.
func FuzzParseSMIPIDs(f *testing.F) {
	for _, b := range corpusFiles(f, "smi-q_*.txt") {
		f.Add(b)
	}
	f.Add([]byte(smiQ(smiQGPU("00000000:01:00.0", smiQProc("2", "0", 21180, "M+C", "p", "2296 MiB")))))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, p := range ParseSMIPIDs(bytes.NewReader(b)) {
			if p.PID <= 0 || !smiType(p.Type) || p.BusID == "" || p.UsedMiB != nil && *p.UsedMiB < 0 {
				t.Fatalf("bad process %+v", p)
			}
		}
	})
}

// apps-alive names the listed PIDs that had no /proc entry right after the listing; a PID
// the listing does not hold, or a line of another shape, is not read. smi-pids fills SMIProcs.
func TestParseAppsAliveAndSMIPIDs(t *testing.T) {
	apps := "pid, gpu_uuid, used_memory [MiB]\n5000, GPU-1, 20000\n5001, GPU-1, 10\n"
	raw := captureV2(
		sec("smi-apps", 1<<20, apps, 0),
		sec("apps-alive", 128<<10, "gone 5000\nalive 5001\ngone 7\ngone\nzzz 5001\n", 0),
		sec("smi-pids", 1<<20, smiQ(smiQGPU("00000000:01:00.0", smiQProc("N/A", "N/A", 900, "G", "/usr/lib/xorg/Xorg", "300 MiB"))), 0))
	s, _ := Parse([]byte(raw))
	if !s.AppsChecked || len(s.AppsGone) != 1 || s.AppsGone[0] != 5000 {
		t.Errorf("apps checked %v, gone %v; want [5000]", s.AppsChecked, s.AppsGone)
	}
	if !s.SMIProcsKnown || len(s.SMIProcs) != 1 || s.SMIProcs[0].Type != "G" {
		t.Errorf("smi-pids: known %v, %+v", s.SMIProcsKnown, s.SMIProcs)
	}
}
