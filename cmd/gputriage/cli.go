package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/docs"
)

// command is one subcommand. The default command (triage) has no name.
type command struct {
	name    string
	usage   string // the synopsis after "gputriage "
	summary string
	run     func(ctx context.Context, args []string, e *env) (int, error)
	hidden  bool // for the completion scripts and the man page's build only
}

// commands lists every subcommand, in the order usage shows them. It is a function, not a
// variable, because help reads it.
func commands() []command {
	return []command{
		{name: "collect", usage: "collect --save DIR HOST...", summary: "only save each host's capture",
			run: func(ctx context.Context, args []string, e *env) (int, error) {
				return dispatch(ctx, "collect", args, e)
			}},
		{name: "explain", usage: "explain 'ERROR TEXT'", summary: "what a GPU error message means", run: explainCmd},
		{name: "node-check", usage: "node-check [flags]", summary: "judge this node for Slurm (help slurm)", run: nodeCheckCmd},
		{name: "fix", usage: "fix HOST...", summary: "stop the leftovers the findings name", run: fixCmd},
		{name: "watch", usage: "watch [flags] HOST...", summary: "re-probe; show changes; wait --until", run: watchCmd},
		{name: "help", usage: "help [TOPIC]", summary: "help on a command or a topic", run: helpCmd},
		{name: "version", usage: "version", summary: "version, build and probe details", run: versionCmd},
		{name: "completion", usage: "completion bash|zsh|fish", summary: "a shell completion script", run: completionCmd},
		{name: "__complete-hosts", hidden: true, run: completeHostsCmd},
		{name: "__man", hidden: true, run: manCmd},
		{name: "probe-script", hidden: true, run: probeScriptCmd}, // the kubectl debug route's (kube.DebugRoute)
	}
}

