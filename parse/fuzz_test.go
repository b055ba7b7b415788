package parse

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// Every parser must take any input without panicking, return errors that wrap ErrParse, and
// keep its basic invariants. Seeds come from the shared corpus when present and from samples.

// seedCorpus adds the corpus files matching pattern as seeds; none when the corpus is absent.
func seedCorpus(f *testing.F, pattern string, add func(b []byte)) {
	dir, err := os.Getwd()
	if err != nil {
		return
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return
		}
		dir = parent
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "..", "shared", "corpus", pattern))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			add(b)
		}
	}
}

func checkErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrParse) {
		t.Fatalf("error does not wrap ErrParse: %v", err)
	}
}

func nonNeg(t *testing.T, what string, p *int64) {
	t.Helper()
	if p != nil && *p < 0 {
		t.Fatalf("%s = %d", what, *p)
	}
}

var sampleCapture = capture(
	sec("host", 65536, hostRoot, 0),
	sec("smi-gpu", 1048576, gpuBasic, 0),
	sec("smi-apps", 1048576, "pid, gpu_uuid, used_gpu_memory [MiB], process_name\n100, GPU-a, 1500, python3", 0),
	sec("fds", 4194304, "100 3 /dev/nvidiactl\n100 9 /dev/shm/torch_1 (deleted)\ndenied 3", 0),
	sec("maps", 4194304, "/proc/100/maps:7f0000000000-7f0000002000 rw-s 00000000 00:1a 5 /dev/shm/torch_1 (deleted)", 0),
	sec("fdstat", 1048576, "65536 /proc/100/fd/9", 0),
	sec("procs", 4194304, "pid 100\nstat 100 (py thon) S 1 100 100 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\nstatus Uid:\t0\t0\t0\t0\nargv cHl0aG9uMwA=\ncgroup 0::/system.slice/docker-0123456789abcdef.scope\nend", 0),
	sec("users", 1048576, "root:x:0:0::/root:/bin/sh", 0),
	sec("units", 1048576, "Id=a.service\nMainPID=100", 0),
	sec("shm-df", 65536, "Filesystem 1024-blocks Used Available Capacity Mounted on\ntmpfs 8 0 8 0% /dev/shm", 0),
	sec("shm-ls", 4194304, "d\t60\t1.5\t0\t/dev/shm\x00f\t10\t1.5\t0\t/dev/shm/a\x00", 0),
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(sampleCapture))
	f.Add([]byte(strings.ReplaceAll(sampleCapture, "\n", "\r\n")))
	f.Add([]byte(sampleCapture[:len(sampleCapture)/2]))
	f.Add([]byte(captureV2(sec("host", 0, hostRoot, 0), sec64("fds", "/proc/5/fd\t3\t/dev/nvidia0\x00/proc/5/fd\t4\t/dev/shm/a (deleted)\x00denied 0", 0),
		sec("fdstat", 0, "0 9 /proc/5/fd/4", 0), sec("procs", 0, procV2(5, "a\nb"), 0), sec("user-units", 0, "1000 0 "+b64("Id=a.service\n"), 0))))
	f.Add([]byte("gputriage-capture v1 nonce=ab\n@@gputriage ab begin x limit=1\n@@gputriage ab rc=\n@@gputriage ab begin y\n@@gputriage ab done"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(raw)
		if s == nil {
			t.Fatal("nil snapshot")
		}
		checkErr(t, err)
		c, _ := SplitCapture(raw)
		if len(s.Sections) != len(c.Sections) || s.Truncated != !c.Done {
			t.Fatalf("%d sections, split has %d; truncated %v done %v", len(s.Sections), len(c.Sections), s.Truncated, c.Done)
		}
		for _, si := range s.Sections {
			if si.Bytes < 0 || si.Bytes > len(raw) {
				t.Fatalf("section %+v", si)
			}
		}
		if !sort.SliceIsSorted(s.Processes, func(i, j int) bool { return s.Processes[i].PID < s.Processes[j].PID }) {
			t.Fatal("processes not sorted")
		}
		for _, e := range s.Shm.Entries {
			if !sort.IntsAreSorted(e.Holders) || e.TreeBytes < 0 {
				t.Fatalf("entry %+v", e)
			}
		}
		for _, n := range s.Notes {
			if n.Code == "" || n.Message == "" {
				t.Fatalf("note %+v", n)
			}
		}
	})
}

