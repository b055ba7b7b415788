package parse

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
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
	var apps, procs, fds, ls []byte
	apps = append(apps, "pid, gpu_uuid, used_memory [MiB]\n"...)
	ls = append(ls, "d\t40\t1.5\t0\t/dev/shm\x00"...)
	for i := range n {
		pid := int64(1000 + i)
		apps = append(strconv.AppendInt(apps, pid, 10), ", GPU-"...)
		apps = append(strconv.AppendInt(apps, int64(i%8), 10), ", "...)
		apps = append(strconv.AppendInt(apps, int64(i%1000), 10), '\n')
		procs = append(strconv.AppendInt(append(procs, "pid "...), pid, 10), "\x00cgroup 0::/system.slice/u"...)
		procs = append(strconv.AppendInt(procs, int64(i), 10), ".service\x00end\x00"...)
		fds = append(strconv.AppendInt(append(fds, "/proc/"...), pid, 10), "/fd\t3\t/dev/shm/a/b/c/d/e/f/g/h"...)
		fds = append(strconv.AppendInt(fds, int64(i), 10), 0)
		ls = append(strconv.AppendInt(append(ls, "f\t1\t1.5\t0\t/dev/shm/a/b/c/d/e/f/g/h"...), int64(i), 10), 0)
	}
	fds = append(fds, "denied 0\n"...)
	deep := "/dev/shm" + strings.Repeat("/x", n)
	fdsDeep := "/proc/1/fd\t9\t" + deep + "\x00"
	var b bytes.Buffer
	sec := func(name string, body []byte) {
		fmt.Fprintf(&b, "@@gputriage %s begin %s limit=999999999\n%s\n@@gputriage %s rc=0\n@@gputriage %s end %s\n", testNonce, name, body, testNonce, testNonce, name)
	}
	b.WriteString(CaptureHeader(testNonce))
	sec("host", []byte("probe_version=2\nuid=0\ntimeout=1"))
	sec("smi-apps", apps)
	sec("fds", []byte(b64(fdsDeep+string(fds)+"\n@@gputriage "+testNonce+" rc=0\n")))
	sec("procs", procs)
	sec("shm-ls", append(ls, []byte("d\t1\t1.5\t0\t"+deep+"\x00")...))
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

	apps := []byte("pid, gpu_uuid, used_memory [MiB]\n")
	var procs []byte
	argv := "\x00argv " + b64("python3\x00train.py\x00") + "\x00cwd /srv\n\x00end\x00"
	for i := range n {
		pid := int64(1000 + i)
		apps = append(strconv.AppendInt(apps, pid, 10), ", GPU-"...)
		apps = append(strconv.AppendInt(apps, int64(i%8), 10), ", "...)
		apps = append(strconv.AppendInt(apps, int64(i%1000), 10), '\n')
		procs = append(strconv.AppendInt(append(procs, "pid "...), pid, 10), "\x00stat "...)
		procs = append(strconv.AppendInt(procs, pid, 10), " (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n\x00cgroup 0::/system.slice/u"...)
		procs = append(append(strconv.AppendInt(procs, int64(i), 10), ".service"...), argv...)
	}
	for name, f := range map[string]func() int{
		"ParseAppsCSV": func() int { a, _ := ParseAppsCSV(bytes.NewReader(apps)); return len(a) },
		"ParseProcsV2": func() int { p, _, _ := ParseProcsV2(bytes.NewReader(procs), nil, 100); return len(p) },
	} {
		var got int
		elapsed, alloc := measure(func() { got = f() })
		t.Logf("%s of %d records: %s, %d MiB allocated", name, n, elapsed, alloc>>20)
		if got != n || elapsed > testenv.Scale(10*time.Second) || alloc > 1<<30 {
			t.Errorf("%s: %d records in %s and %d MiB", name, got, elapsed, alloc>>20)
		}
	}
}
