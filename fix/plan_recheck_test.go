package fix

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// Recheck applies only what the fresh plan names alike: an edited or stale plan can leave
// targets out, never add or change one.
func TestRecheck(t *testing.T) {
	boot := strings.Repeat("ab", 16)
	kill := Target{Kind: KindKill, PID: 20629, StartTicks: 1214508, UID: 1000, ArgvSHA256: strings.Repeat("1", 64), FreesMiB: map[int]int64{0: 55286}}
	unit := Target{Kind: KindStopUnit, Name: "vllm.service", PID: 3100, StartTicks: 99, UID: 1000, ArgvSHA256: strings.Repeat("2", 64)}
	with := func(t Target, edit func(*Target)) Target { edit(&t); return t }
	cases := []struct {
		name    string
		planned []Target
		boot    string // the fresh probe's; boot when empty
		fresh   []Target
		want    string // the kept PIDs and the refusals' details
	}{
		{"same", []Target{kill, unit}, "", []Target{unit, kill}, "keep 20629 keep 3100"},
		{"resumed: no longer named", []Target{kill, unit}, "", []Target{unit}, "refuse 20629 not-named keep 3100"},
		{"nothing named now", []Target{kill}, "", nil, "refuse 20629 not-named"},
		{"rebooted", []Target{kill}, strings.Repeat("cd", 16), []Target{kill}, "refuse 20629 boot-id-differs"},
		{"restarted", []Target{kill}, "", []Target{with(kill, func(t *Target) { t.StartTicks++ })}, "refuse 20629 start-time-differs"},
		{"other owner", []Target{kill}, "", []Target{with(kill, func(t *Target) { t.UID = 0 })}, "refuse 20629 uid-differs"},
		{"other argv", []Target{kill}, "", []Target{with(kill, func(t *Target) { t.ArgvSHA256 = strings.Repeat("f", 64) })}, "refuse 20629 argv-differs"},
		{"edited to stop sshd.service", []Target{with(kill, func(t *Target) { t.Kind, t.Name = KindStopUnit, "sshd.service" })}, "", []Target{kill}, "refuse 20629 action-differs"},
		{"edited to another unit", []Target{with(unit, func(t *Target) { t.Name = "ssh.service" })}, "", []Target{unit}, "refuse 3100 action-differs"},
		{"edited to another runtime", []Target{{Kind: KindStopContainer, Runtime: "podman", Name: "abc", PID: 7, ArgvSHA256: kill.ArgvSHA256}}, "",
			[]Target{{Kind: KindStopContainer, Runtime: "docker", Name: "abc", PID: 7, ArgvSHA256: kill.ArgvSHA256}}, "refuse 7 action-differs"},
		{"edited to kill the unit's process", []Target{with(unit, func(t *Target) { t.Kind, t.Name = KindKill, "" })}, "", []Target{unit}, "refuse 3100 action-differs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fb := boot
			if c.boot != "" {
				fb = c.boot
			}
			keep, refused := recheck(HostPlan{Host: "h", BootID: boot, Targets: c.planned}, HostPlan{Host: "h", BootID: fb, Targets: c.fresh}, procsOf(c.fresh))
			var got []string
			for _, tg := range c.planned {
				for _, k := range keep.Targets {
					if k.PID == tg.PID {
						got = append(got, "keep", strconv.Itoa(k.PID))
					}
				}
				for _, r := range refused {
					if r.Target.PID == tg.PID {
						got = append(got, "refuse", strconv.Itoa(r.Target.PID), r.Detail)
					}
				}
			}
			if s := strings.Join(got, " "); s != c.want {
				t.Errorf("got %q, want %q", s, c.want)
			}
			if keep.Host != "h" || keep.BootID != boot || len(keep.Targets)+len(refused) != len(c.planned) {
				t.Errorf("keep %+v, refused %+v", keep, refused)
			}
		})
	}
}