// FuzzSectionBody checks that no body can end, forge or hide a section: whatever a section
// holds, short of the nonce, comes back exactly.
func FuzzSectionBody(f *testing.F) {
	f.Add([]byte("a=1\n"), 0)
	f.Add([]byte("@@gputriage 00 end x\n@@gputriage 00 rc=0\n"), 3)
	f.Add([]byte("\x00\xff\r\n\n"), 127)
	f.Fuzz(func(t *testing.T, body []byte, rc int) {
		if bytes.Contains(body, []byte(testNonce)) {
			t.Skip()
		}
		rc &= 0xff
		c, err := SplitCapture([]byte(capture(sec("x", len(body)+1, string(body), rc), sec("y", 1, "", 0))))
		if err != nil {
			t.Fatal(err)
		}
		if !c.Done || len(c.Sections) != 2 {
			t.Fatalf("done %v, %d sections", c.Done, len(c.Sections))
		}
		s := c.Sections[0]
		if !bytes.Equal(s.Body, body) || !eqPtr(s.ExitCode, &rc) || s.Truncated {
			t.Fatalf("got %q rc %v truncated %v, want %q rc %d", s.Body, showPtr(s.ExitCode), s.Truncated, body, rc)
		}
	})
}

func FuzzGPUCSV(f *testing.F) {
	seedCorpus(f, "query-gpu_*.csv", func(b []byte) { f.Add(b) })
	f.Add([]byte(gpuBasic))
	f.Add([]byte("0, GPU-a, A, 00:01.0, 1 MiB, [N/A], N/A, 45 %, Default, 1, 2, Enabled\n"))
	f.Add([]byte("index, name\n0, \"a,\nb\"\n1, x, y, z\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gpus, err := ParseGPUCSV(bytes.NewReader(b))
		checkErr(t, err)
		if len(gpus) > bytes.Count(b, []byte("\n"))+1 {
			t.Fatalf("%d GPUs from %d lines", len(gpus), bytes.Count(b, []byte("\n"))+1)
		}
		for _, g := range gpus {
			nonNeg(t, "total", g.MemoryTotalMiB)
			nonNeg(t, "used", g.MemoryUsedMiB)
			nonNeg(t, "free", g.MemoryFreeMiB)
			nonNeg(t, "reserved", g.MemoryReservedMiB)
			if g.Index < 0 || g.UtilizationPct != nil && *g.UtilizationPct < 0 {
				t.Fatalf("GPU %+v", g)
			}
		}
	})
}

func FuzzAppsCSV(f *testing.F) {
	seedCorpus(f, "*-apps_*.csv", func(b []byte) { f.Add(b) })
	f.Add([]byte("pid, gpu_uuid, used_gpu_memory [MiB], process_name\n1, GPU-a, 1 MiB, a, b\n"))
	f.Add([]byte("1, GPU-a, [N/A], C:\\x (y)\\z.exe\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		apps, err := ParseAppsCSV(bytes.NewReader(b))
		checkErr(t, err)
		for _, a := range apps {
			if a.PID < 0 {
				t.Fatalf("app %+v", a)
			}
			nonNeg(t, "used", a.UsedMiB)
		}
	})
}