func findCommand(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// flagSet returns the flags of cmd ("" for triage), bound to o: exactly those cmd takes.
func flagSet(cmd string, o flagger) *pflag.FlagSet {
	fs := pflag.NewFlagSet(strings.TrimSpace("gputriage "+cmd), pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	o.addFlags(fs)
	return fs
}

// parseFlags parses args for cmd into o. A subcommand refuses a flag another command takes by
// name, as not one of its own.
func parseFlags(cmd string, o flagger, args []string) (*pflag.FlagSet, error) {
	fs := flagSet(cmd, o)
	prefix := ""
	if cmd != "" {
		prefix = cmd + ": "
	}
	if err := fs.Parse(args); err != nil {
		if name := otherCommandsFlag(err); name != "" && cmd != "" {
			return fs, usagef("%s--%s: not a flag of gputriage %s", prefix, name, cmd)
		}
		if s := flagSuggestion(cmd, fs, err); s != "" {
			return fs, usagef("%s%s", prefix, s)
		}
		return fs, usagef("%s%v", prefix, err)
	}
	return fs, nil
}

// otherCommandsFlag is the name of the flag err says is unknown when some command takes it;
// "" when none does, or err is about something else.
func otherCommandsFlag(err error) string {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) {
		return ""
	}
	name := unknown.GetSpecifiedName()
	for _, cmd := range flagCommands() {
		fs := flagSet(cmd, newFlags(cmd))
		f := fs.Lookup(name)
		if unknown.GetSpecifiedShortnames() != "" {
			f = fs.ShorthandLookup(name)
		}
		if f != nil {
			return f.Name
		}
	}
	return ""
}

// helpWidth is the width --help wraps to: the terminal's, else 80 columns.
func helpWidth(e *env) int {
	if tty, w := e.isTerminal(e.stdout); tty && w >= 40 {
		return w
	}
	return 80
}

// usageText is the whole --help of cmd ("" for triage), its flags wrapped to width.
func usageText(cmd string, width int) string {
	flags := flagUsages(flagSet(cmd, newFlags(cmd)), width)
	switch cmd {
	case "collect":
		return collectUsage + flags + collectTail
	case "explain":
		return explainUsage + flags + explainTail
	case "node-check":
		return nodeCheckUsage + flags + nodeCheckTail
	case "fix":
		return fixUsage + flags + fixTail
	case "watch":
		return watchUsage + flags + watchTail
	}
	return usageHead + commandList() + topicList() + hostsHelp + "\nFlags:\n" + flags + exitStatusHelp + examplesHelp
}

// commandList is the Usage block: every subcommand with its summary.
func commandList() string {
	var b strings.Builder
	b.WriteString("Usage:\n")
	line := func(u, s string) { fmt.Fprintf(&b, "  gputriage %-26s %s\n", u, s) }
	line("[flags] HOST...", "triage hosts over SSH")
	line("--replay PATH [flags]", "diagnose saved captures (file or dir)")
	line("--local [flags]", "diagnose this machine, without SSH")
	for _, c := range commands() {
		if !c.hidden {
			line(c.usage, c.summary)
		}
	}
	return b.String()
}

// helpTopic is one topic `gputriage help TOPIC` knows besides the commands.
type helpTopic struct {
	name, summary string
	text          func() string
}

// helpTopics are the topics, in the order `gputriage help` lists them. It is a function, not a
// variable, because a topic's text is built from the others.
func helpTopics() []helpTopic {
	text := func(s string) func() string { return func() string { return s } }
	return []helpTopic{
		{"findings", "every finding code: what it means, what to do", docs.FindingsHelp},
		{"hosts", "how hosts are named: ranges, files, Slurm", text(hostsHelp)},
		{"ssh", "how hosts are reached", text(sshHelp)},
		{"exit-status", "what each exit status means", text(exitStatusHelp)},
		{"fix-guide", "gputriage fix in full: plans, identity checks, audit", func() string { return docs.TerminalText(docs.Fix) }},
		{"slurm", "node-check on Slurm nodes: slurm.conf, draining, the idle gate", func() string { return docs.TerminalText(docs.Slurm) }},
		{"completion", "installing the shell completion", text(completionHelp)},
		{"version", "what gputriage version prints", text(versionHelp)},
	}
}

const versionHelp = "gputriage version (or --version) prints gputriage's module version, the VCS revision and\ntime it was built from, the Go version, and the probe's version, capture format and hash.\n"

// topicText is the text of the topic or finding code name; "" for none.
func topicText(name string) string {
	for _, t := range helpTopics() {
		if t.name == name {
			return t.text()
		}
	}
	return docs.FindingHelp(name)
}

func helpTopicNames() []string {
	var names []string
	for _, t := range helpTopics() {
		names = append(names, t.name)
	}
	sort.Strings(names)
	return names
}

// topicList is the Help topics block of --help: every topic with its summary.
func topicList() string {
	var b strings.Builder
	b.WriteString("\nHelp topics (gputriage help TOPIC; gputriage help COMMAND is its --help):\n")
	for _, t := range helpTopics() {
		fmt.Fprintf(&b, "  %-13s %s\n", t.name, t.summary)
	}
	b.WriteString("  CODE          one finding code, e.g. gputriage help leftover-process\n")
	return b.String()
}

// helpCmd is `gputriage help [TOPIC]`.
func helpCmd(_ context.Context, args []string, e *env) (int, error) {
	width := helpWidth(e)
	switch {
	case len(args) == 0:
		fmt.Fprint(e.stdout, usageText("", width))
	case len(args) > 1:
		return exitUsage, usagef("help: one topic at a time")
	case args[0] != "" && newFlags(args[0]) != nil:
		fmt.Fprint(e.stdout, usageText(args[0], width))
	case topicText(args[0]) != "":
		fmt.Fprint(e.stdout, strings.TrimLeft(topicText(args[0]), "\n"))
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		fmt.Fprint(e.stdout, commandList())
	default:
		return exitUsage, usagef("help: no topic %q; topics: %s, %s, or a finding code (gputriage help findings)", args[0], strings.Join(flagCommands()[1:], ", "), strings.Join(helpTopicNames(), ", "))
	}
	return exitOK, nil
}

const usageHead = `gputriage: why is GPU memory not where you expect, who holds it, and what to do.

`

const hostsHelp = `
Hosts: HOST, user@HOST, HOST:PORT, user@[v6addr]:PORT, ssh_config aliases,
pdsh/Slurm ranges such as 'node[1-4,7,10-12]' (at most 20000 hosts), comma
lists, -w HOSTS, -w ^FILE, -f FILE (one per line, # comments, - for stdin);
-x HOSTS leaves hosts out. Quote ranges: zsh refuses an unmatched [..] glob,
and bash expands it when a file matches. A first host name within an edit or
two of a command (fxi, explian) that ssh_config and known_hosts do not name is
refused with "did you mean fix?" (exit 2); after --, every word is a host:
gputriage -- fxi.
Slurm can choose them too: --slurm-job IDS (the nodes jobs run or ran on),
--slurm-partition P, --slurm-nodes 'node[01-64]', --slurm-state drain (any
combination: a node must match them all), asked with squeue and sinfo here or,
with --slurm-via LOGIN, on a login node over SSH. Each node's drain reason is
shown in the report; ~/.ssh/config says how each node name is reached.
`

const sshHelp = `
SSH: gputriage reaches each host as ssh would (it reads ~/.ssh/config, or -F FILE) but in
process, without the ssh binary. -l, -p, -i, -J and -o Key=Value work like ssh's and win
over the config file; for -o the first value given wins. Host keys are always checked
against known_hosts (--accept-new records unknown ones; a changed key is always refused).
--dry-run prints what each host resolves to and connects to none; --debug-ssh prints on
stderr how each host was reached and how its connection ended, with what it wrote on
stderr.
`

const examplesHelp = `
Examples:
  gputriage --replay fixtures/ct200.capture
  gputriage 'gpu[01-16]'
  gputriage -q 'gpu[01-16]' || echo 'some host needs a look'
  gputriage -w 'gpu[01-16]' -x gpu07 --fanout 8
  gputriage -f hosts.txt --sudo --format markdown > ticket.md
  gputriage --dry-run -F ~/.ssh/config -o User=admin gpu01
  gputriage 'gpu[01-16]' --tp 8 --engine sglang   # who can start a TP-8 job?
  gputriage --slurm-nodes 'node[01-64]' --slurm-state drain  # why drained?
  gputriage --slurm-job 4242 --slurm-via login1
  gputriage collect --save sweep-2026-11-30 'gpu[01-16]'
  gputriage --replay sweep-2026-11-30
  gputriage --local --format prometheus --output DIR/gputriage.prom
`

// flagUsages lists the visible flags of fs, their descriptions wrapped to width columns.
// (pflag's own listing writes --flag[=true|false] for every switch.)
func flagUsages(fs *pflag.FlagSet, width int) string {
	type row struct{ left, right string }
	var rows []row
	col := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		left := "      --" + f.Name
		if f.Shorthand != "" {
			left = "  -" + f.Shorthand + ", --" + f.Name
		}
		varname, usage := flagVar(f)
		if varname != "" {
			left += " " + varname
		}
		if d := flagDefault(f); d != "" {
			usage += " (default " + d + ")"
		}
		rows = append(rows, row{left, usage})
		col = max(col, len(left))
	})
	col = min(col, 32) + 2
	if width-col < 30 {
		col = 10 // a narrow terminal: each description under its flag
	}
	var b strings.Builder
	for _, r := range rows {
		lines := wrapWords(r.right, max(width-col, 20))
		if len(r.left)+2 > col {
			b.WriteString(r.left + "\n")
			r.left = ""
		}
		for i, l := range lines {
			if i > 0 {
				r.left = ""
			}
			fmt.Fprintf(&b, "%-*s%s\n", col, r.left, l)
		}
	}
	return b.String()
}

