package parse

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// maxArgvBytes is how much of /proc/PID/cmdline the probe keeps; it sends one byte more so
// that a longer one shows as truncated.
const maxArgvBytes = 65536

// ParseProcs reads a version 1 procs section: per PID, a block of lines "pid N", then "gone"
// or "stat ...", "status KEY:\tVALUE", "cgroup LINE", "argv BASE64", "cwd PATH", "path
// exists|missing PATH", ending at "end" or the next "pid". bootTime and clockTicks (USER_HZ,
// 100 when not positive) turn the start time in /proc/PID/stat into a time; with bootTime nil
// StartTime stays nil. Lines it does not know (the shell's complaints about a process that
// just exited) are skipped. Processes come in the order of their blocks. A PID described
// twice, or a block that repeats a field, is contested: it is left out and its PID returned
// in contested, since in version 1 a cwd holding newlines could forge such lines.
func ParseProcs(r io.Reader, bootTime *time.Time, clockTicks int) (procs []Process, contested []int, err error) {
	b, rerr := readInput(r)
	pb := newProcBuilder(bootTime, clockTicks)
	pb.errs.add(rerr)
	pb.procs = make([]Process, 0, bytes.Count(b, []byte("\npid "))+1)
	for i, l := range splitLines(b) {
		key, val, _ := strings.Cut(l, " ")
		pb.field(i+1, key, val)
	}
	return pb.done()
}

// ParseProcsV2 reads a version 2 procs section: the fields of ParseProcs, each terminated by
// NUL instead of a newline, so that a value may hold any other byte, and "parent" (the
// process is described only as the parent of another: Process.ParentOnly). The stat field is
// the whole /proc/PID/stat (its comm may hold newlines); cwd is readlink's output, ending in
// a newline; argv's base64 may be wrapped.
func ParseProcsV2(r io.Reader, bootTime *time.Time, clockTicks int) (procs []Process, contested []int, err error) {
	b, rerr := readInput(r)
	pb := newProcBuilder(bootTime, clockTicks)
	pb.errs.add(rerr)
	pb.procs = make([]Process, 0, bytes.Count(b, []byte("\x00pid "))+1)
	n := 0
	for f := range bytes.SplitSeq(b, []byte{0}) {
		n++
		if len(f) == 0 {
			continue
		}
		key, val, _ := strings.Cut(string(f), " ")
		switch key {
		case "stat":
			val = strings.TrimSuffix(val, "\n")
		case "cwd":
			val = strings.TrimSuffix(val, "\n")
		}
		pb.field(n, key, val)
	}
	return pb.done()
}

// procBuilder gathers the fields of the procs section into processes, whatever their framing.
type procBuilder struct {
	bootTime   *time.Time
	clockTicks int
	errs       errList
	procs      []Process
	p          *Process
	cgroup     []string
	fields     uint32      // single-valued fields the current block has, by singleField bit
	bad        bool        // the current block repeats a field
	count      map[int]int // blocks per PID
	errMark    errList     // errs when the current block began
}

func newProcBuilder(bootTime *time.Time, clockTicks int) *procBuilder {
	if clockTicks <= 0 {
		clockTicks = 100
	}
	return &procBuilder{bootTime: bootTime, clockTicks: clockTicks, count: map[int]int{}}
}

// field takes one field of the section; n is its line or field number, for errors.
func (pb *procBuilder) field(n int, key, val string) {
	if key == "pid" {
		pb.flush()
		pid, ok := atoiNonNeg(val)
		if !ok {
			pb.errs.addf("procs field %d: pid: %s", n, q(val))
			return
		}
		pb.p, pb.fields, pb.bad = &Process{PID: pid}, 0, false
		pb.errMark = pb.errs
		pb.errMark.errs = slices.Clip(pb.errMark.errs)
		pb.count[pid]++
		return
	}
	p := pb.p
	if p == nil {
		return
	}
	if once := singleField(key, val); once != 0 {
		pb.bad = pb.bad || pb.fields&once != 0
		pb.fields |= once
	}
	switch key {
	case "gone":
		p.Gone = true
	case "parent":
		p.ParentOnly = true
	case "cut":
		// The cut may fall inside a field: what the block's fields could not be read as is
		// no error of the capture.
		p.Cut, pb.errs = true, pb.errMark
		pb.flush()
	case "end":
		pb.flush()
	case "stat":
		if err := parseStat(p, val, pb.bootTime, pb.clockTicks); err != nil {
			pb.errs.addf("procs field %d: pid %d: stat: %v: %s", n, p.PID, err, q(val))
		}
	case "status":
		if err := parseStatus(p, val); err != nil {
			pb.errs.addf("procs field %d: pid %d: status: %v: %s", n, p.PID, err, q(val))
		}
	case "cgroup":
		pb.cgroup = append(pb.cgroup, val)
	case "argv":
		argv, trunc, sum, err := decodeArgv(val)
		if err != nil {
			pb.errs.addf("procs field %d: pid %d: argv: %v", n, p.PID, err)
		}
		p.Argv, p.ArgvTruncated, p.ArgvSHA256 = argv, trunc, sum
	case "cwd":
		p.Cwd = val
	case "env":
		if err := parseLaunchEnv(p, val); err != nil {
			pb.errs.addf("procs field %d: pid %d: env: %v: %s", n, p.PID, err, q(val))
		}
	case "path":
		state, path, _ := strings.Cut(val, " ")
		if (state == "exists" || state == "missing") && path != "" {
			p.ModelPaths = append(p.ModelPaths, PathCheck{Path: path, Exists: state == "exists"})
		}
	case "dir":
		if n := len(p.ModelPaths); n > 0 && !p.ModelPaths[n-1].Exists {
			p.ModelPaths[n-1].Dirs = addDir(p.ModelPaths[n-1].Dirs, p.PID, val)
		}
	}
}

