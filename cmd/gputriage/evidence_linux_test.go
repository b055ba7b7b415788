//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// Evidence is weighed by who could have made it (issue 17 §1). The users: alice (uid 1000)
// runs the servers, mallory (uid 1001) is another, unprivileged user of the same host.
const (
	alice   = 1000
	mallory = 1001
)

// asUser runs argv as uid (its own gid, no other groups) through prefix (nil: here), and fails
// the test if it fails.
func asUser(t *testing.T, prefix []string, uid int, argv ...string) {
	t.Helper()
	id := strconv.Itoa(uid)
	full := append(append(append([]string(nil), prefix...), "setpriv", "--reuid="+id, "--regid="+id, "--clear-groups", "--"), argv...)
	if out, err := exec.Command(full[0], full[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v as uid %d: %v: %s", argv, uid, err, out)
	}
}

// sharedCache is a world-writable directory (0777, no sticky bit: a Hugging Face cache many
// users share) that every user can reach, with alice's model directory models--Qwen in it.
// It returns the cache and the model directory.
func sharedCache(t *testing.T) (cache, model string) {
	t.Helper()
	top := t.TempDir()
	// The test's own directories, root's: every user may reach what is below them.
	os.Chmod(top, 0o755)
	os.Chmod(filepath.Dir(top), 0o755)
	cache, model = filepath.Join(top, "hf"), filepath.Join(top, "hf", "models--Qwen")
	if err := os.Mkdir(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	asUser(t, nil, alice, "mkdir", "-m", "0755", model)
	return cache, model
}

// evidenceLab is a real OpenSSH host, "gpu-ev", where alice runs three servers, each on a GPU
// of its own: shared, whose weights lie in a 0777 directory of /dev/shm (she made it so that
// her colleagues could use them); cache, whose model is a directory in a world-writable
// cache; and left, the true leftover, whose weights she deleted from her own 0755 directory
// in /dev/shm. Then mallory deletes shared's weights and renames cache's model directory.
type evidenceLab struct {
	*fixLab
	shared, cache, left *scenario.Proc
}

func newEvidenceLab(t *testing.T) *evidenceLab {
	sshdtest.SSHDPath(t)
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (other uids)")
	}
	l := &evidenceLab{fixLab: &fixLab{dir: t.TempDir()}}
	l.state = filepath.Join(l.dir, "state")
	key, pub := sshdtest.UserKey(t, l.dir, "ed25519")
	smi := cleanSMI(3)
	l.sshd = sshdtest.Start(t, sshdtest.Config{Name: "gpu-ev", Addr: "127.0.0.181", Port: 2381, AuthorizedKeys: []string{pub}, SMI: smi})
	enter := l.sshd.Enter(t)
	tag := fmt.Sprintf("%d", time.Now().UnixNano())
	sharedDir := "/dev/shm/team-" + tag
	asUser(t, enter, alice, "mkdir", "-m", "0777", sharedDir)
	cache, model := sharedCache(t)
	start := func(s scenario.Server) *scenario.Proc {
		s.Enter, s.UID, s.Python = enter, alice, "/usr/bin/python3"
		p, err := scenario.Start(s)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		return p
	}
	l.shared = start(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Args: []string{"--model", sharedDir},
		ShmDir: sharedDir, ShmFiles: 2, ShmBytes: 1 << 20})
	l.cache = start(scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", model, "--tp", "1"}})
	l.left = start(scenario.Server{Module: "sglang.launch_server", Args: []string{"--model-path", "/dev/shm/alice-" + tag, "--tp", "1"},
		ShmDir: "/dev/shm/alice-" + tag, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true})
	// mallory's doing: neither needs more than write access to the directory.
	asUser(t, enter, mallory, "sh", "-c", `rm -f -- "$1"/*.safetensors`, "sh", sharedDir)
	asUser(t, nil, mallory, "mv", "--", model, filepath.Join(cache, "models--Qwen.old"))
	for i, p := range []*scenario.Proc{l.shared, l.cache, l.left} {
		smi.GPUs[i].UsedMiB = 30009
		smi.Apps = append(smi.Apps, scenario.App{PID: p.PID, GPUUUID: smi.GPUs[i].UUID, UsedMiB: 30000, Name: "python3"})
	}
	smi.Dynamic, smi.ReleaseDelay = true, time.Second
	if err := scenario.WriteFakeSMI(l.sshd.SMIDir(), *smi); err != nil {
		t.Fatal(err)
	}
	fakeLogger(t, l.sshd)
	l.config = labClientConfig(t, l.dir, "gpu-ev", l.sshd, key)
	return l
}

// Another user deleting a server's weights from a shared 0777 directory, or renaming its model
// directory in a world-writable cache, makes no target of it: the plan shows it as needing
// the operator's judgement, with why, and fix --yes leaves it running. The true leftover, whose
// weights only alice (or root) could have deleted from her own directory, is named and stopped.
// Named with --include, a server needing judgement is stopped too.
func TestFixWeighsEvidenceByWhoCouldMakeIt(t *testing.T) {
	l := newEvidenceLab(t)
	// The report names neither server abandoned, in any line, and suggests no stop of either.
	report, _, _ := l.gputriage(t, nil, "gpu-ev")
	t.Logf("gputriage gpu-ev:\n%s", report)
	for _, pid := range []int{l.shared.PID, l.cache.PID} {
		blame := regexp.MustCompile(fmt.Sprintf(`PID %d looks abandoned|kill (-TERM |-s TERM )?%d\b`, pid, pid))
		if m := blame.FindString(report); m != "" || !strings.Contains(report, fmt.Sprintf("PID %d (", pid)) {
			t.Errorf("the report on PID %d: %q (it should be named as needing judgement, never blamed)", pid, m)
		}
	}
	_, out, _, raw, p := l.planOut(t, "gpu-ev", 1)
	hp := p.Hosts[0]
	if hp.Targets[0].PID != l.left.PID || hp.Targets[0].Finding != "leftover-process" {
		t.Errorf("target %+v, want PID %d's leftover-process", hp.Targets[0], l.left.PID)
	}
	judged := map[int]string{}
	for _, j := range hp.Judge {
		judged[j.PID] = j.Judge
	}
	if len(hp.Judge) != 2 || !strings.Contains(judged[l.shared.PID], "a directory every user may write") ||
		!strings.Contains(judged[l.cache.PID], "model-path-gone: it lives in") {
		t.Errorf("judge list %+v, want PIDs %d (shm-deleted) and %d (model-path-gone), each saying why\n%s", hp.Judge, l.shared.PID, l.cache.PID, raw)
	}
	for _, pid := range []int{l.shared.PID, l.cache.PID} {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^  needs your judgement, not applied: PID %d .*\n .*--include %d`, pid, pid)).MatchString(out) {
			t.Errorf("the plan does not show PID %d as needing judgement:\n%s", pid, out)
		}
	}

	out, errOut, code := l.fix(t, nil, "--yes", "gpu-ev")
	t.Logf("gputriage fix --yes gpu-ev:\n%s", out)
	target := func(pid int) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`(?m)^  kill -s TERM %d$`, pid)) }
	if code != exitOK || !target(l.left.PID).MatchString(out) {
		t.Errorf("exit %d, want 0 and the leftover stopped\n%s\n%s", code, out, errOut)
	}
	for _, pid := range []int{l.shared.PID, l.cache.PID} {
		if target(pid).MatchString(out) || regexp.MustCompile(fmt.Sprintf(`PID %d \S+: stopped`, pid)).MatchString(out) || !l.alive(t, pid) {
			t.Errorf("PID %d, whose evidence another user made, was stopped (alive %v):\n%s", pid, l.alive(t, pid), out)
		}
	}
	if l.alive(t, l.left.PID) {
		t.Errorf("the leftover %d still runs", l.left.PID)
	}

	out, errOut, code = l.fix(t, nil, "--yes", "--include", strconv.Itoa(l.shared.PID), "gpu-ev")
	if code != exitOK || l.alive(t, l.shared.PID) || !l.alive(t, l.cache.PID) {
		t.Errorf("--include %d: exit %d, shared alive %v, cache alive %v\n%s\n%s", l.shared.PID, code,
			l.alive(t, l.shared.PID), l.alive(t, l.cache.PID), out, errOut)
	}
}

// A reviewed plan applies a target needing judgement only when the operator marked it
// "include": true, and only while a fresh probe still names it so.
func TestFixPlanFileIncludesJudged(t *testing.T) {
	l := newEvidenceLab(t)
	path, _, _, raw, _ := l.planOut(t, "gpu-ev", 1)
	edited := strings.Replace(string(raw), fmt.Sprintf(`"pid": %d,`, l.cache.PID), fmt.Sprintf(`"include": true, "pid": %d,`, l.cache.PID), 1)
	if edited == string(raw) {
		t.Fatalf("no judge entry of %d in\n%s", l.cache.PID, raw)
	}
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := l.fix(t, nil, "--yes", "--apply", path)
	if code != exitOK || l.alive(t, l.cache.PID) || l.alive(t, l.left.PID) || !l.alive(t, l.shared.PID) {
		t.Errorf("exit %d; alive: cache %v (included), left %v, shared %v (not)\n%s\n%s", code,
			l.alive(t, l.cache.PID), l.alive(t, l.left.PID), l.alive(t, l.shared.PID), out, errOut)
	}
}

// node-check --drain never drains on evidence another user could have made: alice's healthy
// server, whose weights mallory deleted from a shared 0777 directory of /dev/shm, leaves the
// node clean. The node is a box of its own (PID and mount namespaces, its own /dev/shm);
// scontrol there records what it is asked.
func TestNodeCheckDoesNotDrainOnWeakEvidence(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: needs root (other uids, namespaces)")
	}
	box := newNodeBox(t)
	gputriage := buildGputriage(t)
	dir := "/dev/shm/team"
	asUser(t, box.enter(), alice, "mkdir", "-m", "0777", dir)
	p, err := scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Args: []string{"--model", dir},
		ShmDir: dir, ShmFiles: 2, ShmBytes: 1 << 20, UID: alice, Python: "/usr/bin/python3", Enter: box.enter()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	asUser(t, box.enter(), mallory, "sh", "-c", `rm -f -- "$1"/*.safetensors`, "sh", dir)
	bin := t.TempDir()
	if err := scenario.WriteFakeSMI(bin, slurmSMI(p.PID)); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(bin, "scontrol.log")
	scontrol := "#!/bin/sh\nprintf '%s\\n' \"$*\" >>" + calls + "\n"
	if err := os.WriteFile(filepath.Join(bin, "scontrol"), []byte(scontrol), 0o755); err != nil {
		t.Fatal(err)
	}
	argv := append(box.enter(), "env", "PATH="+bin+":/usr/bin:/bin", "SLURMD_NODENAME=node1", gputriage, "node-check", "--drain")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	log, _ := os.ReadFile(calls)
	if err != nil || strings.Contains(string(log), "state=drain") || strings.Contains(string(out), "drained") {
		t.Errorf("node-check --drain: %v\n%s\nscontrol: %s", err, out, log)
	}
	if strings.Contains(string(out), strconv.Itoa(p.PID)) {
		t.Errorf("node-check names the healthy server %d: %s", p.PID, out)
	}
}
