//go:build linux

package probe_test

import (
	"bufio"
	"github.com/gputriage/gputriage/internal/testenv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// fakeSystemctl records each call's arguments, one per line, then a line "--end--", in
// calls.log beside it, and answers show with a block per unit named after "--": active for a
// user manager's units, failed for the system's.
const fakeSystemctl = `#!/bin/sh
d=$(dirname "$0")
for a; do printf '%s\n' "$a"; done >>"$d/calls.log"
echo --end-- >>"$d/calls.log"
state=failed
case $1 in --user) state=active ;; esac
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
for u; do printf 'Id=%s\nLoadState=loaded\nActiveState=%s\nSubState=x\nMainPID=0\nResult=success\n\n' "$u" "$state"; done
`

// cgroup2Root is where the unified cgroup hierarchy is mounted, or "".
func cgroup2Root() string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if i := slices.Index(fields, "-"); i > 4 && i+1 < len(fields) && fields[i+1] == "cgroup2" {
			return fields[4]
		}
	}
	return ""
}

// cgroupDirs makes the cgroups at rels below the cgroup2 root for the test, and removes them
// when it ends.
func cgroupDirs(t *testing.T, root string, rels ...string) []string {
	t.Helper()
	var dirs []string
	for _, rel := range rels {
		dir := filepath.Join(root, rel)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skipf("cannot make cgroups here: %v", err)
		}
		t.Cleanup(func() {
			scenario.RemoveCgroups(dir) // once the box's sleep in it is gone
			for d := filepath.Dir(dir); d != root; d = filepath.Dir(d) {
				_ = os.Remove(d) // fails, harmlessly, while another test uses it
			}
		})
		dirs = append(dirs, dir)
	}
	return dirs
}

// sleepInEach is a box script (inBox) that starts a sleep in each cgroup directory given as an
// argument, in order, and then runs the probe from stdin. The box's PID 1 is its sh and PID 2
// the mount of its /dev/shm, so the sleeps are PIDs 3, 4, ...: the test knows them before the
// box starts, to list them in nvidia-smi's answer.
const sleepInEach = `for d; do sleep 3600 & echo "$!" >"$d/cgroup.procs" || exit 96; done
sh -s
`

// TestProbeUserUnits runs the real probe as root over real processes in real cgroups: one in a
// unit of user nobody's manager, one in a system unit, and two in units whose names a user
// chose to attack systemctl's command line. Only systemctl is faked: it records how it was
// called. A user manager's unit is asked of that manager, the system's of the system; a name
// outside systemd's unit-name characters is never passed; every name comes after "--". The
// probe runs in a box (inBox): the calls are exactly these, never about another test's or job's
// process that keeps a deleted /dev/shm file in a unit of its own.
func TestProbeUserUnits(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	root := cgroup2Root()
	if root == "" {
		t.Skip("no cgroup2 hierarchy")
	}
	const mgr = "user.slice/user-65534.slice/user@65534.service/app.slice/"
	// Below its own unit a delegated service names the cgroups: the last is gt-baz.service, and
	// the host's sshd.service is never asked about for it.
	rels := []string{mgr + "gt-foo.service", "system.slice/gt-bar.service", mgr + "-Hgt-evil.service", mgr + "gt x*.service",
		"system.slice/gt-baz.service/payload/system.slice/sshd.service"}
	dirs := cgroupDirs(t, root, rels...)
	// In the box (its PIDs): the probe sees these sleeps and nothing of other tests'.
	user, system, dash, glob, nested := 3, 4, 5, 6, 7
	dir := t.TempDir()
	var apps []scenario.App
	for _, pid := range []int{user, system, dash, glob, nested} {
		apps = append(apps, scenario.App{PID: pid, GPUUUID: "GPU-units-0", UsedMiB: 10, Name: "sleep"})
	}
	smi := scenario.SMI{
		GPUs: []scenario.GPU{{Index: 0, UUID: "GPU-units-0", Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:01:00.0", TotalMiB: 81559, UsedMiB: 40, Driver: "550.54.15"}},
		Apps: apps,
	}
	if err := scenario.WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "systemctl"), []byte(fakeSystemctl), 0o755); err != nil {
		t.Fatal(err)
	}
	raw := inBox(t, dir, "set -- 00112233445566778899aabbccddeeff\n"+probe.Script, sleepInEach, dirs...)
	s, err := parse.Parse(raw)
	if err != nil {
		t.Errorf("Parse: %v", err)
	}
	for i, pid := range []int{user, system, dash, glob, nested} {
		if p := proc(s, pid); p == nil || p.Comm != "sleep" || p.Cgroup.Path != "/"+rels[i] {
			t.Fatalf("PID %d: %+v, want the sleep in %s", pid, p, rels[i])
		}
	}
	log, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	var calls [][]string
	for c := range strings.SplitSeq(strings.TrimSuffix(string(log), "--end--\n"), "--end--\n") {
		calls = append(calls, strings.Split(strings.TrimSuffix(c, "\n"), "\n"))
	}
	props := "Id,LoadState,ActiveState,SubState,MainPID,Result"
	want := [][]string{
		{"show", "--no-pager", "-p", props, "--", "gt-bar.service", "gt-baz.service"},
		{"--user", "--machine=nobody@", "show", "--no-pager", "-p", props, "--", "gt-foo.service", "-Hgt-evil.service"},
	}
	if len(calls) != 2 || !sameArgs(calls[0], want[0]) || !sameArgs(calls[1], want[1]) {
		t.Errorf("systemctl calls:\n%q\nwant\n%q", calls, want)
	}
	units := map[string]parse.Unit{}
	for _, u := range s.Units {
		key := u.Name
		if u.UserManagerUID != nil {
			key = strconv.Itoa(*u.UserManagerUID) + "/" + key
		}
		units[key] = u
	}
	if u, ok := units["65534/gt-foo.service"]; !ok || u.ActiveState != "active" {
		t.Errorf("user unit: %+v (units %+v)", u, s.Units)
	}
	if u, ok := units["gt-bar.service"]; !ok || u.ActiveState != "failed" {
		t.Errorf("system unit: %+v (units %+v)", u, s.Units)
	}
	for _, pid := range []int{user, system, dash, glob, nested} {
		p := proc(s, pid)
		var wantUID *int
		if p.PID == user || p.PID == dash || p.PID == glob {
			wantUID = &[]int{65534}[0]
		}
		if p.PID == nested && p.Cgroup.Unit != "gt-baz.service" {
			t.Errorf("PID %d in %s: unit %q, want gt-baz.service", p.PID, p.Cgroup.Path, p.Cgroup.Unit)
		}
		if (p.Cgroup.UserManagerUID == nil) != (wantUID == nil) {
			t.Errorf("PID %d in %s: unit %s of user manager %v", p.PID, p.Cgroup.Path, p.Cgroup.Unit, p.Cgroup.UserManagerUID)
		}
	}
}

// sameArgs compares a call with the wanted one; the unit names after "--" in any order.
func sameArgs(got, want []string) bool {
	i := slices.Index(want, "--")
	if len(got) != len(want) || i < 0 || !slices.Equal(got[:i+1], want[:i+1]) {
		return false
	}
	a, b := slices.Clone(got[i+1:]), slices.Clone(want[i+1:])
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
