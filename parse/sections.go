package parse

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// maxContestedShown bounds how many contested items a tamper note names.
const maxContestedShown = 10

// tampered notes that section held, more than once, what the probe prints once: what was
// contested is not used, so that no value a host's user controls can overrule the probe.
func (p *snapParser) tampered(section, what string, items []string) {
	shown := items
	more := ""
	if len(shown) > maxContestedShown {
		shown, more = shown[:maxContestedShown], fmt.Sprintf(" and %d more", len(items)-maxContestedShown)
	}
	q := make([]string, len(shown))
	for i, s := range shown {
		q[i] = strconv.QuoteToASCII(clip(s, 120))
	}
	p.note(NoteCaptureTampered, "section %s: %s: %s%s: none of their copies is used (the probe prints each once; a name, path or command line on the host may have tried to forge them)",
		section, what, strings.Join(q, ", "), more)
}

// fdNames names descriptors "PID N fd M" for a tamper note.
func fdNames(sizes []FDSize, fds []OpenFD) []string {
	var out []string
	for _, z := range sizes {
		out = append(out, fmt.Sprintf("PID %d fd %d", z.PID, z.FD))
	}
	for _, f := range fds {
		out = append(out, fmt.Sprintf("PID %d fd %d", f.PID, f.FD))
	}
	return out
}

func pidNames(pids []int) []string {
	out := make([]string, len(pids))
	for i, pid := range pids {
		out[i] = "PID " + strconv.Itoa(pid)
	}
	return out
}

// fds reads the fds section, fills the device holders and returns every descriptor.
func (p *snapParser) fds() []OpenFD {
	s := p.s
	sep, parseFDs := byte('\n'), ParseFDs
	if p.c.Version >= 2 {
		sep, parseFDs = 0, ParseFDsV2
	}
	r, sec := p.body("fds", sep)
	if sec == nil {
		return nil
	}
	fds, denied, contested, err := parseFDs(r)
	p.fail(sec, err)
	if len(contested) > 0 {
		p.tampered("fds", "descriptors listed twice", fdNames(nil, contested))
	}
	s.FDsDenied = denied
	if denied != nil && denied.Links > 0 {
		p.note(NoteFDsUnreadable, "%d fd links under /proc could not be read (permission denied): processes using GPUs or /dev/shm may be missing", denied.Links)
	}
	for _, f := range fds {
		if strings.HasPrefix(f.Target, "/dev/nvidia") {
			s.Holders = append(s.Holders, DeviceHolder{PID: f.PID, FD: f.FD, Device: f.Target})
		}
	}
	sort.SliceStable(s.Holders, func(i, j int) bool {
		a, b := s.Holders[i], s.Holders[j]
		return a.PID < b.PID || a.PID == b.PID && a.FD < b.FD
	})
	return fds
}

