//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/fix"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/systemdtest"
)

const unitHub = "gpuhub.service"

// A root service that starts its users' work as those users (a notebook hub, a batch
// system's starter) runs one user's GPU server; that user pauses it (SIGSTOP), which makes it
// a leftover. Its own process is what fix may stop: the service's manager vouches for the
// root main process, not for what a user runs under it, so fix signals the user's PID and
// never plans systemctl stop of the service, which runs on with its main process.
func TestFixUnitSpawnedUserProcess(t *testing.T) {
	sshdtest.SSHDPath(t)
	dir := t.TempDir()
	l := &unitLab{fixLab: &fixLab{dir: dir, state: filepath.Join(dir, "state")}}
	// The user's server must read its module and write its ready file: a directory of its own.
	hub, err := os.MkdirTemp("", "gputriage-hub-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hub) })
	srv, err := systemdtest.NewServer(hub, scenario.Server{Module: "sglang.launch_server", Args: []string{"--tp", "1"}})
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(hub, "hub.sh")
	body := "setpriv --reuid=1000 --regid=1000 --clear-groups -- \"$@\" &\nwhile :; do sleep 3600; done\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := filepath.Walk(hub, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, 1000, 1000)
	}); err != nil {
		t.Fatal(err)
	}
	unit := strings.Replace(srv.Unit, "ExecStart=", "ExecStart=/bin/sh "+script+" ", 1)
	l.sd = systemdtest.Start(t, systemdtest.Config{Name: "gpu-unit", Journal: true, Units: map[string]string{unitHub: unit}})
	var userPID int
	l.sd.WaitFor(t, unitHub+" ready", 20*time.Second, func() bool {
		b, err := os.ReadFile(srv.Ready)
		userPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && userPID > 0
	})
	mainPID := l.sd.MainPID(t, unitHub)
	if mainPID == userPID || l.sd.Property(t, unitHub, "ActiveState") != "active" {
		t.Fatalf("%s: main PID %d, the user's server %d, state %s", unitHub, mainPID, userPID, l.sd.Property(t, unitHub, "ActiveState"))
	}
	l.pause(t, userPID)
	smi := cleanSMI(2)
	smi.GPUs[0].UsedMiB = 40009
	smi.Apps = []scenario.App{{PID: userPID, GPUUUID: smi.GPUs[0].UUID, UsedMiB: 40000, Name: "python3"}}
	l.connect(t, smi)

	plan := filepath.Join(dir, "plan.json")
	out, errOut, code := l.fix(t, nil, "--plan-out", plan, "gpu-unit")
	t.Logf("gputriage fix --plan-out:\n%s", out)
	if code != exitOK {
		t.Fatalf("--plan-out: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	f, err := os.Open(plan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := fix.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Hosts) != 1 || len(p.Hosts[0].Targets) != 1 {
		t.Fatalf("plan: %+v, want one target", p)
	}
	if tg := p.Hosts[0].Targets[0]; tg.Kind != fix.KindKill || tg.PID != userPID || tg.UID != 1000 || tg.Name != "" {
		t.Errorf("target %+v, want kill of the user's PID %d", tg, userPID)
	}
	if strings.Contains(out+errOut, "systemctl") || strings.Contains(out+errOut, unitHub+" ") {
		t.Errorf("fix names the service for a stop:\n%s\n%s", out, errOut)
	}
	out, errOut, code = l.fix(t, nil, "--yes", "gpu-unit")
	t.Logf("gputriage fix --yes:\n%s", out)
	if code != exitOK {
		t.Errorf("--yes: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	if st, _ := l.stat(t, userPID); st != "" {
		t.Errorf("the user's leftover %d is still there (state %s)", userPID, st)
	}
	if st := l.sd.Property(t, unitHub, "ActiveState"); st != "active" || l.sd.MainPID(t, unitHub) != mainPID {
		t.Errorf("%s: %s with main PID %d, want active with %d as before", unitHub, st, l.sd.MainPID(t, unitHub), mainPID)
	}
	if recs := l.records(t); len(recs) != 1 || recs[0].Target.Kind != fix.KindKill || recs[0].Result.Outcome != fix.Stopped {
		t.Errorf("audit records: %s", fmt.Sprint(recs))
	}
}
