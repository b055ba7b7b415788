package parse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Note codes. They are stable: reports print them and users grep for them.
const (
	NoteNotRoot          = "not-root"          // uid != 0: other users' processes and fds are not visible
	NoteFDsUnreadable    = "fds-unreadable"    // some /proc/PID/fd links could not be read
	NoteSectionTruncated = "section-truncated" // a section was cut at its byte bound
	NoteSectionTimeout   = "section-timeout"   // a section's command was stopped by its time bound
	NoteSectionFailed    = "section-failed"    // a section's command failed
	NoteToolMissing      = "tool-missing"      // a tool the probe uses is missing or lacks a feature
	NoteCaptureTruncated = "capture-truncated" // the capture ended before the probe's final marker
)

// sectionOK lists the exit statuses that are not failures, per section: grep exits 1 when
// nothing matched and 2 when a process exited before its maps could be read; stat exits 1
// when a descriptor closed after the scan; getent exits 2 when a uid has no name.
var sectionOK = map[string][]int{
	"host":   {0},
	"fds":    {0},
	"maps":   {0, 1, 2},
	"fdstat": {0, 1},
	"procs":  {0},
	"users":  {0, 2},
	"units":  {0},
	"shm-df": {0},
	"shm-ls": {0},
}

// Parse turns a whole capture (the probe's raw output) into a Snapshot. A malformed capture
// still yields what could be read; the error, wrapping ErrParse, says what could not. What
// the probe could not see on the host (not root, a missing tool, a section cut at its bound)
// is not an error: it is in Snapshot.Notes.
func Parse(raw []byte) (*Snapshot, error) {
	s := &Snapshot{Host: HostFacts{ClockTicks: 100}}
	c, err := SplitCapture(raw)
	if err != nil {
		s.Truncated = true
		return s, err
	}
	p := snapParser{s: s, c: c}
	p.run()
	return s, errors.Join(p.errs...)
}

type snapParser struct {
	s    *Snapshot
	c    *Capture
	errs []error
}

func (p *snapParser) note(code, format string, args ...any) {
	p.s.Notes = append(p.s.Notes, Note{Code: code, Message: fmt.Sprintf(format, args...)})
}

// body returns a section's body ready for its parser (a cut section loses its last, partial
// record) and whether the section's command succeeded; nil when the section is absent.
func (p *snapParser) body(name string, sep byte) (io.Reader, *Section) {
	sec := p.c.Section(name)
	if sec == nil {
		return nil, nil
	}
	b := sec.Body
	if sec.Truncated {
		b = cutLastRecord(b, sep)
		if name == "procs" {
			// A process block cut short would read as a process the probe knows little about.
			b = cutAfterLastEnd(b)
		}
	}
	return bytes.NewReader(b), sec
}

// ok says whether a section's command exited with a status that is not a failure.
func ok(sec *Section) bool {
	if sec.ExitCode == nil {
		return sec.Truncated // cut at its bound: what was read is good
	}
	codes, known := sectionOK[sec.Name]
	if !known {
		codes = []int{0}
	}
	for _, c := range codes {
		if *sec.ExitCode == c {
			return true
		}
	}
	return false
}

// fail records a section parser's error, unless the section's command failed: its output is
// then an error message, which the notes already report.
func (p *snapParser) fail(sec *Section, err error) {
	if err != nil && ok(sec) {
		p.errs = append(p.errs, fmt.Errorf("section %s: %w", sec.Name, err))
	}
}