// A kept target is the fresh one: the process's state (stopped or not) and memory as they are
// now, so SIGCONT follows SIGTERM exactly when it is stopped now.
func TestRecheckKeepsFreshState(t *testing.T) {
	planned := Target{Kind: KindKill, PID: 42, StartTicks: 5, ArgvSHA256: strings.Repeat("1", 64), Stopped: true, FreesMiB: map[int]int64{0: 100}}
	fresh := planned
	fresh.Stopped, fresh.FreesMiB = false, map[int]int64{0: 80, 1: 20}
	keep, refused := recheck(HostPlan{BootID: "b", Targets: []Target{planned}}, HostPlan{BootID: "b", Targets: []Target{fresh}}, procsOf([]Target{fresh}))
	if len(refused) != 0 || len(keep.Targets) != 1 || keep.Targets[0].Stopped || keep.Targets[0].FreesMiB[1] != 20 {
		t.Errorf("keep %+v, refused %+v", keep, refused)
	}
}

// procsOf describes the processes of targets as a probe would.
func procsOf(targets []Target) map[int]*parse.Process {
	m := map[int]*parse.Process{}
	for _, t := range targets {
		m[t.PID] = &parse.Process{PID: t.PID, StartTicks: &t.StartTicks, UID: &t.UID, ArgvSHA256: t.ArgvSHA256}
	}
	return m
}

// The probe describes the restarted process (the same PID, another start time) that no
// finding names: the refusal says what differs, not merely that it is not named.
func TestRecheckSaysWhatDiffers(t *testing.T) {
	planned := Target{Kind: KindKill, PID: 42, StartTicks: 5, UID: 7, ArgvSHA256: strings.Repeat("1", 64)}
	now := planned
	now.StartTicks = 9
	_, refused := recheck(HostPlan{BootID: "b", Targets: []Target{planned}}, HostPlan{BootID: "b"}, procsOf([]Target{now}))
	if len(refused) != 1 || refused[0].Detail != "start-time-differs" {
		t.Errorf("refused %+v", refused)
	}
}

