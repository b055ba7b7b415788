package parse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
)

// Note codes. They are stable: reports print them and users grep for them.
const (
	NoteNotRoot          = "not-root"           // uid != 0: other users' processes and fds are not visible
	NoteFDsUnreadable    = "fds-unreadable"     // some /proc/PID/fd links could not be read
	NoteSectionTruncated = "section-truncated"  // a section was cut at its byte bound
	NoteSectionTimeout   = "section-timeout"    // a section's command was stopped by its time bound
	NoteSectionFailed    = "section-failed"     // a section's command failed
	NoteToolMissing      = "tool-missing"       // a tool the probe uses is missing or lacks a feature
	NoteCaptureTruncated = "capture-truncated"  // the capture ended before the probe's final marker
	NoteCaptureTampered  = "capture-tampered"   // something the probe prints once came twice: not trusted
	NoteUserUnits        = "user-units-unknown" // the state of units of users' managers was not asked
)

// sectionOK lists the exit statuses that are not failures, per section: grep exits 1 when
// nothing matched and 2 when a process exited before its maps could be read; stat exits 1
// when a descriptor closed after the scan; getent exits 2 when a uid has no name.
var sectionOK = map[string][]int{
	"host":       {0},
	"apps-alive": {0},
	"fds":        {0},
	"maps":       {0, 1, 2},
	"fdstat":     {0, 1},
	"procs":      {0},
	"users":      {0, 2},
	"units":      {0},
	"user-units": {0},
	"shm-df":     {0},
	"shm-ls":     {0},
	"shm-dirs":   {0},
	"ancestors":  {0},
	"slurm":      {0},
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
	var notes []Note
	s.K8s, notes = ParseK8s(raw, c)
	s.Notes = append(s.Notes, notes...)
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
	if sec == nil || slices.Contains(p.c.Contested, name) {
		return nil, nil
	}
	b := sec.Body
	if sec.Truncated {
		b = cutLastRecord(b, sep)
		if name == "procs" {
			// A process block cut short would read as a process the probe knows little about.
			b = cutAfterLastEnd(b, sep)
		}
	}
	b = p.capRecords(name, b, sep)
	return sectionReader{bytes.NewReader(b), b}, sec
}

// sectionReader reads a section's body, and gives readInput the body itself: the parsers only
// read it, and a copy of every section would cost the capture's size again in flight.
type sectionReader struct {
	*bytes.Reader
	body []byte
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
	for _, name := range c.Contested {
		p.note(NoteCaptureTampered, "section %s appears more than once in the capture (the probe prints it once): none of its copies is used", name)
	}
	if c.TooMany {
		p.note(NoteCaptureTampered, "the capture holds more than %d sections (the probe prints %d): the rest was not read", maxSections, len(sectionLimits))
	}

	if r, sec := p.body("host", '\n'); sec != nil {
		h, contested, err := parseHost(r)
		s.Host = h
		p.fail(sec, err)
		if len(contested) > 0 {
			p.tampered("host", "keys given twice, left unknown", contested)
		}
		if h.UID != nil && *h.UID != 0 {
			p.note(NoteNotRoot, "not root (uid %d): other users' processes and fds are not visible", *h.UID)
		}
		if !h.HasTimeout {
			p.note(NoteToolMissing, "timeout(1) not found: the probe's steps were not bounded in time")
		}
	}
	p.smi()
	p.smiPIDs()

	fds := p.fds()
	maps, sizes := p.mapsAndSizes()
	p.procs()
	p.procsLeftOut(fds, maps)
	p.users()
	p.units()
	p.shm()
	p.shmDirs()
	p.slurm()
	joinShm(s, fds, maps, sizes)
}

// maxProbeProcs is how many processes the probe describes at most: the compute apps first,
// then the holders of /dev/nvidia*, then those of deleted /dev/shm files, in /proc's order.
const maxProbeProcs = 2000

