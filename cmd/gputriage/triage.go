package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
)

// version is set at build time with -ldflags "-X main.version=..."; otherwise it comes from
// the module's build info.
var version = ""

// dispatch runs the triage command, or collect (cmd "collect"): the same sweep, but it only
// saves each host's capture.
func dispatch(ctx context.Context, cmd string, args []string, e *env) (int, error) {
	collectOnly := cmd == "collect"
	o, fs, err := parseTriage(cmd, args)
	if err != nil {
		return exitUsage, err
	}
	if o.help {
		fmt.Fprint(e.stdout, usageText(cmd, helpWidth(e)))
		return exitOK, nil
	}
	if o.version {
		return versionCmd(ctx, nil, e)
	}
	render, job, err := o.check(fs, collectOnly)
	if err != nil {
		return exitUsage, err
	}

	tr := triager{job: job}
	if o.format == "markdown" || o.format == "md" {
		tr.keep = report.MarkdownCaptureBytes
	}
	var hosts []report.Host
	switch {
	case o.replay != "":
		hosts, err = replayHosts(o.replay, tr)
		if err != nil {
			return exitUsage, err
		}
	case o.local:
		h := localHost(ctx, o.timeout)
		tr.finish(&h)
		hosts = []report.Host{h}
	default:
		var code int
		hosts, code, err = o.remote(ctx, fs.Args(), tr, e)
		if err != nil || hosts == nil {
			return code, err
		}
	}

	if collectOnly {
		o.collected(e.stdout, hosts)
	} else if err := o.writeReport(e, render, hosts); err != nil {
		return exitInternal, fmt.Errorf("writing the report: %w", err)
	}
	if ctx.Err() != nil {
		return exitInterrupted, nil
	}
	code := exitStatus(hosts)
	if collectOnly && code == exitFindings {
		code = exitOK
	}
	return code, nil
}

// check refuses a triage or collect command line that parses but cannot run, and returns
// the renderer and the --tp job (nil: none) the run needs.
func (o *options) check(fs *pflag.FlagSet, collectOnly bool) (func(io.Writer, []report.Host, report.Options) error, *readiness.Job, error) {
	render, err := o.renderer()
	if err != nil {
		return nil, nil, err
	}
	if err := o.out.check(); err != nil {
		return nil, nil, err
	}
	if o.quiet == 1 && o.out.redact && o.out.output == "" {
		return nil, nil, usagef("-q prints host names and --redact hides them: give --output FILE for the redacted report")
	}
	job, err := o.ready.job(fs)
	if err != nil {
		return nil, nil, err
	}
	if o.timeout <= 0 {
		return nil, nil, usagef("--timeout must be positive, got %s", o.timeout)
	}
	if err := o.checkSources(fs.NArg() > 0, collectOnly); err != nil {
		return nil, nil, err
	}
	return render, job, nil
}

// checkSources refuses a command line that names no source, or more than one: host names,
// --replay or --local; and the flags that go with host names only.
func (o *options) checkSources(hostArgs, collectOnly bool) error {
	remote := hostArgs || o.hosts.given() || o.slurm.given()
	sources := 0
	for _, set := range []bool{o.replay != "", o.local, remote} {
		if set {
			sources++
		}
	}
	switch {
	case o.slurm.via != "" && !o.slurm.given():
		return usagef("--slurm-via goes with --slurm-job, --slurm-partition, --slurm-nodes or --slurm-state")
	case sources == 0:
		return usagef("nothing to triage: give host names, -w HOSTS, -f FILE, --slurm-*, --replay PATH or --local")
	case sources > 1:
		return usagef("give only one of --replay, --local and host names")
	case collectOnly && (!remote || o.save == ""):
		return usagef("collect needs --save DIR and host names")
	case (o.dryRun || o.save != "") && !remote:
		return usagef("--dry-run and --save go with host names")
	case len(o.hosts.exclude) > 0 && !remote:
		return usagef("-x goes with host names")
	}
	return nil
}

