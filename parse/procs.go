package parse

import (
	"bytes"
	"encoding/base64"
	"io"
	"strings"
	"time"
)

// maxArgvBytes is how much of /proc/PID/cmdline the probe keeps; it sends one byte more so
// that a longer one shows as truncated.
const maxArgvBytes = 65536

// ParseProcs reads the procs section: per PID, a block of "pid N", then "gone" or "stat ...",
// "status KEY:\tVALUE", "cgroup LINE", "argv BASE64", "cwd PATH", "path exists|missing PATH",
// ending at "end" or the next "pid". bootTime and clockTicks (USER_HZ, 100 when not positive)
// turn the start time in /proc/PID/stat into a time; with bootTime nil StartTime stays nil.
// Lines it does not know (the shell's complaints about a process that just exited) are skipped.
// Processes come in the order of their blocks.
func ParseProcs(r io.Reader, bootTime *time.Time, clockTicks int) ([]Process, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	if clockTicks <= 0 {
		clockTicks = 100
	}
	var procs []Process
	var p *Process
	var cgroup []string
	flush := func() {
		if p == nil {
			return
		}
		if len(cgroup) > 0 {
			p.Cgroup = ParseCgroup(strings.Join(cgroup, "\n"))
		}
		procs = append(procs, *p)
		p, cgroup = nil, nil
	}
	for i, l := range splitLines(b) {
		n := i + 1
		key, val, _ := strings.Cut(l, " ")
		if key == "pid" {
			flush()
			pid, ok := atoiNonNeg(val)
			if !ok {
				errs.addf("procs line %d: pid: %s", n, q(val))
				continue
			}
			p = &Process{PID: pid}
			continue
		}
		if p == nil {
			continue
		}
		switch key {
		case "gone":
			p.Gone = true
		case "end":
			flush()
		case "stat":
			if err := parseStat(p, val, bootTime, clockTicks); err != nil {
				errs.addf("procs line %d: pid %d: stat: %v: %s", n, p.PID, err, q(val))
			}
		case "status":
			if err := parseStatus(p, val); err != nil {
				errs.addf("procs line %d: pid %d: status: %v: %s", n, p.PID, err, q(val))
			}
		case "cgroup":
			cgroup = append(cgroup, val)
		case "argv":
			argv, trunc, err := decodeArgv(val)
			if err != nil {
				errs.addf("procs line %d: pid %d: argv: %v", n, p.PID, err)
			}
			p.Argv, p.ArgvTruncated = argv, trunc
		case "cwd":
			p.Cwd = val
		case "path":
			state, path, _ := strings.Cut(val, " ")
			if (state == "exists" || state == "missing") && path != "" {
				p.ModelPaths = append(p.ModelPaths, PathCheck{Path: path, Exists: state == "exists"})
			}
		}
	}
	flush()
	return procs, errs.err()
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
	p.Comm = line[open+1 : closing]
	f := strings.Fields(line[closing+1:])
	// f[0] is field 3 of proc(5): f[i] is field i+3.
	if len(f) < 1 {
		return errorString("no state")
	}
	p.State = f[0]
	if len(f) > 1 {
		if v, ok := atoiNonNeg(f[1]); ok {
			p.PPID = &v
		}
	}
	if len(f) <= 19 {
		return errorString("no start time")
	}
	ticks, ok := parseInt64NonNeg(f[19])
	hz := int64(clockTicks)
	if !ok || ticks/hz > 1<<33 { // centuries: not a start time, and past what a Duration holds
		return errorString("bad start time")
	}
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
	}
	return nil
}

// decodeArgv decodes the base64 of /proc/PID/cmdline into its NUL-separated arguments. More
// than maxArgvBytes bytes means the probe cut it: the last argument is then partial.
func decodeArgv(s string) (argv []string, truncated bool, err error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, false, errorString("bad base64")
	}
	if len(b) > maxArgvBytes {
		b, truncated = b[:maxArgvBytes], true
	}
	if !truncated {
		b = bytes.TrimSuffix(b, []byte{0})
	}
	if len(b) == 0 {
		return nil, truncated, nil
	}
	for a := range bytes.SplitSeq(b, []byte{0}) {
		argv = append(argv, string(a))
	}
	return argv, truncated, nil
}

// errorString is a detail inside a parse error; the caller adds ErrParse and the input.
type errorString string

func (e errorString) Error() string { return string(e) }