func (p *snapParser) run() {
	s, c := p.s, p.c
	s.Truncated = !c.Done
	for _, sec := range c.Sections {
		s.Sections = append(s.Sections, SectionInfo{Name: sec.Name, ExitCode: sec.ExitCode, Bytes: len(sec.Body), Limit: sec.Limit, Truncated: sec.Truncated})
	}
	if s.Truncated {
		p.note(NoteCaptureTruncated, "the capture ended before the probe's final marker: later sections are missing")
	}
	for _, sec := range c.Sections {
		p.envelopeNotes(&sec)
	}

	if r, sec := p.body("host", '\n'); sec != nil {
		h, err := ParseHost(r)
		s.Host = h
		p.fail(sec, err)
		if h.UID != nil && *h.UID != 0 {
			p.note(NoteNotRoot, "not root (uid %d): other users' processes and fds are not visible", *h.UID)
		}
		if !h.HasTimeout {
			p.note(NoteToolMissing, "timeout(1) not found: the probe's steps were not bounded in time")
		}
	}
	p.smi()

	var fds []OpenFD
	if r, sec := p.body("fds", '\n'); sec != nil {
		var denied *int
		var err error
		fds, denied, err = ParseFDs(r)
		p.fail(sec, err)
		if denied != nil && *denied > 0 {
			p.note(NoteFDsUnreadable, "%d fd links under /proc could not be read (permission denied): processes using GPUs or /dev/shm may be missing", *denied)
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
	}
	var maps []ShmMapping
	if r, sec := p.body("maps", '\n'); sec != nil {
		var err error
		maps, err = ParseMaps(r)
		p.fail(sec, err)
	}
	var sizes []FDSize
	if r, sec := p.body("fdstat", '\n'); sec != nil {
		var err error
		sizes, err = ParseFDStat(r)
		p.fail(sec, err)
	}
	if r, sec := p.body("procs", '\n'); sec != nil {
		procs, err := ParseProcs(r, s.Host.BootTime, s.Host.ClockTicks)
		p.fail(sec, err)
		sort.SliceStable(procs, func(i, j int) bool { return procs[i].PID < procs[j].PID })
		s.Processes = procs
	}
	if r, sec := p.body("users", '\n'); sec != nil {
		names, err := ParsePasswd(r)
		p.fail(sec, err)
		for i := range s.Processes {
			if u := s.Processes[i].UID; u != nil {
				s.Processes[i].User = names[*u]
			}
		}
	}
	if r, sec := p.body("units", '\n'); sec != nil {
		units, err := ParseUnits(r)
		p.fail(sec, err)
		s.Units = units
	}
	if r, sec := p.body("shm-df", '\n'); sec != nil {
		df, err := ParseDF(r)
		p.fail(sec, err)
		s.Shm.SizeBytes, s.Shm.UsedBytes, s.Shm.AvailBytes = df.SizeBytes, df.UsedBytes, df.AvailBytes
	}
	if r, sec := p.body("shm-ls", 0); sec != nil {
		entries, err := ParseShmListing(r)
		p.fail(sec, err)
		s.Shm.Entries = entries
		s.Shm.Truncated = sec.Truncated
		s.Shm.Listed = len(entries) > 0 || ok(sec)
	}
	joinShm(s, fds, maps, sizes)
}

// envelopeNotes notes a section cut at its bound, stopped by its time bound, or failed.
func (p *snapParser) envelopeNotes(sec *Section) {
	if sec.Truncated {
		if sec.Limit > 0 {
			p.note(NoteSectionTruncated, "section %s was cut at its limit of %d bytes: what was read is used, the rest is missing", sec.Name, sec.Limit)
		} else {
			p.note(NoteSectionTruncated, "section %s was cut: what was read is used, the rest is missing", sec.Name)
		}
	}
	if _, known := sectionOK[sec.Name]; !known || sec.ExitCode == nil || ok(sec) {
		return // the nvidia-smi sections are judged by p.smi
	}
	rc := *sec.ExitCode
	switch {
	case rc == 124 || rc == 137:
		p.note(NoteSectionTimeout, "section %s was stopped by its time limit (exit status %d): its output is partial", sec.Name, rc)
	case sec.Name == "units" && rc == 127:
		p.note(NoteToolMissing, "systemctl not found: the systemd units of processes are not known")
	case sec.Name == "shm-ls" && bytes.Contains(sec.Body, []byte("printf")) && !bytes.Contains(sec.Body, []byte{0}):
		p.note(NoteToolMissing, "find does not support -printf (not GNU find): /dev/shm was not listed")
	default:
		p.note(NoteSectionFailed, "section %s exited with status %d: its output may be partial", sec.Name, rc)
	}
}

// smi fills the GPUs, compute apps and the nvidia-smi outcome. The basic GPU query, present
// only when the driver refused the extended fields, takes precedence.
func (p *snapParser) smi() {
	s := p.s
	name := "smi-gpu"
	if p.c.Section("smi-gpu-basic") != nil {
		name = "smi-gpu-basic"
		s.SMI.FieldFallback = true
	}
	if r, sec := p.body(name, '\n'); sec != nil {
		gpus, err := ParseGPUCSV(r)
		s.GPUs = gpus
		if sec.ExitCode == nil || *sec.ExitCode != 0 || err != nil {
			if f := ClassifySMIError(string(sec.Body), sec.ExitCode); f != nil {
				s.SMI.Failure = f
			} else if err != nil {
				p.errs = append(p.errs, fmt.Errorf("section %s: %w", sec.Name, err))
			}
		}
	}
	if r, sec := p.body("smi-apps", '\n'); sec != nil {
		apps, err := ParseAppsCSV(r)
		s.Apps = apps
		if sec.ExitCode == nil || *sec.ExitCode != 0 || err != nil {
			if f := ClassifySMIError(string(sec.Body), sec.ExitCode); f != nil {
				if s.SMI.Failure == nil {
					p.note(NoteSectionFailed, "nvidia-smi --query-compute-apps failed (%s): %s", f.Kind, f.Message)
				}
			} else if err != nil {
				p.errs = append(p.errs, fmt.Errorf("section %s: %w", sec.Name, err))
			}
		}
	}
}

// joinShm fills Process.Shm and ShmEntry.Holders from the open descriptors, their sizes and
// the mappings.
func joinShm(s *Snapshot, fds []OpenFD, maps []ShmMapping, sizes []FDSize) {
	type fdKey struct{ pid, fd int }
	size := map[fdKey]int64{}
	for _, z := range sizes {
		size[fdKey{z.PID, z.FD}] = z.Bytes
	}
	type useKey struct {
		pid     int
		path    string
		deleted bool
	}
	uses := map[useKey]*ShmUse{}
	use := func(k useKey) *ShmUse {
		u := uses[k]
		if u == nil {
			u = &ShmUse{Path: k.path, Deleted: k.deleted}
			uses[k] = u
		}
		return u
	}
	for _, f := range fds {
		if !strings.HasPrefix(f.Target, "/dev/shm/") {
			continue
		}
		u := use(useKey{f.PID, f.Target, f.Deleted})
		u.Open = true
		if n, ok := size[fdKey{f.PID, f.FD}]; ok && u.Bytes == nil {
			u.Bytes = ptr(n)
		}
	}
	for _, m := range maps {
		u := use(useKey{m.PID, m.Path, m.Deleted})
		u.Mapped = true
		if u.Bytes == nil {
			u.Bytes = ptr(m.Bytes)
		}
	}

	byPID := map[int][]ShmUse{}
	holders := map[string]map[int]bool{} // listed path -> PIDs holding it or a path below
	listed := map[string]bool{}
	for _, e := range s.Shm.Entries {
		listed[e.Path] = true
	}
	for k, u := range uses {
		byPID[k.pid] = append(byPID[k.pid], *u)
		if k.deleted {
			continue // a file of that name in the listing is another file
		}
		for p := k.path; len(p) > 0; {
			if listed[p] {
				if holders[p] == nil {
					holders[p] = map[int]bool{}
				}
				holders[p][k.pid] = true
			}
			i := strings.LastIndexByte(p, '/')
			if i <= 0 {
				break
			}
			p = p[:i]
		}
	}
	for i := range s.Processes {
		u := byPID[s.Processes[i].PID]
		sort.Slice(u, func(a, b int) bool {
			if u[a].Path != u[b].Path {
				return u[a].Path < u[b].Path
			}
			return !u[a].Deleted && u[b].Deleted
		})
		s.Processes[i].Shm = u
	}
	for i := range s.Shm.Entries {
		e := &s.Shm.Entries[i]
		for pid := range holders[e.Path] {
			e.Holders = append(e.Holders, pid)
		}
		sort.Ints(e.Holders)
	}
}

// cutAfterLastEnd keeps the procs blocks up to the last "end" line.
func cutAfterLastEnd(b []byte) []byte {
	if i := bytes.LastIndex(b, []byte("\nend\n")); i >= 0 {
		return b[:i+len("\nend\n")]
	}
	if bytes.HasPrefix(b, []byte("end\n")) {
		return b[:len("end\n")]
	}
	return nil
}
