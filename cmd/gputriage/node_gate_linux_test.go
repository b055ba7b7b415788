//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/triage"
)

// newGateBox is a node box (see newNodeBox) whose /dev is its own: a tmpfs holding /dev/null,
// a /dev/nvidia0 any process of the box can open (a plain file: what counts is the fd's
// link), and a /dev/shm of shmSize, so that a test can hold a GPU's device and fill /dev/shm
// without touching this machine's.
func newGateBox(t *testing.T, shmSize string) *nodeBox {
	t.Helper()
	setup := "mount -t tmpfs -o size=4m,mode=755 tmpfs /dev && mknod -m 666 /dev/null c 1 3 && " +
		"touch /dev/nvidia0 && chmod 666 /dev/nvidia0 && mkdir /dev/shm && " +
		"mount -t tmpfs -o size=" + shmSize + ",mode=1777 tmpfs /dev/shm"
	return startBox(t, setup)
}

// gateRun runs `gputriage node-check -v ARGS` in box as Slurm would (no environment but a PATH
// with the fake nvidia-smi first), and reports whether the probe ran: smiDir also holds an
// sh that notes each start in a file before it runs the real one, and node-check starts the
// probe as sh -s from PATH.
func gateRun(t *testing.T, box *nodeBox, bin, smiDir string, env []string, args ...string) (stdout, stderr string, code int, probed bool) {
	t.Helper()
	mark := filepath.Join(smiDir, "probe-ran")
	os.Remove(mark)
	argv := append(box.enter(), "env", "-i", "PATH="+smiDir+":/usr/sbin:/usr/bin:/sbin:/bin", "SLURMD_NODENAME=node1")
	argv = append(append(append(argv, env...), bin, "node-check", "-v"), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("node-check in the box: %v", err)
	}
	_, statErr := os.Stat(mark)
	return out.String(), errb.String(), cmd.ProcessState.ExitCode(), statErr == nil
}

// gateSMIDir writes the fake nvidia-smi serving smi, and the sh that tells the probe ran.
func gateSMIDir(t *testing.T, dir string, smi scenario.SMI) {
	t.Helper()
	if err := scenario.WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	sh := "#!/bin/sh\ntouch " + filepath.Join(dir, "probe-ran") + "\nexec /bin/sh \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "sh"), []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
}

// startInBox runs a python3 program in the box, as a process of its own, and returns its PID
// there once it has written "ready" to its stdout.
func startInBox(t *testing.T, box *nodeBox, program string) int {
	t.Helper()
	argv := append(box.enter(), "python3", "-c", program)
	return testenv.StartReady(t, exec.Command(argv[0], argv[1:]...))
}

