package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/report"
)

// outputOptions are the flags that choose what the report shows and where it goes.
type outputOptions struct {
	only        string
	sort        string
	redact      bool
	showSecrets bool
	output      string
}

func (o *outputOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.only, "only", "", "`WHICH` hosts' details are shown: failed, findings or all (default: findings for several hosts, all for one; JSON: all)")
	fs.StringVar(&o.sort, "sort", report.SortHost, "`ORDER` of the details: host (as given) or severity (worst first)")
	fs.BoolVar(&o.redact, "redact", false, "replace hostnames, user names, IP addresses and home directories with placeholders, and leave raw captures out (the report only: --save keeps them)")
	addShowSecrets(fs, &o.showSecrets)
	fs.StringVar(&o.output, "output", "", "write the report to `FILE` (replaced whole, mode 0644) instead of stdout")
}

// check rejects bad values before any host is contacted.
func (o *outputOptions) check() error {
	switch o.only {
	case "", report.OnlyFailed, report.OnlyFindings, report.OnlyAll:
	default:
		return usagef("--only must be failed, findings or all, got %q", o.only)
	}
	switch o.sort {
	case report.SortHost, report.SortSeverity:
	default:
		return usagef("--sort must be host or severity, got %q", o.sort)
	}
	if o.showSecrets && o.redact {
		return usagef("--show-secrets and --redact contradict each other: --redact always masks secrets")
	}
	if o.output != "" {
		dir := filepath.Dir(o.output)
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usagef("--output %s: directory %s does not exist", o.output, dir)
		}
		if st, err := os.Stat(o.output); err == nil && st.IsDir() {
			return usagef("--output %s is a directory", o.output)
		}
	}
	return nil
}

// colorFor decides color and width; report never looks at the terminal itself.
func (o *formatFlags) colorFor(e *env) (bool, int) {
	tty, width := e.isTerminal(e.stdout)
	width = reportWidth(e, tty, width)
	switch o.color {
	case "always":
		return true, width
	case "never":
		return false, width
	}
	if e.getenv("NO_COLOR") != "" || e.getenv("TERM") == "dumb" {
		return false, width
	}
	return tty, width
}

// Widths a text report lays out for: the default where nothing says otherwise (a pipe, a
// file), and the range COLUMNS is believed in.
const (
	defaultReportWidth     = 80
	minColumns, maxColumns = 20, 1000
	columnsEnv             = "COLUMNS"
)

// reportWidth is the width a text report wraps to: the terminal's when stdout is one and its
// size is known, else COLUMNS when it holds a sensible number, else 80. A shell does not
// export COLUMNS by default, so a pipe gets 80 unless the user asks for more.
func reportWidth(e *env, tty bool, termWidth int) int {
	if tty && termWidth > 0 {
		return termWidth
	}
	if n, err := strconv.Atoi(strings.TrimSpace(e.getenv(columnsEnv))); err == nil && n >= minColumns && n <= maxColumns {
		return n
	}
	return defaultReportWidth
}

// writeReport renders the report onto stdout, or into --output FILE.
func (o *options) writeReport(e *env, render func(io.Writer, []report.Host, report.Options) error, hosts []report.Host) error {
	color, width := o.colorFor(e)
	if o.out.output != "" {
		// A file is not the terminal: plain unless asked for color, and as wide as COLUMNS
		// says, else 80.
		color, width = o.color == "always", reportWidth(e, false, 0)
	}
	ropt := report.Options{Color: color, Width: width, Verbose: o.verbose,
		Only: o.out.only, Sort: o.out.sort, Redact: o.out.redact, ShowSecrets: o.out.showSecrets}
	if o.format == "prometheus" {
		ropt.Now = time.Now() // gputriage_last_run_timestamp_seconds
	}
	if o.quiet > 0 {
		// -q replaces the report on stdout; --output FILE still gets it.
		if o.quiet == 1 {
			if err := problemLines(e.stdout, hosts, o.out.showSecrets); err != nil {
				return err
			}
		}
		if o.out.output == "" {
			return nil
		}
	}
	if o.out.output == "" {
		return render(e.stdout, hosts, ropt)
	}
	var b bytes.Buffer
	if err := render(&b, hosts, ropt); err != nil {
		return err
	}
	return writeFileAtomic(o.out.output, b.Bytes())
}

// failureLine is how collect and -q name a failed host: "HOST: failed (PHASE: KIND) MESSAGE".
// The message can carry the host's own words (its output, a ProxyCommand's stderr): it is
// sanitized and, unless --show-secrets, its credentials are masked, as in every report.
func failureLine(h report.Host, showSecrets bool) string {
	return fmt.Sprintf("%s: failed (%s: %s) %s\n", report.Sanitize(h.Name), report.Sanitize(h.Err.Phase),
		report.Sanitize(h.Err.Kind), hostText(showSecrets)(h.Err.Message))
}

// hostText makes a host's words safe to print outside a report (a fix plan, watch's lines, an
// error): sanitized and, unless show (--show-secrets), their credentials masked, as in every
// report.
func hostText(show bool) func(string) string {
	if show {
		return report.Sanitize
	}
	return func(s string) string { return report.Sanitize(report.MaskSecrets(s)) }
}

// problemLines is -q's output: one line per host that makes the exit status non-zero, saying
// why in stable words a script can match: "HOST: failed (PHASE: KIND) MESSAGE", or "HOST:" and
// the codes of its findings at warning or worse with their severity, and "cannot take --tp N"
// when no set of its GPUs can.
func problemLines(w io.Writer, hosts []report.Host, showSecrets bool) error {
	var b strings.Builder
	for _, h := range hosts {
		name := report.Sanitize(h.Name)
		if h.Err != nil {
			b.WriteString(failureLine(h, showSecrets))
			continue
		}
		var why []string
		for _, f := range h.Result.Findings {
			if f.Severity >= diagnose.Warning && !slices.Contains(why, f.Severity.String()+" "+f.Code) {
				why = append(why, f.Severity.String()+" "+f.Code)
			}
		}
		if r := h.Readiness; r != nil && !r.Ready && r.Subset == nil {
			why = append(why, fmt.Sprintf("cannot take --tp %d", r.Job.TP))
		}
		if len(why) > 0 {
			fmt.Fprintf(&b, "%s: %s\n", name, strings.Join(why, ", "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeFileAtomic writes data to a temporary file beside path and renames it over path, so a
// reader never sees half a report and a failed write leaves the old file alone.
func writeFileAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%s: %w", f.Name(), err)
	}
	return os.Rename(f.Name(), path)
}