// singleField is the bit of a field a block holds at most once (0 for cgroup and path lines,
// which repeat): a status line counts by its key.
func singleField(key, val string) uint32 {
	switch key {
	case "gone":
		return 1 << 0
	case "stat":
		return 1 << 1
	case "argv":
		return 1 << 2
	case "cwd":
		return 1 << 3
	case "parent":
		return 1 << 4
	case "status":
		k, _, _ := strings.Cut(val, ":")
		for i, name := range statusKeys {
			if k == name {
				return 1 << (5 + i)
			}
		}
	case "env":
		k, _, _ := strings.Cut(val, "=")
		for i, name := range launchEnvNames {
			if k == name {
				return 1 << (5 + len(statusKeys) + i)
			}
		}
	}
	return 0
}

// statusKeys are the /proc/PID/status lines the probe keeps.
var statusKeys = [...]string{"Name", "State", "PPid", "Uid", "NSpid", "VmRSS", "RssShmem", "Threads"}

func (pb *procBuilder) flush() {
	p := pb.p
	if p == nil {
		return
	}
	if len(pb.cgroup) > 0 {
		p.Cgroup = ParseCgroup(strings.Join(pb.cgroup, "\n"))
	}
	p.ModelPaths = argvPaths(p.ModelPaths, p.Argv)
	if pb.bad {
		pb.count[p.PID]++ // contested: dropped below with any other block of its PID
	}
	pb.procs = append(pb.procs, *p)
	pb.p, pb.cgroup = nil, nil
}