func FuzzSMIError(f *testing.F) {
	seedCorpus(f, "smi-error_*.txt", func(b []byte) { f.Add(string(b), 9, true) })
	f.Add("nvidia-smi: not found", 127, true)
	f.Add("Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost", 15, true)
	f.Add("", 124, true)
	f.Add("index, uuid\n", 0, false)
	kinds := map[SMIFailureKind]bool{SMIMissing: true, SMINoDriver: true, SMIVersionMismatch: true, SMIGPULost: true, SMIDeviceHandle: true, SMINoDevices: true, SMITimeout: true, SMIOther: true}
	f.Fuzz(func(t *testing.T, text string, rc int, hasRC bool) {
		var p *int
		if hasRC {
			p = &rc
		}
		fail := ClassifySMIError(text, p)
		if hasRC && rc != 0 && fail == nil {
			t.Fatalf("exit status %d, no failure", rc)
		}
		if fail == nil {
			return
		}
		if !kinds[fail.Kind] || hasRC && (rc == 124 || rc == 137) && fail.Kind != SMITimeout || len(fail.Message) > 1100 {
			t.Fatalf("failure %+v for rc %d", fail, rc)
		}
		if fail.BusID != "" && strings.ContainsAny(fail.BusID, " \n") {
			t.Fatalf("bus id %q", fail.BusID)
		}
	})
}

func FuzzCgroup(f *testing.F) {
	seedCorpus(f, "cgroup_*.txt", func(b []byte) { f.Add(string(b)) })
	f.Add("1:name=systemd:/kubepods/burstable/pod1b2c3d4e-0000-1111-2222-333344445555/0123456789abcdef\n0::/\n")
	f.Add("0::/system.slice/slurmstepd.scope/job_1/step_batch\n")
	f.Fuzz(func(t *testing.T, text string) {
		c := ParseCgroup(text)
		if len(c.Lines) > strings.Count(text, "\n")+1 || (c.Path == "") != (len(c.Lines) == 0) {
			t.Fatalf("%d lines, path %q", len(c.Lines), c.Path)
		}
		if c.Unit != "" && !strings.HasSuffix(c.Unit, ".service") && !strings.HasSuffix(c.Unit, ".scope") {
			t.Fatalf("unit %q", c.Unit)
		}
		if strings.Contains(c.PodUID, "_") || c.SlurmStep != "" && c.SlurmJob == "" {
			t.Fatalf("%+v", c)
		}
	})
}

func FuzzShmListing(f *testing.F) {
	f.Add([]byte("d\t60\t1.5\t0\t/dev/shm\x00f\t10\t2\t0\t/dev/shm/a\x00find: x\nf\t5\t3.25\t1\t/dev/shm/b\tc\x00"))
	f.Add([]byte("f\t1\t1\t0\t/dev/shm/x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, _, err := ParseShmListing(bytes.NewReader(b))
		checkErr(t, err)
		for _, e := range entries {
			if e.Bytes < 0 || e.TreeBytes < 0 || e.UID < 0 || !strings.HasPrefix(e.Path, "/") || e.Type == 'f' && e.TreeBytes != e.Bytes {
				t.Fatalf("entry %+v", e)
			}
		}
	})
}

func FuzzProcs(f *testing.F) {
	f.Add("pid 1\nstat 1 (a) b) S 0 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nstatus VmRSS:\t1 kB\nargv YQBi\nend\npid 2\ngone\n", int64(1700000000), 100)
	f.Add("pid 3\nstatus NSpid:\t3\t1\nstatus Uid:\t5\ncgroup 0::/a.service\npath exists /m\n", int64(0), 0)
	f.Fuzz(func(t *testing.T, text string, btime int64, hz int) {
		boot := time.Unix(btime%(1<<40), 0)
		procs, _, err := ParseProcs(strings.NewReader(text), &boot, hz)
		checkErr(t, err)
		for _, p := range procs {
			n := 0
			for _, a := range p.Argv {
				n += len(a) + 1
			}
			if p.PID < 0 || n > maxArgvBytes+1 || p.PPID != nil && *p.PPID < 0 || p.UID != nil && *p.UID < 0 {
				t.Fatalf("process %+v", p)
			}
			nonNeg(t, "rss", p.RSSKiB)
			nonNeg(t, "rssshmem", p.RssShmemKiB)
		}
	})
}

