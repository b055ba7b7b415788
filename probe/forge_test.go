//go:build linux

package probe_test

import (
	"bytes"
	"fmt"
	"github.com/gputriage/gputriage/internal/testenv"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// attackerPy is run as the unprivileged user nobody. It takes its attack from GT_MODE,
// holds a deleted /dev/shm file mapped (so that the probe describes it), prints its PID when
// ready and sleeps.
const attackerPy = `
import ctypes, mmap, os, sys, time
mode, victim = os.environ["GT_MODE"], os.environ["GT_VICTIM"]
fake = "0" * 32
marks = "\n@@gputriage %s rc=0\n@@gputriage %s end procs\n@@gputriage %s begin procs limit=1\npid %s\nend\n@@gputriage %s done\n" % (fake, fake, fake, victim, fake)
base = "/dev/shm/gt-forge-%d" % os.getpid()
os.mkdir(base)
def hold(path, delete):
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    os.ftruncate(fd, 1 << 20)
    m = mmap.mmap(fd, 1 << 20)
    if delete:
        os.unlink(path)
    return fd, m
keep = [hold(base + "/held", True)]
if mode == "cwd":
    # A record for the victim, after the attacker's own cwd line.
    d = "x\npid %s\nstat %s (forged) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nstatus Uid:\t0\t0\t0\t0\nend\npid 999999\n" % (victim, victim)
    os.mkdir(os.path.join(base, d))
    os.chdir(os.path.join(base, d))
elif mode == "shm":
    # An fd line under a forged "/proc/VICTIM/fd:" header: ls -l puts the target's newlines
    # on lines of their own.
    parts = ["x\n", "proc", victim, "fd:\nlrwx------ 1 root root 64 Jan  1 00:00 99 -> ", "dev", "shm"]
    p = base
    for c in parts:
        p = os.path.join(p, c)
        os.mkdir(p)
    keep.append(hold(os.path.join(p, "y (deleted)"), False))
elif mode == "comm":
    ctypes.CDLL(None).prctl(15, ("a)\npid %s\nb" % victim)[:15].encode(), 0, 0, 0)
elif mode == "markers":
    ctypes.CDLL(None).prctl(15, b"\n@@gputriage 0", 0, 0, 0)
    os.mkdir(os.path.join(base, marks.replace("/", "_")))
    os.chdir(os.path.join(base, marks.replace("/", "_")))
    keep.append(hold(os.path.join(base, marks.replace("/", "_") + "file"), True))
print(os.getpid(), flush=True)
# Gone with the test, even one killed before its cleanup ran: its files go with it.
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
import shutil
shutil.rmtree(base, ignore_errors=True)
`

func needRootLinux(t *testing.T) {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("needs root: runs the probe as root against a process of user nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("no setpriv")
	}
}

// systemPython is a python3 that user nobody may run (root's may be a shim in its home).
func systemPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o001 != 0 {
			return p
		}
	}
	t.Skip("no python3 that user nobody may run")
	return ""
}

