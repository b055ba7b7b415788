package probe_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/gputriage/gputriage/internal/testenv"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// runProbe runs the embedded probe as gputriage does (sh -s -- NONCE, script on stdin) with
// dir, when not empty, first on PATH.
func runProbe(t *testing.T, dir string) []byte {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-s", "--", testNonce)
	cmd.Stdin = strings.NewReader(probe.Script)
	if dir != "" {
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, stderr.Bytes())
	}
	return out
}

// hostHasNvidiaSMI says whether the probe would find a real nvidia-smi here.
func hostHasNvidiaSMI() bool {
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		return true
	}
	for _, p := range []string{"/usr/bin/nvidia-smi", "/usr/local/bin/nvidia-smi", "/usr/local/nvidia/bin/nvidia-smi", "/opt/nvidia/bin/nvidia-smi", "/usr/lib/wsl/lib/nvidia-smi"} {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

// As root, the probe runs in a box (inBox): what another test or job does on this machine
// meanwhile (thousands of fds on /dev/shm files fill the fds section) cannot cut a section.
func TestProbeOnThisHost(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	var raw []byte
	if canBox() {
		raw = inBox(t, "", "set -- "+testNonce+"\n"+probe.Script, "sh -s\n")
	} else {
		raw = runProbe(t, "")
	}
	s, err := parse.Parse(raw)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if s.Truncated {
		t.Error("capture truncated")
	}
	hostname, _ := os.Hostname()
	h := s.Host
	if h.ProbeVersion != "2" || h.Hostname != hostname || h.Kernel == "" || h.Time == nil || h.BootTime == nil || h.UptimeSeconds == nil || h.UID == nil || *h.UID != os.Getuid() || h.User == "" {
		t.Errorf("host facts: %+v", h)
	}
	if h.Time != nil && time.Since(*h.Time).Abs() > time.Minute {
		t.Errorf("host time %v, now %v", h.Time, time.Now())
	}
	// fix names a process by boot id, PID, start ticks and argv hash: they must be this
	// host's own.
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err != nil || h.BootID != strings.ReplaceAll(strings.TrimSpace(string(b)), "-", "") {
		t.Errorf("boot id %q, /proc says %q (%v)", h.BootID, b, err)
	}
	if !hostHasNvidiaSMI() {
		if s.SMI.Failure == nil || s.SMI.Failure.Kind != parse.SMIMissing || !is(s.SMI.Failure.ExitCode, 127) {
			t.Errorf("want nvidia-smi missing, got %+v", s.SMI.Failure)
		}
		if len(s.GPUs) != 0 {
			t.Errorf("GPUs without nvidia-smi: %+v", s.GPUs)
		}
	}
	if _, err := os.Stat("/dev/shm"); err == nil {
		sh := s.Shm
		if sh.SizeBytes == nil || *sh.SizeBytes <= 0 || sh.UsedBytes == nil || sh.AvailBytes == nil || *sh.UsedBytes+*sh.AvailBytes > *sh.SizeBytes+1<<20 {
			b, _ := json.Marshal([]*int64{sh.SizeBytes, sh.UsedBytes, sh.AvailBytes})
			t.Errorf("shm-df: size, used, avail %s", b)
		}
		if !sh.Listed || len(sh.Entries) == 0 || sh.Entries[0].Path != "/dev/shm" || sh.Entries[0].Type != 'd' {
			t.Errorf("shm-ls: listed %v, entries %d", sh.Listed, len(sh.Entries))
		}
	}
	for _, name := range []string{"host", "smi-gpu", "fds", "maps", "fdstat", "procs", "users", "units", "shm-df", "shm-ls"} {
		found := false
		for _, si := range s.Sections {
			if si.Name == name {
				found = true
				if si.Truncated || si.ExitCode == nil {
					t.Errorf("section %s: %+v", name, si)
				}
			}
		}
		if !found {
			t.Errorf("section %s missing", name)
		}
	}
	for _, n := range s.Notes {
		t.Logf("note %s: %s", n.Code, n.Message)
	}
}

// fakeSMI writes an nvidia-smi into dir that reports pid as a compute app. With refuse, it
// refuses the extended GPU fields the way old drivers do.
func fakeSMI(t *testing.T, dir string, pid int, refuse bool) {
	t.Helper()
	gpu := `echo "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version, memory.reserved [MiB], mig.mode.current"
echo "0, GPU-fake, NVIDIA Fake 80GB, 00000000:01:00.0, 81559, 1500, 79580, 3, Default, 550.54.15, 479, [N/A]"`
	if refuse {
		gpu = `case "$1" in
*memory.reserved*) echo 'Field "memory.reserved" is not a valid field to query.'; echo; exit 2 ;;
esac
echo "index, uuid, name, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], utilization.gpu [%], compute_mode, driver_version"
echo "0, GPU-old, Tesla K80, 00000000:04:00.0, 11441, 1500, 9941, 0, Default, 470.256.02"`
	}
	script := fmt.Sprintf(`#!/bin/sh
case "$1" in
--query-gpu=*)
%s
;;
--query-compute-apps=*)
echo "pid, gpu_uuid, used_gpu_memory [MiB], process_name"
echo "%d, GPU-fake, 1500, /usr/bin/python3"
;;
*) echo "fake nvidia-smi: $*"; exit 1 ;;
esac
`, gpu, pid)
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// shmChild starts a python3 that creates two /dev/shm files, maps both, unlinks the first
// and keeps its fd open, then sleeps. It returns the process and the two paths.
func shmChild(t *testing.T) (*exec.Cmd, string, string) {
	t.Helper()
	if _, err := os.Stat("/dev/shm"); err != nil {
		t.Skip("no /dev/shm")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	const code = `
import mmap, os, sys, time
gone, kept = sys.argv[1], sys.argv[2]
fd = os.open(gone, os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, 3 << 20)
m1 = mmap.mmap(fd, 3 << 20)
m1b = mmap.mmap(fd, 1 << 20, offset=1 << 20)
os.unlink(gone)
fd2 = os.open(kept, os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd2, 1 << 20)
m2 = mmap.mmap(fd2, 1 << 20)
os.close(fd2)  # mmap keeps its own dup
print("ready", flush=True)
time.sleep(120)
`
	tag := fmt.Sprintf("gputriage-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	gone := "/dev/shm/" + tag + "-gone"
	dir := "/dev/shm/" + tag + " dir"
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Skipf("cannot write /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	kept := dir + "/kept (x)"
	cmd := exec.Command(py, "-c", code, gone, kept, "arg with space", "tab\there", "--model", "/nonexistent/gputriage-model", "--tokenizer="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.Remove(gone)
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child: %q %v", line, err)
	}
	return cmd, gone, kept
}

func TestProbeSeesDeletedShm(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc")
	}
	child, gone, kept := shmChild(t)
	pid := child.Process.Pid
	for _, refuse := range []bool{false, true} {
		t.Run("refuse="+strconv.FormatBool(refuse), func(t *testing.T) {
			dir := t.TempDir()
			fakeSMI(t, dir, pid, refuse)
			s, err := parse.Parse(runProbe(t, dir))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if s.SMI.Failure != nil || s.SMI.FieldFallback != refuse || len(s.GPUs) != 1 {
				t.Fatalf("smi: %+v fallback %v, %d GPUs", s.SMI.Failure, s.SMI.FieldFallback, len(s.GPUs))
			}
			g := s.GPUs[0]
			if refuse {
				if g.Name != "Tesla K80" || g.MemoryReservedMiB != nil || !is(g.MemoryTotalMiB, 11441) {
					t.Errorf("basic GPU: %+v", g)
				}
				return
			}
			if g.Name != "NVIDIA Fake 80GB" || !is(g.MemoryReservedMiB, 479) || g.MIGMode != "" {
				t.Errorf("GPU: %+v", g)
			}
			if len(s.Apps) != 1 || s.Apps[0].PID != pid || !is(s.Apps[0].UsedMiB, 1500) {
				t.Errorf("apps: %+v", s.Apps)
			}
			var p *parse.Process
			for i := range s.Processes {
				if s.Processes[i].PID == pid {
					p = &s.Processes[i]
				}
			}
			if p == nil {
				t.Fatalf("pid %d not among processes %+v", pid, s.Processes)
			}
			me, err := user.Current()
			if err != nil {
				t.Fatal(err)
			}
			if p.Gone || p.UID == nil || *p.UID != os.Getuid() || p.User != me.Username || p.State == "" || p.Comm == "" ||
				p.PPID == nil || *p.PPID != os.Getpid() || p.RSSKiB == nil || p.StartTime == nil || p.Cwd == "" {
				t.Errorf("process: %+v", *p)
			}
			if p.StartTime != nil && time.Since(*p.StartTime).Abs() > 5*time.Minute {
				t.Errorf("start time %v", p.StartTime)
			}
			cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if sum := sha256.Sum256(cmdline); err != nil || p.ArgvSHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("argv sha256 %q, of /proc: %x (%v)", p.ArgvSHA256, sum, err)
			}
			if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || p.StartTicks == nil ||
				strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))[19] != strconv.FormatInt(*p.StartTicks, 10) {
				t.Errorf("start ticks %v, /proc/%d/stat %q (%v)", p.StartTicks, pid, stat, err)
			}
			if len(p.Argv) != 10 || p.Argv[5] != "arg with space" || p.Argv[6] != "tab\there" || p.Argv[3] != gone || p.ArgvTruncated {
				t.Errorf("argv %q", p.Argv)
			}
			// The missing path's chain is / alone, a directory of root's.
			if len(p.ModelPaths) > 0 {
				if d := p.ModelPaths[0].Dirs; len(d) != 1 || d[0].Path != "/" || d[0].UID != 0 || d[0].Mode&0o170000 != 0o040000 {
					t.Errorf("dirs above the missing path %+v", d)
				}
				p.ModelPaths[0].Dirs = nil
			}
			if want := []parse.PathCheck{{Path: "/nonexistent/gputriage-model"}, {Path: filepath.Dir(kept), Exists: true}}; !reflect.DeepEqual(p.ModelPaths, want) {
				t.Errorf("model paths %+v, want %+v", p.ModelPaths, want)
			}
			// The deleted file directly in /dev/shm: its owner (root, read through the process)
			// and its directories, /dev/shm (sticky, on its own device) first.
			if i := slices.IndexFunc(s.ShmDirs, func(d parse.ShmDirs) bool { return d.PID == pid && d.Path == gone }); i < 0 || !s.ShmDirsProbed {
				t.Errorf("shm dirs of %s: %+v", gone, s.ShmDirs)
			} else if d := s.ShmDirs[i]; d.Owner == nil || *d.Owner != 0 || len(d.Dirs) != 3 || d.Dirs[0].Path != "/dev/shm" ||
				d.Dirs[0].Mode&0o1000 == 0 || d.Dirs[1].Path != "/dev" || d.Dirs[2].Path != "/" {
				t.Errorf("shm dirs of %s: %+v", gone, d)
			}
			var deleted, mapped *parse.ShmUse
			for i, u := range p.Shm {
				switch u.Path {
				case gone:
					deleted = &p.Shm[i]
				case kept:
					mapped = &p.Shm[i]
				}
			}
			if deleted == nil || !deleted.Deleted || !deleted.Mapped || !deleted.Open || !is(deleted.Bytes, 3<<20) {
				t.Errorf("deleted shm use: %+v (all: %+v)", deleted, p.Shm)
			}
			// Python's mmap keeps a dup of the fd, so the kept file is open too.
			if mapped == nil || mapped.Deleted || !mapped.Mapped || !is(mapped.Bytes, 1<<20) {
				t.Errorf("mapped shm use: %+v (all: %+v)", mapped, p.Shm)
			}
			for _, e := range s.Shm.Entries {
				switch e.Path {
				case kept, filepath.Dir(kept), "/dev/shm":
					if !containsInt(e.Holders, pid) {
						t.Errorf("%s: holders %v lack %d", e.Path, e.Holders, pid)
					}
				}
				if e.Path == filepath.Dir(kept) && (e.Type != 'd' || e.TreeBytes != 1<<20) {
					t.Errorf("%s: type %c tree %d", e.Path, e.Type, e.TreeBytes)
				}
			}
		})
	}
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// The probe cuts each section at the client's own bound for it (SectionLimit): a probe that
// sent more would only have its sections cut and reported truncated.
func TestProbeLimitsMatchClient(t *testing.T) {
	re := regexp.MustCompile(`\b(?:capsec64|capsec|sec|nosec) ([a-z-]+) ([0-9]+) |begin ([a-z-]+) limit=([0-9]+)`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(probe.Script, -1) {
		name, limit := m[1], m[2]
		if name == "" {
			name, limit = m[3], m[4]
		}
		n, _ := strconv.Atoi(limit)
		if n != parse.SectionLimit(name) {
			t.Errorf("the probe bounds section %s at %d bytes, the client at %d", name, n, parse.SectionLimit(name))
		}
		seen[name] = true
	}
	if len(seen) != len(parse.SectionNames()) {
		t.Errorf("the probe prints sections %v; the client knows %d", seen, len(parse.SectionNames()))
	}
}

// The probe writes the header the client reads (parse.CaptureHeader) and sends base64-encoded
// exactly the sections the client decodes so (parse.IsBase64Section).
func TestProbeFormatMatchesClient(t *testing.T) {
	header := strings.Replace(parse.CaptureHeader("%s"), "\n", `\n`, 1)
	if !strings.Contains(probe.Script, "\nprintf '"+header+"' \"$N\"\n") {
		t.Errorf("the probe does not print the header %q", parse.CaptureHeader("NONCE"))
	}
	sent := map[string]bool{}
	for _, m := range regexp.MustCompile(`\bcapsec64 ([a-z-]+) `).FindAllStringSubmatch(probe.Script, -1) {
		sent[m[1]] = true
	}
	if len(sent) == 0 {
		t.Error("the probe sends no section base64-encoded")
	}
	for _, name := range parse.SectionNames() {
		if sent[name] != parse.IsBase64Section(name) {
			t.Errorf("section %s: the probe sends it base64-encoded: %v; the client decodes it so: %v", name, sent[name], parse.IsBase64Section(name))
		}
	}
}