func FuzzUnits(f *testing.F) {
	f.Add("Id=a.service\nLoadState=loaded\nMainPID=12\n\nId=b.scope\nMainPID=x\n")
	f.Fuzz(func(t *testing.T, text string) {
		units, _, err := ParseUnits(strings.NewReader(text))
		checkErr(t, err)
		for _, u := range units {
			if u.Name == "" || u.MainPID != nil && *u.MainPID < 0 {
				t.Fatalf("unit %+v", u)
			}
		}
	})
}

func FuzzFDs(f *testing.F) {
	f.Add("1 2 /dev/nvidia0\n3 4 /dev/shm/a b (deleted)\ndenied 7\n")
	f.Fuzz(func(t *testing.T, text string) {
		fds, denied, _, err := ParseFDs(strings.NewReader(text))
		checkErr(t, err)
		for _, fd := range fds {
			if fd.PID < 0 || fd.FD < 0 || !strings.HasPrefix(fd.Target, "/") {
				t.Fatalf("fd %+v", fd)
			}
		}
		if denied != nil && (denied.Links < 0 || len(denied.PIDs) > 16) {
			t.Fatalf("denied %+v", *denied)
		}
	})
}

func FuzzMaps(f *testing.F) {
	f.Add("/proc/7/maps:7f0000000000-7f0000100000 rw-s 00000000 00:1a 115   /dev/shm/x y (deleted)\n/proc/7/maps:0-ffffffffffffffff r 0 0 0 /dev/shm/z\n")
	f.Fuzz(func(t *testing.T, text string) {
		maps, err := ParseMaps(strings.NewReader(text))
		checkErr(t, err)
		for i, m := range maps {
			if m.Bytes < 0 || m.PID < 0 || !strings.HasPrefix(m.Path, "/dev/shm/") {
				t.Fatalf("mapping %+v", m)
			}
			if i > 0 && maps[i-1].PID > m.PID {
				t.Fatal("not sorted")
			}
		}
	})
}

func FuzzFDStat(f *testing.F) {
	f.Add("4096 /proc/5/fd/3\nstat: cannot statx\n")
	f.Fuzz(func(t *testing.T, text string) {
		sizes, _, err := ParseFDStat(strings.NewReader(text))
		checkErr(t, err)
		for _, s := range sizes {
			if s.Bytes < 0 || s.PID < 0 || s.FD < 0 {
				t.Fatalf("size %+v", s)
			}
		}
	})
}

func FuzzDF(f *testing.F) {
	f.Add("Filesystem     1024-blocks  Used Available Capacity Mounted on\ntmpfs             24683620     0  24683620       0% /dev/shm\n")
	f.Add("Filesystem 9223372036854775807-blocks Used Available Capacity Mounted on\na 9223372036854775807 1 1 1% /\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseDF(strings.NewReader(text))
		checkErr(t, err)
		nonNeg(t, "size", s.SizeBytes)
		nonNeg(t, "used", s.UsedBytes)
		nonNeg(t, "avail", s.AvailBytes)
	})
}

func FuzzHost(f *testing.F) {
	f.Add(hostNonRoot)
	f.Add("uptime=NaN\nclk_tck=0\ntime=-1\nuid=99999999999999999999\n")
	f.Fuzz(func(t *testing.T, text string) {
		h, err := ParseHost(strings.NewReader(text))
		checkErr(t, err)
		if h.ClockTicks <= 0 || h.UID != nil && *h.UID < 0 || h.UptimeSeconds != nil && !(*h.UptimeSeconds >= 0) {
			t.Fatalf("host %+v", h)
		}
	})
}

func FuzzPasswd(f *testing.F) {
	f.Add("root:x:0:0:root:/root:/bin/bash\n::1\nx:x:-1\n")
	f.Fuzz(func(t *testing.T, text string) {
		names, err := ParsePasswd(strings.NewReader(text))
		checkErr(t, err)
		for uid, name := range names {
			if uid < 0 || name == "" {
				t.Fatalf("%d %q", uid, name)
			}
		}
	})
}