// procs reads the procs section into Snapshot.Processes, sorted by PID.
func (p *snapParser) procs() {
	s := p.s
	sep, parse := byte('\n'), ParseProcs
	if p.c.Version >= 2 {
		sep, parse = 0, ParseProcsV2
	}
	r, sec := p.body("procs", sep)
	if sec == nil {
		return
	}
	procs, contested, err := parse(r, s.Host.BootTime, s.Host.ClockTicks)
	p.fail(sec, err)
	if len(contested) > 0 {
		p.tampered("procs", "processes described twice or with a field given twice", pidNames(contested))
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
	s.Processes = slices.DeleteFunc(procs, func(pr Process) bool {
		if pr.Cut {
			s.ProcsCut = append(s.ProcsCut, pr.PID)
		}
		return pr.Cut
	})
	if len(s.ProcsCut) > 0 {
		p.note(NoteSectionTimeout, "section procs: the description of %s was stopped by its own time limit, and is left out",
			strings.Join(pidNames(s.ProcsCut), ", "))
	}
}

// users names the processes' users from the users section.
func (p *snapParser) users() {
	r, sec := p.body("users", '\n')
	if sec == nil {
		return
	}
	var names map[int]string
	var err error
	if p.c.Version >= 2 {
		var contested []int
		names, contested, err = ParsePasswdV2(r)
		if len(contested) > 0 {
			var uids []string
			for _, u := range contested {
				uids = append(uids, "uid "+strconv.Itoa(u))
			}
			p.tampered("users", "uids named twice, left without a name", uids)
		}
	} else {
		names, err = ParsePasswd(r)
	}
	p.fail(sec, err)
	for i := range p.s.Processes {
		if u := p.s.Processes[i].UID; u != nil {
			p.s.Processes[i].User = names[*u]
		}
	}
}

// units reads the system units and, in version 2, the units of users' managers.
func (p *snapParser) units() {
	if r, sec := p.body("units", '\n'); sec != nil {
		units, contested, err := ParseUnits(r)
		p.fail(sec, err)
		if len(contested) > 0 {
			p.tampered("units", "units described twice with different states", contested)
		}
		p.s.Units = units
	}
	r, sec := p.body("user-units", '\n')
	if sec == nil {
		return
	}
	all, contested, err := ParseUserUnits(r)
	p.fail(sec, err)
	if len(contested) > 0 {
		p.tampered("user-units", "units described twice with different states", contested)
	}
	var notAsked, failed []string
	for _, uu := range all {
		p.s.Units = append(p.s.Units, uu.Units...)
		switch {
		case uu.ExitCode == nil:
			notAsked = append(notAsked, "uid "+strconv.Itoa(uu.UID))
		case *uu.ExitCode != 0 && len(uu.Units) == 0:
			failed = append(failed, fmt.Sprintf("uid %d (exit status %d: %s)", uu.UID, *uu.ExitCode, uu.Output))
		}
	}
	if len(notAsked) > 0 {
		p.note(NoteUserUnits, "the states of units of users' systemd managers were not asked (the probe asks them only as root, of a user with a name): %s", strings.Join(notAsked, ", "))
	}
	if len(failed) > 0 {
		p.note(NoteUserUnits, "systemctl --user could not tell the states of units of users' systemd managers: %s", strings.Join(failed, "; "))
	}
}

// mapsAndSizes reads the maps and fdstat sections.
func (p *snapParser) mapsAndSizes() (maps []ShmMapping, sizes []FDSize) {
	v2 := p.c.Version >= 2
	if r, sec := p.body("maps", '\n'); sec != nil {
		parseMaps := ParseMaps
		if v2 {
			parseMaps = ParseMapsV2
		}
		var err error
		maps, err = parseMaps(r)
		p.fail(sec, err)
	}
	if r, sec := p.body("fdstat", '\n'); sec != nil {
		parseFDStat := ParseFDStat
		if v2 {
			parseFDStat = ParseFDStatV2
		}
		var contested []FDSize
		var err error
		sizes, contested, err = parseFDStat(r)
		p.fail(sec, err)
		if len(contested) > 0 {
			p.tampered("fdstat", "sizes of fds listed twice", fdNames(contested, nil))
		}
	}
	return maps, sizes
}

// shm reads the shm-df and shm-ls sections into Snapshot.Shm.
func (p *snapParser) shm() {
	s := p.s
	if r, sec := p.body("shm-df", '\n'); sec != nil {
		df, err := ParseDF(r)
		p.fail(sec, err)
		s.Shm.SizeBytes, s.Shm.UsedBytes, s.Shm.AvailBytes = df.SizeBytes, df.UsedBytes, df.AvailBytes
	}
	r, sec := p.body("shm-ls", 0)
	if sec == nil {
		return
	}
	parseListing := ParseShmListing
	if p.c.Version >= 2 {
		parseListing = ParseShmListingV2
	}
	entries, contested, err := parseListing(r)
	p.fail(sec, err)
	if len(contested) > 0 {
		p.tampered("shm-ls", "paths listed twice", contested)
	}
	s.Shm.Entries = entries
	s.Shm.Truncated = sec.Truncated
	s.Shm.Listed = len(entries) > 0 || ok(sec)
}