// procsLeftOut notes the processes the probe left out at its bound: any user can start
// thousands of processes holding a deleted /dev/shm file, and the GPU holders after them in
// /proc's order then go undescribed.
func (p *snapParser) procsLeftOut(fds []OpenFD, maps []ShmMapping) {
	want := map[int]bool{}
	for _, a := range p.s.Apps {
		want[a.PID] = true
	}
	for _, f := range fds {
		if f.Deleted || strings.HasPrefix(f.Target, "/dev/nvidia") {
			want[f.PID] = true
		}
	}
	for _, m := range maps {
		if m.Deleted {
			want[m.PID] = true
		}
	}
	if len(want) <= maxProbeProcs {
		return
	}
	for _, pr := range p.s.Processes {
		delete(want, pr.PID)
	}
	if len(want) > 0 {
		p.note(NoteSectionTruncated, "section procs describes at most %d processes: %d more that use GPUs or deleted /dev/shm files were left out", maxProbeProcs, len(want))
	}
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
	case sec.Name == "fds" && rc == 3 && p.c.Version >= 2:
		p.note(NoteSectionTruncated, "section fds: a GPU holder has more than 1024 descriptors on /dev/nvidia* or /dev/shm: the rest of them were not read")
	case (sec.Name == "fds" || sec.Name == "shm-ls") && rc == 127 && p.c.Version >= 2:
		p.note(NoteToolMissing, "find does not support -printf (not GNU find): section %s is empty", sec.Name)
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
		s.GPUs = p.capGPUs(gpus, name)
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

// smiPIDs fills what nvidia-smi's full process listing says (smi-pids) and which listed
// compute apps had no /proc entry right after the listing (apps-alive).
func (p *snapParser) smiPIDs() {
	s := p.s
	if r, sec := p.body("smi-pids", '\n'); sec != nil {
		s.SMIProcs = ParseSMIPIDs(r)
		s.SMIProcsKnown = !sec.Truncated && sec.ExitCode != nil && *sec.ExitCode == 0
		if !s.SMIProcsKnown && s.SMI.Failure == nil && !sec.Truncated {
			p.note(NoteSectionFailed, "nvidia-smi -q -d PIDS failed: graphics processes and MPS clients are not known")
		}
	}
	r, sec := p.body("apps-alive", '\n')
	if sec == nil {
		return
	}
	s.AppsChecked = !sec.Truncated && sec.ExitCode != nil && *sec.ExitCode == 0
	listed := map[int]bool{}
	for _, a := range s.Apps {
		listed[a.PID] = true
	}
	b, _ := io.ReadAll(r)
	seen := map[int]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		word, num, _ := strings.Cut(line, " ")
		pid, ok := atoiNonNeg(num)
		if !ok || !listed[pid] || seen[pid] || word != "gone" && word != "alive" {
			continue
		}
		seen[pid] = true
		if word == "gone" {
			s.AppsGone = append(s.AppsGone, pid)
		}
	}
	sort.Ints(s.AppsGone)
}

// shmUseKey is one process's use of one /dev/shm path.
type shmUseKey struct {
	pid     int
	path    string
	deleted bool
}

// shmUses gathers, per process and /dev/shm path, what the open descriptors, their sizes and
// the mappings say. An fd whose file still has links is not deleted, whatever its name says.
func shmUses(fds []OpenFD, maps []ShmMapping, sizes []FDSize) map[shmUseKey]*ShmUse {
	type fdKey struct{ pid, fd int }
	size := map[fdKey]FDSize{}
	for _, z := range sizes {
		size[fdKey{z.PID, z.FD}] = z
	}
	uses := map[shmUseKey]*ShmUse{}
	use := func(k shmUseKey) *ShmUse {
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
		z, sized := size[fdKey{f.PID, f.FD}]
		if sized && z.Links != nil && f.Deleted && *z.Links > 0 {
			// A file still linked whose name ends in " (deleted)": the name is all of it.
			f.Target, f.Deleted = f.Target+deletedSuffix, false
		}
		u := use(shmUseKey{f.PID, f.Target, f.Deleted})
		u.Open = true
		if sized && u.Bytes == nil {
			u.Bytes = ptr(z.Bytes)
		}
		if sized && u.File == "" {
			u.File = z.File
		}
	}
	for _, m := range maps {
		u := use(shmUseKey{m.PID, m.Path, m.Deleted})
		u.Mapped = true
		if u.Bytes == nil {
			u.Bytes = ptr(m.Bytes)
		}
		if u.File == "" {
			u.File = m.File
		}
	}
	return uses
}

// joinShm fills Process.Shm and ShmEntry.Holders from the open descriptors, their sizes and
// the mappings.
func joinShm(s *Snapshot, fds []OpenFD, maps []ShmMapping, sizes []FDSize) {
	uses := shmUses(fds, maps, sizes)
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
		for p, up := shmListable(k.path), 0; len(p) > 0 && up <= maxShmDepth+2; up++ {
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

// shmListable cuts a path to the part the probe's listing can hold (maxShmDepth below
// /dev/shm), so that walking its parents costs a bounded number of lookups.
func shmListable(path string) string {
	slashes := 0
	for i := 0; i < len(path); i++ {
		if path[i] == '/' {
			if slashes++; slashes > maxShmDepth+2 {
				return path[:i]
			}
		}
	}
	return path
}

// cutAfterLastEnd keeps the procs blocks up to the last "end" field; sep ends each field.
func cutAfterLastEnd(b []byte, sep byte) []byte {
	end := []byte{sep, 'e', 'n', 'd', sep}
	if i := bytes.LastIndex(b, end); i >= 0 {
		return b[:i+len(end)]
	}
	if bytes.HasPrefix(b, end[1:]) {
		return b[:len(end)-1]
	}
	return nil
}
