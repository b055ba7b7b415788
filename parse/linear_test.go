package parse

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// measure runs f once and returns how long it took and how many bytes it allocated.
func measure(f func()) (time.Duration, uint64) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return elapsed, after.TotalAlloc - before.TotalAlloc
}

// hugeCapture is a version 2 capture with n compute-app rows, n procs records, n fds records,
// n /dev/shm entries (the deepest the probe lists) and one /dev/shm path n components deep.
func hugeCapture(n int) []byte {
	var apps, procs, fds, ls bytes.Buffer
	apps.WriteString("pid, gpu_uuid, used_memory [MiB]\n")
	ls.WriteString("d\t40\t1.5\t0\t/dev/shm\x00")
	for i := range n {
		pid := 1000 + i
		fmt.Fprintf(&apps, "%d, GPU-%d, %d\n", pid, i%8, i%1000)
		fmt.Fprintf(&procs, "pid %d\x00cgroup 0::/system.slice/u%d.service\x00end\x00", pid, i)
		fmt.Fprintf(&fds, "/proc/%d/fd\t%d\t/dev/shm/a/b/c/d/e/f/g/h%d\x00", pid, 3, i)
		fmt.Fprintf(&ls, "f\t1\t1.5\t0\t/dev/shm/a/b/c/d/e/f/g/h%d\x00", i)
	}
	fds.WriteString("denied 0\n")
	deep := "/dev/shm" + strings.Repeat("/x", n)
	fmt.Fprintf(&fds, "")
	fdsDeep := fmt.Sprintf("/proc/1/fd\t9\t%s\x00", deep)
	var b bytes.Buffer
	sec := func(name string, body []byte) {
		fmt.Fprintf(&b, "@@gputriage %s begin %s limit=999999999\n%s\n@@gputriage %s rc=0\n@@gputriage %s end %s\n", testNonce, name, body, testNonce, testNonce, name)
	}
	b.WriteString(CaptureHeader(testNonce))
	sec("host", []byte("probe_version=2\nuid=0\ntimeout=1"))
	sec("smi-apps", apps.Bytes())
	sec("fds", []byte(b64(fdsDeep+fds.String()+"\n@@gputriage "+testNonce+" rc=0\n")))
	sec("procs", procs.Bytes())
	sec("shm-ls", append(ls.Bytes(), []byte("d\t1\t1.5\t0\t"+deep+"\x00")...))
	fmt.Fprintf(&b, "@@gputriage %s done\n", testNonce)
	return b.Bytes()
}

// TestParseLinear: a capture with 200,000 compute-app rows, procs records, fds and /dev/shm
// entries, and a /dev/shm path 200,000 components deep, is parsed in seconds and well under
// 1 GiB: every section is bounded by the client's limit, and each parser is linear in its
// input. The parsers themselves, given the 200,000 records uncut, are too.
func TestParseLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("large input")
	}
	const n = 200_000
	raw := hugeCapture(n)
	var s *Snapshot
	elapsed, alloc := measure(func() { s, _ = Parse(raw) })
	t.Logf("Parse of a %d MiB capture (%d rows per section): %s, %d MiB allocated; %d apps, %d processes, %d shm entries",
		len(raw)>>20, n, elapsed, alloc>>20, len(s.Apps), len(s.Processes), len(s.Shm.Entries))
	if elapsed > testenv.Scale(10*time.Second) || alloc > 1<<30 {
		t.Errorf("Parse took %s and %d MiB", elapsed, alloc>>20)
	}
	if len(s.Apps) == 0 || len(s.Processes) == 0 || !hasNote(s, NoteSectionTruncated, "smi-apps") {
		t.Errorf("apps %d processes %d notes %+v", len(s.Apps), len(s.Processes), s.Notes)
	}

	var apps, procs bytes.Buffer
	apps.WriteString("pid, gpu_uuid, used_memory [MiB]\n")
	for i := range n {
		fmt.Fprintf(&apps, "%d, GPU-%d, %d\n", 1000+i, i%8, i%1000)
		fmt.Fprintf(&procs, "pid %d\x00stat %d (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n\x00cgroup 0::/system.slice/u%d.service\x00argv %s\x00cwd /srv\n\x00end\x00",
			1000+i, 1000+i, i, b64("python3\x00train.py\x00"))
	}
	for name, f := range map[string]func() int{
		"ParseAppsCSV": func() int { a, _ := ParseAppsCSV(bytes.NewReader(apps.Bytes())); return len(a) },
		"ParseProcsV2": func() int { p, _, _ := ParseProcsV2(bytes.NewReader(procs.Bytes()), nil, 100); return len(p) },
	} {
		var got int
		elapsed, alloc := measure(func() { got = f() })
		t.Logf("%s of %d records: %s, %d MiB allocated", name, n, elapsed, alloc>>20)
		if got != n || elapsed > testenv.Scale(10*time.Second) || alloc > 1<<30 {
			t.Errorf("%s: %d records in %s and %d MiB", name, got, elapsed, alloc>>20)
		}
	}
}