// argvPaths keeps the checked paths that are whole arguments of argv, or the value of a
// whole "--flag=PATH" argument. The probe splits the command line at newlines as well as at
// NULs, so an argument "x\n--model\n/gone" would otherwise read as a model path of its own,
// and a missing model path marks a leftover.
func argvPaths(paths []PathCheck, argv []string) []PathCheck {
	out := paths[:0]
	for _, pc := range paths {
		if slices.ContainsFunc(argv, func(a string) bool {
			flag, v, ok := strings.Cut(a, "=")
			return a == pc.Path || ok && v == pc.Path && strings.HasPrefix(flag, "-") && !strings.Contains(flag, "\n")
		}) {
			out = append(out, pc)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// done returns the processes described exactly once, and the PIDs that were not.
func (pb *procBuilder) done() ([]Process, []int, error) {
	pb.flush()
	var contested []int
	out := pb.procs[:0]
	for _, p := range pb.procs {
		switch pb.count[p.PID] {
		case 1:
			out = append(out, p)
		case 0:
		default:
			contested = append(contested, p.PID)
			pb.count[p.PID] = 0 // listed once
		}
	}
	sort.Ints(contested)
	return out, contested, pb.errs.err()
}

// parseStat reads a /proc/PID/stat line. The command name is between the first "(" and the
// last ")": it may itself hold spaces and parentheses.
func parseStat(p *Process, line string, bootTime *time.Time, clockTicks int) error {
	open := strings.IndexByte(line, '(')
	closing := strings.LastIndexByte(line, ')')
	if open < 0 || closing < open {
		return errorString("no (comm)")
	}
	if pid, ok := atoiNonNeg(strings.TrimSpace(line[:open])); !ok || pid != p.PID {
		return errorString("pid does not match the block")
	}
	p.Comm = strings.Clone(line[open+1 : closing]) // not the whole line's
	// f[0] is field 3 of proc(5): f[i] is field i+3. Only the first 20 are read.
	var f [20]string
	n := 0
	for x := range strings.FieldsSeq(line[closing+1:]) {
		f[n] = x
		if n++; n == len(f) {
			break
		}
	}
	if n < 1 {
		return errorString("no state")
	}
	p.State = strings.Clone(f[0])
	for i, dst := range []**int{&p.PPID, &p.PGID, &p.SID} {
		if n > i+1 {
			if v, ok := atoiNonNeg(f[i+1]); ok {
				*dst = &v
			}
		}
	}
	if n <= 19 {
		return errorString("no start time")
	}
	ticks, ok := parseInt64NonNeg(f[19])
	hz := int64(clockTicks)
	if !ok || ticks/hz > 1<<33 { // centuries: not a start time, and past what a Duration holds
		return errorString("bad start time")
	}
	p.StartTicks = &ticks
	if bootTime != nil {
		t := bootTime.Add(time.Duration(ticks/hz)*time.Second + time.Duration(ticks%hz)*time.Second/time.Duration(hz))
		p.StartTime = &t
	}
	return nil
}

// parseStatus reads one /proc/PID/status line the probe kept.
func parseStatus(p *Process, line string) error {
	key, val, ok := strings.Cut(line, ":")
	if !ok {
		return errorString("no key")
	}
	f := strings.Fields(val)
	switch key {
	case "Name":
		if p.Comm == "" {
			p.Comm = strings.TrimSpace(val)
		}
	case "State":
		if p.State == "" && len(f) > 0 {
			p.State = f[0]
		}
	case "PPid":
		if len(f) > 0 && p.PPID == nil {
			v, ok := atoiNonNeg(f[0])
			if !ok {
				return errorString("bad PPid")
			}
			p.PPID = &v
		}
	case "Uid":
		if len(f) == 0 {
			return errorString("no uid")
		}
		v, ok := atoiNonNeg(f[0]) // the real uid
		if !ok {
			return errorString("bad Uid")
		}
		p.UID = &v
	case "NSpid":
		p.NSPIDs = nil
		for _, s := range f {
			v, ok := atoiNonNeg(s)
			if !ok {
				p.NSPIDs = nil
				return errorString("bad NSpid")
			}
			p.NSPIDs = append(p.NSPIDs, v)
		}
	case "VmRSS", "RssShmem":
		if len(f) != 2 || f[1] != "kB" {
			return errorString("want N kB")
		}
		v, ok := parseInt64NonNeg(f[0])
		if !ok {
			return errorString("bad size")
		}
		if key == "VmRSS" {
			p.RSSKiB = &v
		} else {
			p.RssShmemKiB = &v
		}
	case "Threads":
		if len(f) != 1 {
			return errorString("want one number")
		}
		v, ok := atoiNonNeg(f[0])
		if !ok {
			return errorString("bad Threads")
		}
		p.Threads = &v
	}
	return nil
}

// decodeArgv decodes the base64 of /proc/PID/cmdline into its NUL-separated arguments, and
// the hex SHA-256 of its raw bytes. More than maxArgvBytes bytes means the probe cut it: the
// last argument is then partial, and there is no hash.
func decodeArgv(s string) (argv []string, truncated bool, sum string, err error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, false, "", errorString("bad base64")
	}
	if len(b) > maxArgvBytes {
		b, truncated = b[:maxArgvBytes], true
	} else {
		h := sha256.Sum256(b)
		sum = hex.EncodeToString(h[:])
		b = bytes.TrimSuffix(b, []byte{0})
	}
	if len(b) == 0 {
		return nil, truncated, sum, nil
	}
	for a := range bytes.SplitSeq(b, []byte{0}) {
		argv = append(argv, string(a))
	}
	return argv, truncated, sum, nil
}

// errorString is a detail inside a parse error; the caller adds ErrParse and the input.
type errorString string

func (e errorString) Error() string { return string(e) }

// launchEnvNames are the environment variables the probe reads (Process.Launch), in the
// order of their singleField bits.
var launchEnvNames = [...]string{"TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "LOCAL_RANK", "GROUP_RANK"}

// maxRunIDBytes bounds TORCHELASTIC_RUN_ID, as the probe does.
const maxRunIDBytes = 128

// parseLaunchEnv reads one "NAME=VALUE" field of the launcher's variables. The probe checked
// the value already; it is checked again here, as every byte of the capture is: a run id of
// letters, digits and "._:-", the others at most six digits.
func parseLaunchEnv(p *Process, val string) error {
	name, v, _ := strings.Cut(val, "=")
	if !slices.Contains(launchEnvNames[:], name) {
		return errorString("not a variable the probe reads")
	}
	if name == "TORCHELASTIC_RUN_ID" {
		if v == "" || len(v) > maxRunIDBytes || strings.Trim(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") != "" {
			return errorString("bad run id")
		}
		launchOf(p).RunID = v
		return nil
	}
	n, ok := atoiNonNeg(v)
	if !ok || len(v) > 6 {
		return errorString("want at most six digits")
	}
	switch l := launchOf(p); name {
	case "TORCHELASTIC_RESTART_COUNT":
		l.RestartCount = &n
	case "LOCAL_RANK":
		l.LocalRank = &n
	default:
		l.GroupRank = &n
	}
	return nil
}

func launchOf(p *Process) *LaunchEnv {
	if p.Launch == nil {
		p.Launch = &LaunchEnv{}
	}
	return p.Launch
}
