package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/explain"
	"github.com/gputriage/gputriage/report"
)

const explainUsage = `gputriage explain: what a GPU error message means, with its numbers decoded,
and what to run next.

Usage:
  gputriage explain [flags] 'ERROR TEXT'     the message as an argument
  gputriage explain [flags] --file LOG       a file (a whole log is fine)
  gputriage explain [flags] < LOG            standard input (also: -)
  gputriage explain --host gpu07 --file LOG  also triage the host: the processes
                                             the message names are shown with
                                             their command lines, units, ages

Flags:
`

const explainTail = `
Exit status:
  0    the text was explained
  1    with --host: the hosts have findings at warning or worse
  2    no known error in the text, or a usage error
  3    with --host: a host could not be triaged
`

// explainCmd is `gputriage explain`.
func explainCmd(ctx context.Context, args []string, e *env) (int, error) {
	var o explainFlags
	fs, err := parseFlags("explain", &o, args)
	if err != nil {
		return exitUsage, err
	}
	if o.help {
		fmt.Fprint(e.stdout, usageText("explain", helpWidth(e)))
		return exitOK, nil
	}
	if o.version {
		return versionCmd(ctx, nil, e)
	}
	if err := o.checkExplain(fs); err != nil {
		return exitUsage, err
	}
	text, err := o.message(fs, e)
	if err != nil {
		return exitUsage, err
	}
	ex := explain.Explain(text)
	if len(ex) == 0 {
		return exitUsage, usagef("explain: %s", report.ExplainUnrecognized(len(text)))
	}

	var hosts []report.Host
	var ties []report.Tie
	if len(o.hosts) > 0 {
		if hosts, ties, err = o.triageHosts(ctx, ex, e); err != nil {
			return exitUsage, err
		}
	}
	color, width := o.colorFor(e)
	if err := report.Explanations(e.stdout, ex, ties, hosts, o.format, report.Options{Color: color, Width: width, Verbose: o.verbose, ShowSecrets: o.showSecrets}); err != nil {
		return exitInternal, fmt.Errorf("writing the explanation: %w", err)
	}
	if ctx.Err() != nil {
		return exitInterrupted, nil
	}
	if len(hosts) > 0 {
		return exitStatus(hosts), nil
	}
	return exitOK, nil
}

// message reads the text to explain: --file, the arguments, or standard input ("-" or none),
// at most explain.MaxInputBytes of it, saying so when it was cut.
func (o *explainFlags) message(fs *pflag.FlagSet, e *env) (string, error) {
	var r io.Reader
	switch {
	case o.file != "":
		f, err := os.Open(o.file)
		if err != nil {
			return "", usagef("explain: %v", err)
		}
		defer f.Close()
		r = f
	case fs.NArg() == 1 && fs.Arg(0) == "-", fs.NArg() == 0:
		r = e.stdin
		if stdinIsTerminal(e) {
			// Nothing is piped in: say what is awaited rather than hang silently.
			fmt.Fprintln(e.stderr, "gputriage: explain: paste the error text, then press Ctrl-D on a line of its own "+
				"(or give the text as an argument, or --file LOG)")
		}
	default:
		r = strings.NewReader(strings.Join(fs.Args(), " "))
	}
	b, err := io.ReadAll(io.LimitReader(r, explain.MaxInputBytes+1))
	if err != nil {
		return "", usagef("explain: reading the message: %v", err)
	}
	text := string(b)
	if explain.Truncated(text) {
		fmt.Fprintf(e.stderr, "gputriage: explain: only the first %d MiB of the text were read\n", explain.MaxInputBytes>>20)
	}
	return text, nil
}

// triageHosts sweeps the --host hosts and ties the explanations' PIDs to their processes.
func (o *explainFlags) triageHosts(ctx context.Context, ex []explain.Explanation, e *env) ([]report.Host, []report.Tie, error) {
	ts, err := new(hostOptions).targets(o.hosts, e.stdin)
	if err != nil {
		return nil, nil, err
	}
	c := o.ssh.config(e)
	c.Timeout = o.timeout
	res, err := c.Resolve(ts)
	if err != nil {
		return nil, nil, triageErr(err)
	}
	named := newNamedProcs(ex)
	c.Each, c.Keep, c.Save = named.see, 0, "" // explanations show no capture
	hosts, err := sweep(ctx, c, res, e)
	if err != nil {
		return nil, nil, triageErr(err)
	}
	return hosts, tiePIDs(ex, hosts, named), nil
}

// checkExplain refuses what explain's flags allow but its command line cannot mean.
func (o *explainFlags) checkExplain(fs *pflag.FlagSet) error {
	if _, err := o.renderer(); err != nil {
		return err
	}
	if o.format == "prometheus" {
		return usagef("explain: --format prometheus is for triage: explain writes text, markdown or json")
	}
	if o.file != "" && fs.NArg() > 0 {
		return usagef("explain: give the message as arguments or --file, not both")
	}
	return nil
}

// stdinIsTerminal reports whether standard input is a terminal: nothing piped in.
func stdinIsTerminal(e *env) bool {
	w, ok := e.stdin.(io.Writer) // an *os.File; isTerminal takes the writer side
	if !ok {
		return false
	}
	tty, _ := e.isTerminal(w)
	return tty
}

// namedProcs keeps, of each host, the processes the messages name, read while its whole
// result is at hand: once kept for the report (diagnose.Retain), a result holds only the
// processes its findings name and a few others, and a PID a message names may be folded away.
type namedProcs struct {
	pids  map[int]bool
	mu    sync.Mutex
	found map[string]map[int]diagnose.GPUProcess // host name -> PID -> its process, copied
}

func newNamedProcs(ex []explain.Explanation) *namedProcs {
	n := &namedProcs{pids: map[int]bool{}, found: map[string]map[int]diagnose.GPUProcess{}}
	for _, x := range ex {
		for _, pm := range x.PIDs {
			n.pids[pm.PID] = true
		}
	}
	return n
}

// see is the pipeline's Config.Each: called for each host, concurrently, before its result is
// folded.
func (n *namedProcs) see(h *report.Host) {
	if h.Err != nil {
		return
	}
	for _, p := range h.Result.Processes {
		if n.pids[p.PID] {
			n.mu.Lock()
			if n.found[h.Name] == nil {
				n.found[h.Name] = map[int]diagnose.GPUProcess{}
			}
			n.found[h.Name][p.PID] = p
			n.mu.Unlock()
		}
	}
}

// tiePIDs ties each PID the messages name to its process on every triaged host.
func tiePIDs(ex []explain.Explanation, hosts []report.Host, named *namedProcs) []report.Tie {
	var ties []report.Tie
	for _, x := range ex {
		for _, pm := range x.PIDs {
			for _, h := range hosts {
				if h.Err != nil {
					continue
				}
				t := report.Tie{Host: h.Name, PID: pm.PID, LogGiB: pm.GiB}
				if p, ok := named.found[h.Name][pm.PID]; ok {
					t.Process = &p
				}
				ties = append(ties, t)
			}
		}
	}
	return ties
}
