package parse

import (
	"encoding/base64"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Ancestor is one ancestor of a described process that has no Slurm cgroup (ancestors
// section): its parent and owner, and the Slurm job and step it runs when it is a root-owned
// slurmstepd.
type Ancestor struct {
	PID, PPID, UID      int
	SlurmJob, SlurmStep string // "" unless a slurmstepd
}

// SlurmJob is what the host's Slurm controller said of one job (slurm section, from
// `scontrol show job -d -o JOB`).
type SlurmJob struct {
	ID string // decimal digits
	// Asked is false when the probe did not ask: Slurm had already failed to answer in time.
	Asked    bool
	ExitCode *int
	// Purged is set when the controller answered that it does not know the job: it ended
	// long enough ago to be purged from its memory (MinJobAge, 300 s by default).
	Purged bool
	// Ambiguous is set when a key the record is read by came twice, or the record is not the
	// job asked for: its user's text (job name, comment, paths) may have tried to forge one,
	// so nothing but ID is used.
	Ambiguous bool
	Name      string // the job's name: its user's text
	State     string // RUNNING, COMPLETING, COMPLETED, CANCELLED, FAILED, ...
	User      string
	UID       *int
	// StartTime and EndTime are nil when Slurm has none ("Unknown") or the zone is unknown.
	// A running job's EndTime is its time limit's end.
	StartTime, EndTime *time.Time
	NodeList           string // hostlist, e.g. "node[1-2]"
	Alloc              []SlurmAlloc
	// Output is scontrol's words when it failed, bounded.
	Output string
}

// SlurmAlloc is one per-node entry of a job's details ("Nodes=node1 CPU_IDs=0 Mem=0
// GRES=gpu:2(IDX:0-1)"): the GPUs the job holds on those nodes.
type SlurmAlloc struct {
	Nodes string // hostlist
	// GPUs are the GRES gpu indexes (IDX) on each of Nodes; empty when it holds none.
	// GPUsKnown is false when the entry has no GRES field or one this parser cannot read.
	GPUs      []int
	GPUsKnown bool
}

// SlurmTimeouts are Slurm's KillWait and UnkillableStepTimeout on the host (the slurm
// section's "timeouts" line, from scontrol show config); nil when unknown.
type SlurmTimeouts struct {
	KillWait, UnkillableStep *time.Duration
}

// Bounds on what one job's record may make the parser hold.
const (
	maxSlurmJobs   = 64
	maxSlurmAllocs = 64
	maxGRESIndex   = 1024
)

// ParseAncestors reads the ancestors section: "PID PPID UID TAG" lines, TAG "-" or
// "JOB.STEP" for a slurmstepd. A PID given twice is left out and returned in contested.
func ParseAncestors(r io.Reader) (out []Ancestor, contested []int, err error) {
	b, rerr := readInput(r)
	var errs errList
	errs.add(rerr)
	count := map[int]int{}
	for i, l := range splitLines(b) {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		var a Ancestor
		ok := len(f) == 4
		for j, v := range []*int{&a.PID, &a.PPID, &a.UID} {
			if ok {
				*v, ok = atoiNonNeg(f[j])
			}
		}
		if ok && f[3] != "-" {
			a.SlurmJob, a.SlurmStep, ok = strings.Cut(f[3], ".")
			ok = ok && isDigits(a.SlurmJob) && isStepName(a.SlurmStep)
		}
		if !ok {
			errs.addf("ancestors line %d: want PID PPID UID TAG: %s", i+1, q(l))
			continue
		}
		count[a.PID]++
		out = append(out, a)
	}
	keep := out[:0]
	for _, a := range out {
		switch count[a.PID] {
		case 1:
			keep = append(keep, a)
		case 0:
		default:
			contested = append(contested, a.PID)
			count[a.PID] = 0
		}
	}
	slices.SortFunc(keep, func(a, b Ancestor) int { return a.PID - b.PID })
	slices.Sort(contested)
	return keep, contested, errs.err()
}

// ParseSlurmJobs is ParseSlurm without the timeouts.
func ParseSlurmJobs(r io.Reader) (out []SlurmJob, contested []string, err error) {
	out, _, contested, err = ParseSlurm(r)
	return out, contested, err
}

// ParseSlurm reads the slurm section's jobs and timeouts (see ParseSlurmSection).
func ParseSlurm(r io.Reader) (out []SlurmJob, to SlurmTimeouts, contested []string, err error) {
	sec, err := ParseSlurmSection(r)
	return sec.Jobs, sec.Timeouts, sec.Contested, err
}

// SlurmSection is what the slurm section holds.
type SlurmSection struct {
	Jobs     []SlurmJob
	Timeouts SlurmTimeouts
	Nodes    []SlurmNode
	GRES     SlurmGRES
	// Contested are the jobs and nodes given twice, left out.
	Contested []string
}

// ParseSlurmSection reads the slurm section: a "tz +HHMM" line, then "JOB RC BASE64" lines,
// BASE64 the output of scontrol show job -d -o JOB, RC "-" when not asked; "node NAME RC
// BASE64" lines, the output of scontrol show node -o NAME; a "timeouts KILLWAIT UNKILLABLE"
// line and a "gres GRESTYPES CONSTRAINDEVICES TASKPLUGIN" line. A job or node given twice is
// left out and returned in Contested.
func ParseSlurmSection(r io.Reader) (SlurmSection, error) {
	b, rerr := readInput(r)
	p := slurmLines{seen: map[string]bool{}}
	p.errs.add(rerr)
	for i, l := range splitLines(b) {
		if !p.line(i, l) {
			break
		}
	}
	var twice []string
	p.sec.Jobs, twice = onlyOnce(p.jobs, func(j SlurmJob) string { return "job " + j.ID })
	p.sec.Contested = append(p.sec.Contested, twice...)
	p.sec.Nodes, twice = onlyOnce(p.sec.Nodes, func(n SlurmNode) string { return "node " + n.Name })
	p.sec.Contested = append(p.sec.Contested, twice...)
	return p.sec, p.errs.err()
}

// slurmLines is ParseSlurmSection's state: what the lines read so far gave.
type slurmLines struct {
	sec  SlurmSection
	errs errList
	zone *time.Location // from the first line's tz
	jobs []SlurmJob
	seen map[string]bool // the lines that may come once: timeouts, gres
}

// line reads line i (l); false when no line after it is read (more jobs than maxSlurmJobs).
func (p *slurmLines) line(i int, l string) bool {
	f := strings.Fields(l)
	switch {
	case len(f) == 0:
	case len(f) == 2 && f[0] == "tz" && p.zone == nil && i == 0:
		p.zone = parseZone(f[1])
	case f[0] == "timeouts":
		t, ok := parseSlurmTimeouts(f)
		if !ok || p.seen["timeouts"] {
			p.errs.addf("slurm line %d: want one timeouts KILLWAIT UNKILLABLE: %s", i+1, q(l))
			t = SlurmTimeouts{}
		}
		p.sec.Timeouts = t
		p.seen["timeouts"] = true
	case f[0] == "gres":
		p.gres(i, l, f)
	case f[0] == "node":
		n, ok := parseSlurmNodeLine(f)
		switch {
		case !ok:
			p.errs.addf("slurm line %d: want node NAME RC BASE64: %s", i+1, q(l))
		case len(p.sec.Nodes) == maxSlurmNodes:
			p.errs.addf("slurm: more than %d nodes, rest ignored", maxSlurmNodes)
		default:
			p.sec.Nodes = append(p.sec.Nodes, n)
		}
	case len(f) < 2 || !isDigits(f[0]) || len(f[0]) > 10:
		p.errs.addf("slurm line %d: want JOB RC BASE64: %s", i+1, q(l))
	case len(p.jobs) == maxSlurmJobs:
		p.errs.addf("slurm: more than %d jobs, rest ignored", maxSlurmJobs)
		return false
	default:
		if j, ok := parseSlurmJobLine(f, p.zone); ok {
			p.jobs = append(p.jobs, j)
		} else {
			p.errs.addf("slurm line %d: want JOB RC BASE64: %s", i+1, q(l))
		}
	}
	return true
}

// gres reads the "gres GRESTYPES CONSTRAINDEVICES TASKPLUGIN" line; a second one unsets it.
func (p *slurmLines) gres(i int, l string, f []string) {
	g, ok := parseSlurmGRES(f)
	switch {
	case !ok:
		p.errs.addf("slurm line %d: want gres GRESTYPES CONSTRAINDEVICES TASKPLUGIN: %s", i+1, q(l))
	case p.seen["gres"]:
		p.errs.addf("slurm line %d: a second %s line: %s", i+1, "gres", q(l))
		p.sec.GRES = SlurmGRES{}
	default:
		p.seen["gres"] = true
		p.sec.GRES = g
	}
}

// parseSlurmJobLine reads "JOB RC BASE64" (f, its fields; JOB checked by the caller), or
// "JOB -" for a job not asked: BASE64 the output of scontrol show job -d -o JOB.
func parseSlurmJobLine(f []string, zone *time.Location) (SlurmJob, bool) {
	j := SlurmJob{ID: f[0]}
	if f[1] == "-" {
		return j, true
	}
	rc, ok := atoiNonNeg(f[1])
	var text []byte
	var err error
	if len(f) > 2 {
		text, err = base64.StdEncoding.DecodeString(f[2])
	}
	if !ok || err != nil || len(f) > 3 {
		return j, false
	}
	j.Asked, j.ExitCode = true, &rc
	readSlurmJob(&j, text, zone)
	return j, true
}

// parseSlurmTimeouts reads "timeouts KILLWAIT UNKILLABLE", each seconds (at most 9 digits)
// or "-".
func parseSlurmTimeouts(f []string) (SlurmTimeouts, bool) {
	if len(f) != 3 {
		return SlurmTimeouts{}, false
	}
	var to SlurmTimeouts
	for i, d := range []**time.Duration{&to.KillWait, &to.UnkillableStep} {
		v := f[i+1]
		if v == "-" {
			continue
		}
		if !isDigits(v) || len(v) > 9 {
			return SlurmTimeouts{}, false
		}
		n, _ := strconv.Atoi(v)
		sec := time.Duration(n) * time.Second
		*d = &sec
	}
	return to, true
}

// parseZone reads date's %z: "+0100", "-0530".
func parseZone(s string) *time.Location {
	if len(s) != 5 || (s[0] != '+' && s[0] != '-') || !isDigits(s[1:]) {
		return nil
	}
	h, _ := strconv.Atoi(s[1:3])
	m, _ := strconv.Atoi(s[3:])
	off := (h*60 + m) * 60
	if s[0] == '-' {
		off = -off
	}
	return time.FixedZone(s, off)
}

// slurmKeys are the keys a job's record is read by. Each must come once: the job's name
// comes before them and its comment and paths after, all its user's text, so a second copy
// of one may be forged.
var slurmKeys = []string{" JobName=", " UserId=", " JobState=", " StartTime=", " EndTime=", " NodeList=", " MinCPUsNode="}

// readSlurmJob fills j from one record of scontrol show job -d -o, or notes that the
// controller does not know it (or failed: then Output says why).
func readSlurmJob(j *SlurmJob, text []byte, zone *time.Location) {
	s := string(text)
	if *j.ExitCode != 0 {
		j.Purged = strings.Contains(s, "Invalid job id specified")
		j.Output = smiMessage(s)
		return
	}
	// The record of the job asked for, and only it.
	head := "JobId=" + j.ID
	if !strings.HasPrefix(s, head+" JobName=") {
		j.Ambiguous = true
		return
	}
	at := map[string]int{}
	for _, k := range slurmKeys {
		if strings.Count(s, k) != 1 {
			j.Ambiguous = true
			return
		}
		at[k] = strings.Index(s, k)
	}
	if at[" UserId="] < at[" JobName="] || at[" MinCPUsNode="] < at[" NodeList="] {
		j.Ambiguous = true
		return
	}
	j.Name = s[at[" JobName="]+len(" JobName=") : at[" UserId="]]
	word := func(k string) string {
		v := s[at[k]+len(k):]
		if i := strings.IndexAny(v, " \n"); i >= 0 {
			v = v[:i]
		}
		return v
	}
	j.State = word(" JobState=")
	j.User, j.UID = slurmUser(word(" UserId="))
	j.StartTime = slurmTime(word(" StartTime="), zone)
	j.EndTime = slurmTime(word(" EndTime="), zone)
	j.NodeList = word(" NodeList=")
	j.Alloc = slurmAllocs(s[at[" NodeList="]:at[" MinCPUsNode="]])
}

// slurmUser reads "alice(1000)"; Slurm writes the uid alone in the parentheses when it has
// no name for it.
func slurmUser(v string) (string, *int) {
	open := strings.LastIndexByte(v, '(')
	if open < 0 || !strings.HasSuffix(v, ")") {
		return "", nil
	}
	uid, ok := atoiNonNeg(v[open+1 : len(v)-1])
	if !ok {
		return "", nil
	}
	return v[:open], &uid
}

// slurmTime reads scontrol's "2026-12-01T00:57:53" in the host's zone; nil for "Unknown",
// "None" or without a zone.
func slurmTime(v string, zone *time.Location) *time.Time {
	if zone == nil {
		return nil
	}
	t, err := time.ParseInLocation("2006-01-02T15:04:05", v, zone)
	if err != nil {
		return nil
	}
	return &t
}

// slurmAllocs reads the per-node entries of a job's details, which -d prints between NodeList
// and MinCPUsNode: "Nodes=node[1-2] CPU_IDs=0-1 Mem=1000 GRES=gpu:2(IDX:0-1)".
func slurmAllocs(region string) []SlurmAlloc {
	var out []SlurmAlloc
	parts := strings.Split(region, " Nodes=")
	for _, p := range parts[1:] {
		if len(out) == maxSlurmAllocs {
			break
		}
		f := strings.Fields(p)
		if len(f) == 0 {
			continue
		}
		a := SlurmAlloc{Nodes: f[0]}
		for _, w := range f[1:] {
			if g, ok := strings.CutPrefix(w, "GRES="); ok {
				a.GPUs, a.GPUsKnown = gresGPUs(g)
			}
		}
		out = append(out, a)
	}
	return out
}

// gresGPUs reads the gpu indexes of a GRES field: "gpu:2(IDX:0-1)", "gpu:a100:1(IDX:0),
// gpu:v100:1(IDX:2)"; "" holds none. A share of GPUs (mps, shard) is on GPUs this does not
// read: the GPUs are then unknown.
func gresGPUs(v string) ([]int, bool) {
	var gpus []int
	for _, item := range splitOutsideParens(v) {
		name, _, _ := strings.Cut(item, ":")
		if name == "mps" || name == "shard" {
			return nil, false
		}
		if item != "gpu" && !strings.HasPrefix(item, "gpu:") {
			continue
		}
		i := strings.Index(item, "(IDX:")
		if i < 0 || !strings.HasSuffix(item, ")") {
			return nil, false
		}
		idx, ok := parseIndexList(item[i+len("(IDX:") : len(item)-1])
		if !ok {
			return nil, false
		}
		gpus = append(gpus, idx...)
	}
	slices.Sort(gpus)
	return slices.Compact(gpus), true
}

// splitOutsideParens splits at commas that are not inside parentheses.
func splitOutsideParens(v string) []string {
	var out []string
	depth, from := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, v[from:i])
				from = i + 1
			}
		}
	}
	if from < len(v) {
		out = append(out, v[from:])
	}
	return out
}