// saveBoxCapture, when GPUTRIAGE_IDLE_CAPTURES names a directory, runs the probe in box and
// writes its capture there as NAME.capture: nodecheck's TestIdleGateNeverPassesAProblem
// checks the gate on those captures (nodecheck/testdata/idle) with the others.
func saveBoxCapture(t *testing.T, box *nodeBox, smiDir, name string) {
	t.Helper()
	dir := os.Getenv("GPUTRIAGE_IDLE_CAPTURES")
	if dir == "" {
		return
	}
	argv := append(box.enter(), "env", "-i", "PATH="+smiDir+":/usr/sbin:/usr/bin:/sbin:/bin", "sh", "-s")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = strings.NewReader(string(probe.Input(triage.NewNonce(), 12)))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the probe in the box: %v", err)
	}
	file := strings.NewReplacer(" ", "-", "/", "", "'", "").Replace(name) + ".capture"
	if err := os.WriteFile(filepath.Join(dir, file), out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// holdDevice is a program that holds /dev/nvidia0 open under the comm it is given.
func holdDevice(comm string) string { return holdDeviceN(comm, 1) }

// holdDeviceN is holdDevice with n fds on /dev/nvidia0, as nvidia-persistenced holds many.
func holdDeviceN(comm string, n int) string {
	return fmt.Sprintf(`import ctypes, os, sys, time
ctypes.CDLL(None).prctl(15, %q.encode(), 0, 0, 0)
fds = [os.open("/dev/nvidia0", os.O_RDONLY) for _ in range(%d)]
print("ready", os.getpid(), flush=True)
time.sleep(1000)`, comm, n)
}

// TestNodeCheckIdleGate runs node-check on a node box: on an idle node (nvidia-persistenced
// holding a GPU's device is idle) it answers clean at once, without the probe, and says so
// under -v, and the probe, forced, agrees; with a compute app, ghost memory, a stopped
// process holding a GPU's device, a stopped compute app that took a driver helper's name, or
// /dev/shm filled by a deleted file still mapped, it runs the probe, which then reports what
// the gate could not rule out.
func TestNodeCheckIdleGate(t *testing.T) {
	bin := buildGputriage(t)
	smiDir := t.TempDir()
	gateSMIDir(t, smiDir, *cleanSMI(2))

	t.Run("idle", func(t *testing.T) {
		box := newGateBox(t, "1g")
		startInBox(t, box, holdDevice("nvidia-persiste"))
		saveBoxCapture(t, box, smiDir, "idle")
		for _, env := range [][]string{nil, {"SLURM_SCRIPT_CONTEXT=prolog_slurmd", "SLURM_JOB_GPUS=1"}} {
			out, stderr, code, probed := gateRun(t, box, bin, smiDir, env)
			if code != exitOK || out != "" || probed || !strings.Contains(stderr, "idle gate: clean") {
				t.Errorf("%v: exit %d, probe ran %v, %q %q; want 0, no probe, nothing on stdout, the gate's word on stderr", env, code, probed, out, stderr)
			}
			out, stderr, code, probed = gateRun(t, box, bin, smiDir, env, "--full-probe")
			if code != exitOK || out != "" || !probed {
				t.Errorf("%v --full-probe: exit %d, probe ran %v, %q %q; want 0 from the probe, nothing on stdout", env, code, probed, out, stderr)
			}
		}
	})

	cases := []struct {
		name, shm, program, doubt, want string
		smi                             func(*scenario.SMI, int)
		stop                            bool
		helperFirst                     bool // nvidia-persistenced, holding the device 40 times, starts first
	}{
		{name: "a compute app", shm: "1g", program: holdDevice("python3"), doubt: "apps:",
			smi: func(s *scenario.SMI, pid int) {
				s.GPUs[0].UsedMiB = 40000
				s.Apps = []scenario.App{{PID: pid, GPUUUID: s.GPUs[0].UUID, UsedMiB: 39990, Name: "python3"}}
			}, want: ""},
		// Anyone may name a process as a driver helper is named: one that nvidia-smi lists
		// holding memory is judged as any other, here left over (stopped).
		{name: "a stopped compute app named nvidia-smi", shm: "1g", program: holdDevice("nvidia-smi"), stop: true, doubt: "apps:",
			smi: func(s *scenario.SMI, pid int) {
				s.GPUs[0].UsedMiB = 40000
				s.Apps = []scenario.App{{PID: pid, GPUUUID: s.GPUs[0].UUID, UsedMiB: 39990, Name: "nvidia-smi"}}
			}, want: "gputriage: leftover-process: "},
		{name: "ghost memory", shm: "1g", smi: func(s *scenario.SMI, _ int) { s.GPUs[1].UsedMiB = 30720 },
			doubt: "gpu-used:", want: "gputriage: ghost-memory: "},
		{name: "a stopped process holding GPU 0's device", shm: "1g", program: holdDevice("python3"), stop: true,
			helperFirst: true, doubt: "device:", want: "gputriage: leftover-process: "},
		{name: "/dev/shm filled by a deleted file still mapped", shm: "64m", doubt: "shm-deleted:", want: "gputriage: shm-full: ",
			program: `import mmap, os, time
fd = os.open("/dev/shm/blob", os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 60 << 20)
m = mmap.mmap(fd, 60 << 20)
m.write(b"x" * (60 << 20))
os.close(fd)
os.unlink("/dev/shm/blob")
print("ready", os.getpid(), flush=True)
time.sleep(1000)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			box := newGateBox(t, c.shm)
			if c.helperFirst {
				startInBox(t, box, holdDeviceN("nvidia-persiste", 40))
			}
			pid := 0
			if c.program != "" {
				pid = startInBox(t, box, c.program)
			}
			if c.stop {
				hostPID := boxHostPID(t, box, pid)
				if err := syscall.Kill(hostPID, syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { syscall.Kill(hostPID, syscall.SIGKILL) })
			}
			dir := t.TempDir()
			smi := *cleanSMI(2)
			if c.smi != nil {
				c.smi(&smi, pid)
			}
			gateSMIDir(t, dir, smi)
			saveBoxCapture(t, box, dir, c.name)
			out, stderr, code, probed := gateRun(t, box, bin, dir, nil)
			if !probed || !strings.Contains(stderr, "not proven idle") || !strings.Contains(stderr, c.doubt) {
				t.Errorf("probe ran %v, stderr %q; want the probe run, the gate doubting with %q", probed, stderr, c.doubt)
			}
			if c.want == "" && (code != exitOK || out != "") || c.want != "" && (code != exitFindings || !strings.Contains(out, c.want)) {
				t.Errorf("exit %d, %q; want the probe's verdict %q", code, out, c.want)
			}
		})
	}
}

// boxHostPID is the PID this machine knows a box's process by.
func boxHostPID(t *testing.T, box *nodeBox, pid int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		host, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", host))
		for _, l := range strings.Split(string(status), "\n") {
			if f := strings.Fields(strings.TrimPrefix(l, "NSpid:")); strings.HasPrefix(l, "NSpid:") && len(f) == 2 && f[1] == strconv.Itoa(pid) {
				if ns, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", host)); ns == mustReadlink(fmt.Sprintf("/proc/%d/ns/pid", box.init)) {
					return host
				}
			}
		}
	}
	t.Fatalf("PID %d of the box not found", pid)
	return 0
}

func mustReadlink(p string) string {
	s, _ := os.Readlink(p)
	return s
}