// TestProbeUnforgeable runs the real probe as root while an unprivileged process tries to
// make it describe another user's healthy job (the victim, a compute app) falsely, through
// what that process controls: its working directory, the names of its /dev/shm files, its
// comm, and section markers without the nonce. The victim's record must be its own, and what
// the attacker set must be read exactly as set, as the attacker's.
func TestProbeUnforgeable(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	// In a box of its own (inBox), so that no other process's fds on /dev/shm files can crowd
	// the attacker's out of the fds section: PID 3 is a fifo's mkfifo, PID 4 the victim (root's
	// sleep, a compute app), PID 5 the attacker, who says its PID on the fifo once ready.
	const victim, attacker = 4, 5
	smiDir := t.TempDir()
	smi := scenario.SMI{
		GPUs: []scenario.GPU{{Index: 0, UUID: "GPU-forge-0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:01:00.0", TotalMiB: 81559, UsedMiB: 40000, Driver: "550.54.15"}},
		Apps: []scenario.App{{PID: victim, GPUUUID: "GPU-forge-0", UsedMiB: 40000, Name: "sleep"}},
	}
	if err := scenario.WriteFakeSMI(smiDir, smi); err != nil {
		t.Fatal(err)
	}
	box := `mkfifo "$3/ready" || exit 94
sleep 3600 &
GT_MODE=$1 GT_VICTIM=4 setpriv --reuid=65534 --regid=65534 --clear-groups "$2" -c "$4" >"$3/ready" &
read -r pid <"$3/ready" && [ "$pid" = 5 ] || { echo "box: the attacker is PID $pid, not 5" >&2; exit 95; }
sh -s
`
	python := systemPython(t)
	for _, mode := range []string{"cwd", "shm", "comm", "markers"} {
		t.Run(mode, func(t *testing.T) {
			raw := inBox(t, smiDir, "set -- 00112233445566778899aabbccddeeff\n"+probe.Script, box, mode, python, t.TempDir(), attackerPy)
			s, err := parse.Parse(raw)
			if err != nil {
				t.Errorf("Parse: %v", err)
			}
			if s.Truncated {
				t.Errorf("capture not complete: sections %+v", s.Sections)
			}
			checkVictim(t, s, victim)
			a := proc(s, attacker)
			base := fmt.Sprintf("/dev/shm/gt-forge-%d", attacker)
			switch mode {
			case "cwd":
				dir := base + "/x\npid 4\nstat 4 (forged) Z 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\nstatus Uid:\t0\t0\t0\t0\nend\npid 999999\n"
				if a == nil || a.Cwd != dir || a.State == "" {
					t.Errorf("attacker: %+v, want cwd %q", a, dir)
				}
			case "shm":
				path := base + "/x\n/proc/" + strconv.Itoa(victim) + "/fd:\nlrwx------ 1 root root 64 Jan  1 00:00 99 -> /dev/shm/y (deleted)"
				e := entry(s, path)
				if e == nil || !reflect.DeepEqual(e.Holders, []int{attacker}) {
					t.Errorf("listing of %q: %+v, want held by the attacker %d", path, e, attacker)
				}
			case "comm":
				if want := "a)\npid 4\nb"; a == nil || a.Comm != want || a.StartTime == nil || a.State == "" {
					t.Errorf("attacker: %+v, want comm %q and a start time", a, want)
				}
			case "markers":
				if a == nil || !strings.Contains(a.Cwd, "@@gputriage 000") {
					t.Errorf("attacker: %+v", a)
				}
			}
		})
	}
}

// checkVictim asserts that the victim is described once, as it is: a sleeping "sleep" of
// root's holding nothing in /dev/shm.
func checkVictim(t *testing.T, s *parse.Snapshot, victim int) {
	t.Helper()
	n := 0
	for _, p := range s.Processes {
		if p.PID == victim {
			n++
			if p.Comm != "sleep" || p.State != "S" || p.UID == nil || *p.UID != 0 || !reflect.DeepEqual(p.Argv, []string{"sleep", "3600"}) ||
				p.StartTime == nil || len(p.Shm) != 0 {
				t.Errorf("victim %d described falsely: %+v", victim, p)
			}
		}
	}
	if n != 1 {
		t.Errorf("victim %d described %d times", victim, n)
	}
	for _, h := range s.Holders {
		if h.PID == victim {
			t.Errorf("victim %d holds %s (fd %d): forged", victim, h.Device, h.FD)
		}
	}
}

func proc(s *parse.Snapshot, pid int) *parse.Process {
	for i := range s.Processes {
		if s.Processes[i].PID == pid {
			return &s.Processes[i]
		}
	}
	return nil
}

func entry(s *parse.Snapshot, path string) *parse.ShmEntry {
	for i := range s.Shm.Entries {
		if s.Shm.Entries[i].Path == path {
			return &s.Shm.Entries[i]
		}
	}
	return nil
}

