//go:build linux

package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/probe"
)

// shmHolder is a python3 program that makes the directory argv[1] under /dev/shm, nobody's
// alone (uid 65534: no other user may delete what it holds), and as nobody creates there each
// file argv[2:] names ("NAME:BYTES"), keeps each open,
// deletes it, says "ready PID" and waits. A name with %d gets its own PID (torch_%d).
const shmHolder = `
import os, signal, sys
d = sys.argv[1]
os.makedirs(d)
os.chown(d, 65534, 65534)
os.chmod(d, 0o700)
os.setgid(65534); os.setuid(65534)
held = []
for spec in sys.argv[2:]:
    name, size = spec.rsplit(":", 1)
    if "%d" in name:
        name = name % os.getpid()
    p = os.path.join(d, name)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o600)
    os.ftruncate(fd, int(size))
    os.unlink(p)
    held.append(fd)
print("ready", os.getpid(), flush=True)
signal.pause()
`

// startShmHolder runs shmHolder in a directory of its own under /dev/shm, and returns its PID.
// With box, in that box (its PID, its /dev/shm), where the directory goes with the box;
// without, on this machine, the directory removed when the test ends.
func startShmHolder(t *testing.T, box *nodeBox, files ...string) int {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root to run a process of user nobody")
	}
	dir := "/dev/shm/gt-local"
	var enter []string
	if box != nil {
		enter = box.enter()
	} else {
		d, err := os.MkdirTemp("/dev/shm", "gt-local-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		dir = d
	}
	argv := append(enter, append([]string{"python3", "-c", shmHolder, filepath.Join(dir, "job")}, files...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	return testenv.StartReady(t, cmd)
}

// localRun runs the gputriage binary as a user types it, with PATH set to path (its first
// directory holds an sh that marks each start in the file probe-ran there before it runs the
// real one: --local starts the probe as sh -s from PATH), and reports whether the probe ran.
// With box, it runs there.
func localRun(t *testing.T, box *nodeBox, bin, path string, args ...string) (stdout, stderr string, code int, probed bool) {
	t.Helper()
	first := strings.Split(path, ":")[0]
	mark := filepath.Join(first, "probe-ran")
	os.Remove(mark)
	if err := os.WriteFile(filepath.Join(first, "sh"), []byte("#!/bin/sh\ntouch "+mark+"\nexec /bin/sh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{bin}, args...)
	if box != nil {
		argv = append(box.enter(), argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + path, "HOME=" + t.TempDir()}
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		t.Fatalf("gputriage %v: %v", args, err)
	}
	_, statErr := os.Stat(mark)
	return out.String(), errb.String(), cmd.ProcessState.ExitCode(), statErr == nil
}

// TestLocalNoDriver: `gputriage --local` on this machine, which has no NVIDIA driver, while a
// process of user nobody keeps a zero-byte torch_PID in a directory of /dev/shm, as on the
// machine of issue 19. Whatever the format, and for collect --local --save DIR too, it says
// so in one line on stderr and exits 3, and the probe never starts: nothing it could describe
// (the procs section that ran into its time limit) costs time. A wall clock is no assertion
// on a loaded machine; that the probe did not run is.
func TestLocalNoDriver(t *testing.T) {
	if why := probe.NoDriver(); why == "" {
		t.Skip("SKIPPING: this machine has an NVIDIA driver or nvidia-smi")
	}
	startShmHolder(t, nil, "torch_%d:0")
	bin := buildGputriage(t)
	path := t.TempDir() + ":/usr/sbin:/usr/bin:/sbin:/bin"
	save := filepath.Join(t.TempDir(), "saved")
	want := "gputriage: no NVIDIA GPU or driver on this machine (no nvidia-smi on PATH or in the driver's directories, no /dev/nvidia*, no /proc/driver/nvidia)\n"
	for _, args := range [][]string{{"--local"}, {"--local", "--format", "json"}, {"--local", "-q"}, {"collect", "--local", "--save", save}} {
		out, stderr, code, probed := localRun(t, nil, bin, path, args...)
		if out != "" || stderr != want || code != exitHostsFailed || probed {
			t.Errorf("gputriage %s: exit %d, probe ran %v\nstdout %q\nstderr %q\nwant exit 3, no probe, nothing on stdout and on stderr %q",
				strings.Join(args, " "), code, probed, out, stderr, want)
		}
	}
	if _, err := os.Stat(save); err == nil {
		t.Errorf("collect saved %s on a machine with nothing to triage", save)
	}
}

// TestLocalSaveReplay: with a driver (the fake nvidia-smi of internal/scenario first on
// PATH), `gputriage --local --save DIR` and `gputriage collect --local --save DIR` keep
// DIR/HOSTNAME.capture, and `gputriage --replay DIR` reads it back to the report --local
// printed. Meanwhile a process of user nobody keeps deleted /dev/shm files in a directory of
// its own: a zero-byte one and a PyTorch segment, which get no advice at that depth, and a
// scratch file of 1 MiB, whose step names the program and the user as a GPU process's does.
func TestLocalSaveReplay(t *testing.T) {
	// In a box of its own (a PID namespace, a /dev/shm of its own), so that no other process's
	// fds on /dev/shm files can crowd the holder's out of the probe's fds section.
	box := startBox(t, "mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm")
	pid := startShmHolder(t, box, "torch_%d:4096", "empty:0", "scratch:1048576")
	bin := buildGputriage(t)
	smiDir := t.TempDir()
	gateSMIDir(t, smiDir, *cleanSMI(2))
	path := smiDir + ":/usr/sbin:/usr/bin:/sbin:/bin"
	host, _ := os.Hostname()
	dir := t.TempDir()

	saved := filepath.Join(dir, "triage")
	report, stderr, code, probed := localRun(t, box, bin, path, "--local", "--save", saved)
	if code > exitFindings || !probed {
		t.Fatalf("--local --save: exit %d, probe ran %v\n%s%s", code, probed, report, stderr)
	}
	capture := filepath.Join(saved, host+".capture")
	if _, err := os.Stat(capture); err != nil {
		t.Fatalf("--local --save %s: %v", saved, err)
	}
	again, _, code2, _ := localRun(t, box, bin, path, "--replay", saved)
	if code2 != code || again != report {
		t.Errorf("--replay %s: exit %d, want %d; the report differs:\n%s\nwant\n%s", saved, code2, code, again, report)
	}

	collected := filepath.Join(dir, "collect")
	out, stderr, code, _ := localRun(t, box, bin, path, "collect", "--local", "--save", collected)
	if code != exitOK || !regexp.MustCompile(`^`+regexp.QuoteMeta(host)+`: saved [0-9]+ bytes\n$`).MatchString(out) {
		t.Errorf("collect --local --save: exit %d\n%s%s", code, out, stderr)
	}
	if _, _, code, _ := localRun(t, box, bin, path, "--replay", filepath.Join(collected, host+".capture")); code > exitFindings {
		t.Errorf("--replay of collect's capture: exit %d", code)
	}

	holder := fmt.Sprintf("PID %d", pid)
	for _, l := range strings.Split(report, "\n") {
		if strings.Contains(l, "torch_") || strings.Contains(l, "/empty") {
			t.Errorf("a zero-byte or transient file is in the report: %q", l)
		}
	}
	lead := regexp.MustCompile(`(?m)^  [0-9]+\. Stop ` + holder + ` \(python3[^)]*, nobody\): frees 1 MiB of /dev/shm`)
	if !lead.MatchString(report) {
		t.Errorf("no step that stops %s naming its program and user (nobody):\n%s", holder, report)
	}
}