// remote resolves and sweeps the hosts named by args and flags (or, with --dry-run, prints
// how they would be reached and returns no hosts).
func (o *options) remote(ctx context.Context, args []string, tr triager, e *env) ([]report.Host, int, error) {
	var sched map[string]*report.Scheduler
	if o.slurm.given() {
		nodes, s, err := o.slurmHosts(ctx, e)
		if err != nil && ctx.Err() != nil {
			return nil, exitInterrupted, errors.New("interrupted while asking Slurm for the hosts")
		} else if err != nil {
			return nil, exitUsage, err
		}
		args, sched = append(slices.Clone(args), nodes...), s
	}
	ts, err := o.hosts.targets(args, e.stdin)
	if err != nil {
		return nil, exitUsage, err
	}
	if len(ts) == 0 {
		return nil, exitUsage, usagef("no hosts given (or -x left none)")
	}
	res, err := o.ssh.resolve(ts, e)
	if err != nil {
		return nil, exitUsage, err
	}
	if o.dryRun {
		if err := dryRun(e.stdout, res, o.format); err != nil {
			return nil, exitInternal, err
		}
		return nil, exitOK, nil
	}
	var sv *saver
	if o.save != "" {
		if sv, err = newSaver(o.save); err != nil {
			return nil, exitInternal, fmt.Errorf("--save: %w", err)
		}
	}
	hosts, err := o.ssh.sweep(ctx, res, o.timeout, tr, sv, e)
	if err != nil {
		return nil, exitUsage, err
	}
	if err := sv.finish(hosts); err != nil {
		return nil, exitInternal, fmt.Errorf("--save: %w", err)
	}
	for i := range hosts {
		hosts[i].Scheduler = sched[hosts[i].Name]
	}
	return hosts, exitOK, nil
}

// collected prints collect's one line per host: -q keeps only the failed ones, -qq none.
func (o *options) collected(w io.Writer, hosts []report.Host) {
	for _, h := range hosts {
		switch {
		case o.quiet >= 2:
		case h.Err != nil:
			io.WriteString(w, failureLine(h, o.out.showSecrets))
		case o.quiet == 0:
			fmt.Fprintf(w, "%s: saved %d bytes\n", report.Sanitize(h.Name), max(h.CaptureSize, len(h.Capture)))
		}
	}
}

// exitStatus is 3 when any host failed, else 1 when any finding is a warning or worse, or
// (with --tp) a host cannot take the job on any of its GPUs.
func exitStatus(hosts []report.Host) int {
	code := exitOK
	for _, h := range hosts {
		if h.Err != nil {
			return exitHostsFailed
		}
		if h.Result.Worst() >= diagnose.Warning {
			code = exitFindings
		}
		if r := h.Readiness; r != nil && !r.Ready && r.Subset == nil {
			code = exitFindings
		}
	}
	return code
}

func (o *formatFlags) renderer() (func(io.Writer, []report.Host, report.Options) error, error) {
	switch o.color {
	case "auto", "always", "never":
	default:
		return nil, usagef("--color must be auto, always or never, got %q", o.color)
	}
	switch o.format {
	case "text":
		return report.Text, nil
	case "markdown", "md":
		return report.Markdown, nil
	case "json":
		return report.JSON, nil
	case "prometheus":
		return report.Prometheus, nil
	}
	return nil, usagef("--format must be text, markdown, json or prometheus, got %q", o.format)
}

// triager keeps of each diagnosed host what the report needs, so that hosts are dropped as
// they are diagnosed, not when the report is written.
type triager struct {
	job  *readiness.Job // --tp, answered per host while its whole snapshot is at hand; nil: none
	keep int            // bytes of the raw capture to keep: what a Markdown report can show
	// see, when set, is given each host while its whole snapshot is at hand (fix builds its
	// plan there); called from the sweep's goroutines, concurrently.
	see func(h *report.Host)
}