// scannerPy is run as nobody: it reads the nonce from its first line of input (never from its
// command line, where it would find itself), then reads every /proc/PID/cmdline and environ it
// may, over and over, until its input ends. It prints how often it saw the nonce and how many
// processes of the probe (sh -s and the commands it runs) it saw.
const scannerPy = `
import os, sys, threading
nonce = sys.stdin.readline().strip().encode()
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
hits, seen, loops = set(), set(), 0
me = str(os.getpid())
# Only processes started after the scanner: the probe's. Skipping the rest makes a pass short,
# so that short-lived commands are caught.
old = set(os.listdir("/proc"))
marks = [b"sh\0-s\0", b"find\0/proc/", b"grep\0-s\0-H", b"stat\0-L", b"base64\0", b"awk\0", b"timeout\0-k"]
while not stop.is_set():
    loops += 1
    for pid in os.listdir("/proc"):
        if pid in old or not pid.isdigit():
            continue
        for f in ("cmdline", "environ"):
            try:
                with open("/proc/%s/%s" % (pid, f), "rb") as fh:
                    b = fh.read()
            except OSError:
                continue
            if nonce in b:
                hits.add(pid + " " + f + " " + b.replace(b"\0", b" ").decode(errors="replace")[:200])
            if f == "cmdline" and any(b.startswith(m) for m in marks):
                seen.add(pid)
print(len(hits), len(seen), loops)
for h in sorted(hits):
    print(h)
`

// TestProbeNonceUnseen runs the real probe as root over and over while a process of user
// nobody reads every /proc/PID/cmdline and environ: it must never see the run's nonce (with
// it, it could forge section markers), and it must see the probe's processes (so the test
// can fail).
func TestProbeNonceUnseen(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	victimCmd := exec.Command("sleep", "3600")
	victimCmd.SysProcAttr = testenv.DieWithTest(false)
	if err := victimCmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = victimCmd.Process.Kill(); _ = victimCmd.Wait() }()
	smiDir := t.TempDir()
	smi := scenario.SMI{
		GPUs: []scenario.GPU{{Index: 0, UUID: "GPU-nonce-0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:01:00.0", TotalMiB: 81559, UsedMiB: 100, Driver: "550.54.15"}},
		Apps: []scenario.App{{PID: victimCmd.Process.Pid, GPUUUID: "GPU-nonce-0", UsedMiB: 100, Name: "sleep"}},
	}
	if err := scenario.WriteFakeSMI(smiDir, smi); err != nil {
		t.Fatal(err)
	}
	const nonce = "5ca77e2edc0ffee5ca77e2edc0ffee00"
	scan := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", systemPython(t), "-c", scannerPy)
	scan.Dir = "/"
	in, err := scan.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	scan.Stdout, scan.Stderr = &out, &out
	if err := scan.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintln(in, nonce); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	for range runs {
		if _, err := scenario.RunProbe(probe.Script, smiDir, "", nonce); err != nil {
			t.Fatal(err)
		}
	}
	in.Close()
	if err := scan.Wait(); err != nil {
		t.Fatalf("scanner: %v: %s", err, out.String())
	}
	var hits, seen, loops int
	if _, err := fmt.Sscan(out.String(), &hits, &seen, &loops); err != nil {
		t.Fatalf("scanner output %q: %v", out.String(), err)
	}
	t.Logf("%d probe runs; the scanner read /proc %d times and saw %d of the probe's processes", runs, loops, seen)
	if hits > 0 {
		t.Errorf("an unprivileged process saw the nonce in %d places:\n%s", hits, out.String())
	}
	if seen < runs {
		t.Errorf("the scanner saw only %d of the probe's processes in %d runs: it cannot tell whether the nonce leaks", seen, runs)
	}
}

// A host value holding a backslash and n (here the host name, set in a private UTS namespace)
// is printed as it is: dash's echo would have turned it into a newline and a forged key.
func TestProbeHostValuesVerbatim(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("no unshare")
	}
	const name = `h\nuid=5\tx`
	// hostname(1) refuses such a name; the kernel takes it.
	cmd := exec.Command("unshare", "-u", "sh", "-c", `printf %s "$1" >/proc/sys/kernel/hostname && exec sh -s`, "sh", name)
	cmd.Stdin = bytes.NewReader(probe.Input("00112233445566778899aabbccddeeff", 5))
	raw, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	s, err := parse.Parse(raw)
	if err != nil {
		t.Errorf("Parse: %v", err)
	}
	if s.Host.Hostname != name || s.Host.UID == nil || *s.Host.UID != 0 {
		t.Errorf("host name %q, uid %v; want %q and 0", s.Host.Hostname, s.Host.UID, name)
	}
}