// Against the seed incident's capture: its plan stands; targets edited into the plan are
// refused: another PID, and the leftover's own identity to stop sshd.service.
func TestRecheckSeedIncident(t *testing.T) {
	s, r := seed(t, strings.Repeat("ab", 16))
	hp := BuildHost("ct200", s, r)
	if len(hp.Targets) != 1 {
		t.Fatalf("plan %+v", hp)
	}
	other := hp.Targets[0]
	other.PID = 4242
	sshd := hp.Targets[0]
	sshd.Kind, sshd.Name = KindStopUnit, "sshd.service"
	hp.Targets = append(hp.Targets, other, sshd)
	keep, refused := Recheck(hp, s, r)
	got := fmt.Sprint(len(keep.Targets), keep.Targets[0].PID)
	for _, x := range refused {
		got += fmt.Sprintf(" %d %s %s", x.Target.PID, x.Target.Kind, x.Detail)
	}
	if want := "1 20629 4242 kill not-named 20629 stop-unit action-differs"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// A probe as a user other than root does not judge root's leftover: the refusal says that the
// login lacks the permission (--sudo), not that the leftover is healthy.
func TestRecheckNotRoot(t *testing.T) {
	s, r := seed(t, strings.Repeat("ab", 16))
	hp := BuildHost("ct200", s, r)
	nobody := 65534
	s.Host.UID = &nobody
	s.Processes = nil // what it may not read, it does not describe
	_, refused := Recheck(hp, s, diagnose.Diagnose(s, *s.Host.Time))
	if len(refused) != 1 || refused[0].Detail != "permission" {
		t.Errorf("refused %+v", refused)
	}
}

// A plan naming a host twice, or a PID twice on a host, is refused whole: each would be
// applied twice at once.
func TestReadRefusesTwice(t *testing.T) {
	s, r := seed(t, strings.Repeat("ab", 16))
	hp := BuildHost("ct200", s, r)
	twiceTarget := hp
	twiceTarget.Targets = append(slices.Clone(hp.Targets), hp.Targets[0])
	for _, c := range []struct {
		hosts []HostPlan
		want  string
	}{
		{[]HostPlan{hp, hp}, `host "ct200" is in the plan twice`},
		{[]HostPlan{twiceTarget}, "pid 20629 is a target twice"},
	} {
		var b bytes.Buffer
		if err := Write(&b, Plan{Version: Version, ID: "0011223344556677", Hosts: c.hosts}); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(&b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Read: %v, want %q", err, c.want)
		}
	}
}

// A target needing judgement is applied only once named (Include), and then kept only while
// the fresh probe still names the process, in its judge list or as a target; one not named
// from the judge list is never kept on the fresh judge list alone.
func TestRecheckJudged(t *testing.T) {
	boot := strings.Repeat("ab", 16)
	weak := Target{Kind: KindKill, PID: 4242, StartTicks: 7, UID: 1000, ArgvSHA256: strings.Repeat("3", 64), Judge: "shm-deleted: ..."}
	planned := HostPlan{Host: "h", BootID: boot, Judge: []Target{weak}}
	if hp := planned.Include(nil); len(hp.Targets) != 0 || len(hp.Judge) != 1 {
		t.Fatalf("not named, yet a target: %+v", hp)
	}
	named := planned.Include([]int{4242})
	if len(named.Targets) != 1 || !named.Targets[0].Include || len(named.Judge) != 0 {
		t.Fatalf("named, not a target: %+v", named)
	}
	for _, c := range []struct {
		name         string
		planned      HostPlan
		fresh        HostPlan
		kept, detail string
	}{
		{"named, still judged", named, HostPlan{BootID: boot, Judge: []Target{weak}}, "4242", ""},
		{"named, now a leftover", named, HostPlan{BootID: boot, Targets: []Target{weak}}, "4242", ""},
		{"named, no longer named", named, HostPlan{BootID: boot}, "", DetailNotNamed},
		{"a leftover then, judged now", HostPlan{BootID: boot, Targets: []Target{weak}}, HostPlan{BootID: boot, Judge: []Target{weak}}, "", DetailNotNamed},
	} {
		keep, refused := recheck(c.planned, c.fresh, procsOf([]Target{weak}))
		kept, detail := "", ""
		for _, k := range keep.Targets {
			kept += strconv.Itoa(k.PID)
		}
		for _, r := range refused {
			detail += r.Detail
		}
		if kept != c.kept || detail != c.detail {
			t.Errorf("%s: kept %q refused %q, want %q %q", c.name, kept, detail, c.kept, c.detail)
		}
	}
}

// In a plan file, a judge entry the operator marked "include": true reads as a target.
func TestReadIncludesJudged(t *testing.T) {
	weak := Target{Kind: KindKill, PID: 4242, StartTicks: 7, UID: 1000, ArgvSHA256: strings.Repeat("3", 64), Judge: "why"}
	p := Plan{Version: Version, ID: "0011223344556677", Hosts: []HostPlan{{Host: "h", BootID: strings.Repeat("ab", 16), Targets: []Target{}, Judge: []Target{weak}}}}
	var b bytes.Buffer
	if err := Write(&b, p); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&b)
	if err != nil || len(got.Hosts[0].Targets) != 0 || len(got.Hosts[0].Judge) != 1 {
		t.Fatalf("unmarked: %+v %v", got, err)
	}
	b.Reset()
	Write(&b, p)
	edited := strings.Replace(b.String(), `"pid": 4242`, `"include": true, "pid": 4242`, 1)
	got, err = Read(strings.NewReader(edited))
	if err != nil || len(got.Hosts[0].Targets) != 1 || got.Hosts[0].Targets[0].PID != 4242 || len(got.Hosts[0].Judge) != 0 {
		t.Fatalf("marked: %+v %v", got, err)
	}
}