// finish answers --tp for h, bounds the processes its result keeps (diagnose.Retain), then
// drops what no report reads: the raw capture beyond tr.keep
// (CaptureSize keeps its length) and the snapshot beyond reportView.
func (tr triager) finish(h *report.Host) {
	if tr.see != nil {
		tr.see(h)
	}
	if tr.job != nil && h.Err == nil && h.Snapshot != nil {
		r := readiness.Check(h.Snapshot, h.Result, *tr.job)
		h.Readiness = &r
	}
	diagnose.Retain(&h.Result)
	h.Snapshot = reportView(h.Snapshot)
	if c := h.Capture; c != nil {
		h.CaptureSize, h.Capture = len(c), nil
		if tr.keep > 0 {
			h.Capture = bytes.Clone(c[:min(len(c), tr.keep)])
		}
	}
}

// reportView is the part of a snapshot that reports read: host facts, nvidia-smi's answer,
// the GPUs, /dev/shm's totals, notes and sections. The processes, descriptors, mappings,
// units and /dev/shm entries are diagnose's input only; its Result carries what it found in
// them. TestReportView checks that every report renders the same from the view.
func reportView(s *parse.Snapshot) *parse.Snapshot {
	if s == nil {
		return nil
	}
	v := &parse.Snapshot{Host: s.Host, SMI: s.SMI, GPUs: parse.CloneGPUs(s.GPUs), Shm: s.Shm, Notes: s.Notes,
		Sections: s.Sections, Truncated: s.Truncated}
	v.Shm.Entries = nil
	return v
}

// diagnoseCapture parses one host's raw probe output and diagnoses it. Ages are computed
// against the host's own clock at probe time, so a replay gives exactly the live result.
func diagnoseCapture(name string, raw []byte) report.Host {
	// Output that is not a capture at all (a login banner, a shell that ignored the script,
	// garbage) means the probe did not run: the host is not triaged, whatever it printed. Only
	// the first line is looked at, and at most maxHeaderLine bytes of it.
	if _, err := parse.SplitCapture(firstLine(raw)); err != nil {
		return report.Host{Name: name, Capture: raw, Err: &report.HostError{Phase: "probe", Kind: "bad-output",
			Message: fmt.Sprintf("the host's output is not a gputriage capture (%d bytes): %v", len(raw), err)}}
	}
	snap, err := parse.Parse(raw) // never nil: what could be read, and what could not
	h := report.Host{Name: name, Snapshot: snap, Capture: raw}
	if err != nil {
		snap.Notes = append(snap.Notes, parse.Note{Code: "parse-error", Message: err.Error()})
	}
	now := time.Unix(0, 0).UTC()
	if snap.Host.Time != nil {
		now = *snap.Host.Time
	}
	h.Result = diagnose.Diagnose(snap, now)
	return h
}

// plainHostname reports whether a host's reported hostname can name it in a report: letters,
// digits, '-', '_' and '.', at most 253 bytes, not starting with '-' or '.'. The value is the
// host's, so anything else (escapes, spaces, a forged "name  OK") falls back to the file name.
func plainHostname(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// replayHosts reads a capture file, or a directory saved by --save/collect (or any directory
// of HOST.capture files). A file that is not a capture is a usage error.
func replayHosts(path string, tr triager) ([]report.Host, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, usagef("--replay: %v", err)
	}
	if st.IsDir() {
		hosts, err := replayDir(path, tr)
		if err != nil {
			return nil, usagef("--replay: %v", err)
		}
		return hosts, nil
	}
	raw, err := readCapture(path)
	if err != nil {
		return nil, usagef("--replay: %v", err)
	}
	h := diagnoseCapture(hostFromCaptureFile(path), raw)
	if h.Snapshot != nil && plainHostname(h.Snapshot.Host.Hostname) {
		// A capture file is named by whoever saved it (fixtures/ct200.capture, a.capture): the
		// host is the one the capture says it came from. (In a directory, a saved sweep, the
		// file names are the names the user gave, as the live report showed them.)
		h.Name = h.Snapshot.Host.Hostname
	}
	if h.Err != nil && h.Err.Kind == "bad-output" {
		// The user named the wrong file. (In a directory, a saved sweep, such a file is one
		// host's bad record and the others are still reported.)
		return nil, usagef("--replay %s: %s", path, h.Err.Message)
	}
	tr.finish(&h)
	return []report.Host{h}, nil
}