// flagVar is the name of a flag's value ("" for a switch) and its usage without backquotes.
func flagVar(f *pflag.Flag) (string, string) {
	name, usage := pflag.UnquoteUsage(f)
	if f.NoOptDefVal != "" { // a switch (bool) or a counter (-q, -qq)
		name = ""
	}
	return name, usage
}

// flagDefault is a flag's default as --help and the man page show it; "" when it is the
// zero value.
func flagDefault(f *pflag.Flag) string {
	switch f.DefValue {
	case "", "false", "0", "[]":
		return ""
	}
	return f.DefValue
}

// wrapWords breaks s into lines of at most width columns, at spaces.
func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

const watchUsage = `gputriage watch: re-probe hosts every --interval over one SSH connection per host, and
show what changed: GPU holders that appeared or vanished (a PID with another start time is
another holder), memory per GPU, and how long each vanished holder's memory took to come
back ("GPU 0: 55,286 MiB released 6 s after PID 20629 was gone"), timed by the hosts' probe
clocks to within the time between two rounds. A host that drops is reconnected and the gap
is shown. Each round costs each host one probe; each round is bounded to 30s.

On a terminal: one screen, redrawn in place. Piped: one timestamped line per change, nothing
when nothing changed. --format json: one JSON object per host round (JSON Lines), and a last
one saying why the watch ended.

Usage:
  gputriage watch [flags] HOST...

Flags:
`

const watchTail = `
Exit status:
  0    --until holds on every host
  1    --timeout passed before --until held (without --until, --timeout ends it with 0)
  2    usage or configuration error (--replay, --local: watch needs hosts)
  3    a host could not be reached when the watch started, or was down when --timeout passed
  130  interrupted (Ctrl-C)
`
