//go:build linux

package probe_test

import (
	"bufio"
	"github.com/gputriage/gputriage/internal/testenv"
	"os"
	"os/exec"
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

// inCgroup starts a sleep in the cgroup at rel below the cgroup2 root (made for the test).
func inCgroup(t *testing.T, root, rel string) int {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Skipf("cannot make cgroups here: %v", err)
	}
	cmd := exec.Command("sleep", "3600")
	cmd.SysProcAttr = testenv.DieWithTest(false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for d := dir; d != root; d = filepath.Dir(d) {
			_ = os.Remove(d) // fails, harmlessly, while another test process is inside
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Skipf("cannot move a process into a cgroup here: %v", err)
	}
	return cmd.Process.Pid
}

// TestProbeUserUnits runs the real probe as root over real processes in real cgroups: one in a
// unit of user nobody's manager, one in a system unit, and two in units whose names a user
// chose to attack systemctl's command line. Only systemctl is faked: it records how it was
// called. A user manager's unit is asked of that manager, the system's of the system; a name
// outside systemd's unit-name characters is never passed; every name comes after "--".
func TestProbeUserUnits(t *testing.T) {
	testenv.SkipShort(t, "probe on this host")
	needRootLinux(t)
	root := cgroup2Root()
	if root == "" {
		t.Skip("no cgroup2 hierarchy")
	}
	const mgr = "user.slice/user-65534.slice/user@65534.service/app.slice/"
	user := inCgroup(t, root, mgr+"gt-foo.service")
	system := inCgroup(t, root, "system.slice/gt-bar.service")
	dash := inCgroup(t, root, mgr+"-Hgt-evil.service")
	glob := inCgroup(t, root, mgr+"gt x*.service")
	// Below its own unit a delegated service names the cgroups: this is gt-baz.service, and
	// the host's sshd.service is never asked about for it.
	nested := inCgroup(t, root, "system.slice/gt-baz.service/payload/system.slice/sshd.service")
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
	raw, err := scenario.RunProbe(probe.Script, dir, "", "00112233445566778899aabbccddeeff")
	if err != nil {
		t.Fatal(err)
	}
	s, err := parse.Parse(raw)
	if err != nil {
		t.Errorf("Parse: %v", err)
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
	for _, p := range s.Processes {
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