// parseIndexList reads "0-1,3": at most maxGRESIndex indexes, each below it.
func parseIndexList(v string) ([]int, bool) {
	var out []int
	for _, r := range strings.Split(v, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, ok1 := atoiNonNeg(lo)
		b, ok2 := a, true
		if isRange {
			b, ok2 = atoiNonNeg(hi)
		}
		if !ok1 || !ok2 || b < a || b >= maxGRESIndex || len(out)+b-a >= maxGRESIndex {
			return nil, false
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out, true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isStepName says whether s is a step as slurmstepd names it: "0", "batch", "extern".
func isStepName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_') {
			return false
		}
	}
	return true
}

// slurm reads the ancestors and slurm sections into the snapshot.
func (p *snapParser) slurm() {
	if r, sec := p.body("ancestors", '\n'); sec != nil {
		anc, contested, err := ParseAncestors(r)
		p.fail(sec, err)
		if len(contested) > 0 {
			p.tampered("ancestors", "processes listed twice", pidNames(contested))
		}
		p.s.Ancestors = anc
	}
	if r, sec := p.body("slurm", '\n'); sec != nil {
		ss, err := ParseSlurmSection(r)
		p.fail(sec, err)
		jobs, contested := ss.Jobs, ss.Contested
		p.s.SlurmTimeouts, p.s.SlurmNodes, p.s.SlurmGRES = ss.Timeouts, ss.Nodes, ss.GRES
		if len(contested) > 0 {
			p.tampered("slurm", "jobs or nodes listed twice", contested)
		}
		var ambiguous []string
		for _, j := range jobs {
			if j.Ambiguous {
				ambiguous = append(ambiguous, "job "+j.ID)
			}
		}
		if len(ambiguous) > 0 {
			p.note(NoteCaptureTampered, "section slurm: %s: a key its record is read by came twice (a job's name, comment or paths are its user's text and may have forged one): only the job id is used",
				strings.Join(ambiguous, ", "))
		}
		p.s.SlurmJobs = jobs
	}
}
