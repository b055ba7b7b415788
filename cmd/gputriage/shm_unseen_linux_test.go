//go:build linux

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// shmBoxScript runs as PID 1 of its own PID and mount namespaces, on a /dev/shm of its own.
// It starts, in this order (so that their PIDs sort first in the probe's /proc/[0-9]*/maps):
// FLOODERS processes of uid 65534 that each map their own 4 KiB /dev/shm file 30,000 times,
// then a root "server" that maps the 3 GiB /dev/shm/model-weights and keeps no fd on it, and
// writes 2 GiB of /dev/shm/stale-weights that nothing uses, and starts a root process that
// opens /dev/shm/held-open argv[3] times (as many processes as RLIMIT_NOFILE needs). Then it runs the probe (stdin
// from argv[1]) and prints its capture.
const shmBoxScript = `
import ctypes, os, signal, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
def start(uid, path, size, maps):
    r, w = os.pipe()
    if os.fork():
        os.close(w)
        if os.read(r, 1) != b"x":
            sys.exit("a mapper failed")
        return
    os.close(r)
    if uid:
        os.setgid(uid); os.setuid(uid)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, size)
    for _ in range(maps):
        if libc.mmap(None, size, 1, 1, fd, 0) == ctypes.c_void_p(-1).value:
            os._exit(3)
    os.close(fd)
    os.write(w, b"x")
    signal.pause()
for i in range(int(sys.argv[2])):
    start(65534, "/dev/shm/flood-%d" % i, 4096, 30000)
start(0, "/dev/shm/model-weights", 3 << 30, 1)
fds = int(sys.argv[3])
if fds:
    import resource
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
while fds > 0:
    n = min(fds, hard - 64)
    fds -= n
    r, w = os.pipe()
    if not os.fork():
        os.close(r)
        held = [os.open("/dev/shm/held-open", os.O_RDWR | os.O_CREAT, 0o600) for _ in range(n)]
        os.write(w, b"x")
        signal.pause()
    os.close(w)
    os.read(r, 1)
with open("/dev/shm/stale-weights", "wb") as f:
    f.truncate(2 << 30)
sys.stdout.flush()
subprocess.run(["sh", "-s"], stdin=open(sys.argv[1]), stdout=sys.stdout)
`

// probeShmBox runs shmBoxScript with flooders flooding processes and a process holding fds
// open fds, and returns the capture.
func probeShmBox(t *testing.T, flooders, fds int) []byte {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root for namespaces and a second uid")
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "probe.in")
	if err := os.WriteFile(in, probe.Input("0123456789abcdef0123456789abcdef", 10), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "-p", "-m", "-f", "--kill-child", "--mount-proc", "sh", "-c",
		`mount -t tmpfs -o size=8g,mode=1777 tmpfs /dev/shm && exec python3 -c "$0" "$1" "$2" "$3"`,
		shmBoxScript, in, strconv.Itoa(flooders), strconv.Itoa(fds))
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the /dev/shm box: %v\n%s", err, errb.String())
	}
	return out
}

// A host's user who floods the maps section (two processes mapping their own file 30,000
// times each, listed first) cuts it before a healthy server's mapping of its weights. The
// weights must then not be called unused, nor their removal suggested: gputriage says that
// who uses /dev/shm was not seen whole. Without the flood, the same box reports the truly
// unused file, and only it.
func TestShmUnusedNotJudgedWhenMapsAreCut(t *testing.T) {
	removes := func(name string) *regexp.Regexp { return regexp.MustCompile(`rm -rf -- '?/dev/shm/` + name) }
	for _, c := range []struct {
		flooders int
		stale    bool // stale-weights reported for removal
	}{{0, true}, {2, false}} {
		raw := probeShmBox(t, c.flooders, 0)
		file := filepath.Join(t.TempDir(), "box.capture")
		if err := os.WriteFile(file, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		snap, _ := parse.Parse(raw)
		cut := false
		for _, si := range snap.Sections {
			cut = cut || si.Name == "maps" && si.Truncated
		}
		if cut != (c.flooders > 0) {
			t.Fatalf("%d flooders: maps section cut %v", c.flooders, cut)
		}
		out, _, _ := cli(t, nil, "--replay", file, "--color", "never", "--verbose")
		js, _, _ := cli(t, nil, "--replay", file, "--format", "json")
		for _, text := range []string{out, js} {
			if removes("model-weights").MatchString(text) || strings.Contains(text, "model-weights: file") {
				t.Errorf("%d flooders: the healthy server's weights are called unused:\n%s", c.flooders, text)
			}
			if removes("stale-weights").MatchString(text) != c.stale {
				t.Errorf("%d flooders: removal of stale-weights suggested %v, want %v:\n%s", c.flooders, !c.stale, c.stale, text)
			}
		}
		if said := strings.Contains(out, "section maps was cut"); said != (c.flooders > 0) {
			t.Errorf("%d flooders: says the maps section was cut: %v\n%s", c.flooders, said, out)
		}
	}
}

// A host with tens of thousands of fds open on /dev/shm (DataLoader workers sharing tensors;
// here root processes holding one file open 90,000 times in all) still gets the sizes of those fds, as
// many as fdstat's bound holds: the probe stats them through xargs. One stat over all of
// them exceeded the command line's limit (E2BIG) and fdstat failed with status 126, empty.
func TestProbeStatsManyShmFds(t *testing.T) {
	raw := probeShmBox(t, 0, 90000)
	snap, _ := parse.Parse(raw)
	for _, n := range snap.Notes {
		if strings.Contains(n.Message, "fdstat exited") {
			t.Errorf("fdstat failed: %s", n.Message)
		}
	}
	i := slices.IndexFunc(snap.Sections, func(si parse.SectionInfo) bool { return si.Name == "fdstat" })
	if i < 0 || snap.Sections[i].Bytes < 512<<10 {
		t.Fatalf("fdstat section %+v, want at least 512 KiB of sizes", snap.Sections)
	}
	if j := slices.IndexFunc(snap.Shm.Entries, func(e parse.ShmEntry) bool { return e.Path == "/dev/shm/held-open" }); j < 0 || len(snap.Shm.Entries[j].Holders) == 0 {
		t.Errorf("/dev/shm/held-open not held: %+v", snap.Shm.Entries)
	}
}
