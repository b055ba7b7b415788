package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/sshexec"
)

// A command's flags are a struct of its own that embeds the pieces it takes, each piece
// registering its flags with addFlags; the command's addFlags registers exactly those, in
// the order its --help lists them. --help, the completion scripts and the man page are read
// from the flag set it builds (newFlags), so a flag a command does not take is neither shown
// nor accepted (parseFlags names it).

// flagger is a command's flags: it registers them on a flag set.
type flagger interface{ addFlags(fs *pflag.FlagSet) }

// newFlags returns cmd's flags at their zero value ("" for triage); nil for a command that
// takes no flags.
func newFlags(cmd string) flagger {
	switch cmd {
	case "":
		return new(options)
	case "collect":
		return new(collectFlags)
	case "explain":
		return new(explainFlags)
	case "node-check":
		return new(nodeCheckFlags)
	case "fix":
		return new(fixFlags)
	case "watch":
		return new(watchFlags)
	}
	return nil
}

// flagCommands are the commands that take flags, "" (triage) first, then in the order usage
// lists them.
func flagCommands() []string {
	names := []string{""}
	for _, c := range commands() {
		if newFlags(c.name) != nil {
			names = append(names, c.name)
		}
	}
	return names
}

// The commands' flags.

// options are the triage command's flags: every flag collect takes, and how the report is
// made.
type options struct {
	collectFlags
	formatFlags
	sourceFlags
	verbose bool
	out     outputOptions
	ready   readyOptions
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	o.formatFlags.addFlags(fs, reportFormatUsage)
	o.sourceFlags.addFlags(fs)
	addLocal(fs, &o.local)
	addTimeout(fs, &o.timeout)
	addVerbose(fs, &o.verbose)
	addQuiet(fs, &o.quiet)
	o.out.addFlags(fs)
	addVersion(fs, &o.version)
	addHelp(fs, &o.help)
	o.hosts.addFlags(fs)
	o.slurm.addFlags(fs)
	o.ssh.addFlags(fs)
	o.saveFlags.addFlags(fs)
	o.ready.addFlags(fs)
}

// newOptions are the triage command's flags at their defaults.
func newOptions() *options {
	o := new(options)
	o.addFlags(pflag.NewFlagSet("gputriage", pflag.ContinueOnError))
	return o
}

// collectFlags are collect's flags: a sweep that saves each host's capture.
type collectFlags struct {
	sweepOptions
	saveFlags
	local   bool
	quiet   int
	version bool
	help    bool
}

func (o *collectFlags) addFlags(fs *pflag.FlagSet) {
	addLocal(fs, &o.local)
	addTimeout(fs, &o.timeout)
	addQuiet(fs, &o.quiet)
	addVersion(fs, &o.version)
	addHelp(fs, &o.help)
	o.hosts.addFlags(fs)
	o.slurm.addFlags(fs)
	o.ssh.addFlags(fs)
	o.saveFlags.addFlags(fs)
}

// parseTriage parses the command line of triage (cmd "") or collect. collect runs triage's
// sweep and renders no report: the triage flags it does not take keep their defaults.
func parseTriage(cmd string, args []string) (*options, *pflag.FlagSet, error) {
	o := newOptions()
	var f flagger = o
	if cmd == "collect" {
		f = &o.collectFlags
	}
	fs, err := parseFlags(cmd, f, args)
	return o, fs, err
}

// fixFlags are fix's flags: its own, and the hosts it sweeps for the plan.
type fixFlags struct {
	fix fixOptions
	sweepOptions
	help bool
}

func (o *fixFlags) addFlags(fs *pflag.FlagSet) {
	o.fix.addFlags(fs)
	addTimeout(fs, &o.timeout)
	addHelp(fs, &o.help)
	o.hosts.addFlags(fs)
	o.slurm.addFlags(fs)
	o.ssh.addFlags(fs)
}

// asTriage is fix's command line as the triage command that sweeps its hosts for the plan:
// fix's hosts, reach and timeout, and triage's defaults for the rest.
func (o *fixFlags) asTriage() *options {
	t := newOptions()
	t.sweepOptions = o.sweepOptions
	return t
}

// watchFlags are watch's flags. Its --timeout is the whole watch's, and it reaches each host
// over one connection of its own: no --fanout, no --debug-ssh.
type watchFlags struct {
	watch watchOptions
	formatFlags
	timeout time.Duration
	help    bool
	hosts   hostOptions
	ssh     reachFlags
	ready   readyOptions
}

func (o *watchFlags) addFlags(fs *pflag.FlagSet) {
	o.watch.addFlags(fs)
	o.formatFlags.addFlags(fs, "output `FORMAT`: text, or json for JSON Lines (one object per host round)")
	fs.DurationVar(&o.timeout, "timeout", 0, "end the watch after `DURATION` (exit 1 when --until has not held by then; default: no end)")
	fs.Lookup("timeout").DefValue = "0" // its usage says what 0 means: not "(default 0s)"
	addHelp(fs, &o.help)
	o.hosts.addFlags(fs)
	o.ssh.addFlags(fs)
	o.ready.addFlags(fs)
}

// explainFlags are explain's flags: where the message is, and the hosts --host triages.
type explainFlags struct {
	file  string   // --file
	hosts []string // --host
	formatFlags
	timeout     time.Duration
	verbose     bool
	showSecrets bool
	version     bool
	help        bool
	ssh         sshOptions
}

func (o *explainFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.file, "file", "", "read the message from `FILE`")
	fs.StringArrayVar(&o.hosts, "host", nil, "triage `HOST` too and tie the message to it (repeatable; ranges allowed)")
	o.formatFlags.addFlags(fs, reportFormatUsage)
	addTimeout(fs, &o.timeout)
	addVerbose(fs, &o.verbose)
	addShowSecrets(fs, &o.showSecrets)
	addVersion(fs, &o.version)
	addHelp(fs, &o.help)
	o.ssh.addFlags(fs)
}

// nodeCheckFlags are node-check's flags: its own only, for it probes this node, without SSH,
// and writes no report.
type nodeCheckFlags struct {
	nodeCheckOptions
	help bool
}

func (o *nodeCheckFlags) addFlags(fs *pflag.FlagSet) {
	o.nodeCheckOptions.addFlags(fs)
	addHelp(fs, &o.help)
}

// The pieces. hostOptions (-f -w -x), slurmOptions (--slurm-*), outputOptions (--only, --sort,
// --redact, --show-secrets, --output), readyOptions (--tp) and the commands' own (fixOptions,
// watchOptions, nodeCheckOptions) are kept beside the code that reads them.

// sweepOptions are the pieces of a command that sweeps the hosts it is named over SSH
// (triage, collect, fix): which hosts, how each is reached, and how long each gets.
type sweepOptions struct {
	timeout time.Duration
	hosts   hostOptions
	slurm   slurmOptions
	ssh     sshOptions
}

// formatFlags say how a command's output is written: --format and --color.
type formatFlags struct {
	format string
	color  string
}

const reportFormatUsage = "report `FORMAT`: text, markdown, json, or prometheus (metrics for node_exporter's textfile collector)"

func (o *formatFlags) addFlags(fs *pflag.FlagSet, formatUsage string) {
	fs.StringVar(&o.format, "format", "text", formatUsage)
	fs.StringVar(&o.color, "color", "auto", "`WHEN` to color text output: auto, always or never (NO_COLOR is honored). Text wraps to the terminal's width; piped or with --output, to $COLUMNS, else 80")
}

// sourceFlags name the captures triage diagnoses instead of probing hosts over SSH (or this
// machine: --local, which collect takes too).
type sourceFlags struct{ replay string }

func (o *sourceFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.replay, "replay", "", "diagnose the saved captures at `PATH`: a capture file, or a directory of HOST.capture files")
}

func addLocal(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "local", false, "probe this machine directly, without SSH")
}

// saveFlags are what a sweep does besides diagnosing: show how each host would be reached
// instead, or keep each capture.
type saveFlags struct {
	dryRun bool
	save   string
}

func (o *saveFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.dryRun, "dry-run", false, "print how each host would be reached (like ssh -G) and connect to none")
	fs.StringVar(&o.save, "save", "", "also keep each host's raw capture in `DIR`/HOST.capture, for --replay")
}

// reachFlags say how each host is reached over SSH, as ssh's own flags and ssh_config do.
type reachFlags struct {
	configFile     string
	user           string
	port           int
	identity       []string
	jump           string
	opts           []string // -o Key=Value
	connectTimeout time.Duration
	acceptNew      bool
	askPassphrase  bool
	sudo           bool
	kube           kube.Config // kubectl's flags, for k8s/NODE
}

func (o *reachFlags) addFlags(fs *pflag.FlagSet) {
	o.addConfigFlags(fs)
	o.addSessionFlags(fs)
}

// addConfigFlags registers the flags that say how ssh_config resolves each host, and how
// kubectl's config reaches each Kubernetes node.
func (o *reachFlags) addConfigFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.configFile, "config", "F", "", "ssh config `FILE`, like ssh -F (default ~/.ssh/config, then /etc/ssh/ssh_config)")
	fs.StringVarP(&o.user, "login", "l", "", "`USER` to log in as, like ssh -l")
	fs.IntVarP(&o.port, "port", "p", 0, "`PORT` to connect to, like ssh -p")
	fs.StringArrayVarP(&o.identity, "identity", "i", nil, "identity `FILE`, like ssh -i (repeatable)")
	fs.StringVarP(&o.jump, "jump", "J", "", "`JUMPS`, like ssh -J: [user@]host[:port][,...]")
	fs.StringArrayVarP(&o.opts, "option", "o", nil, "ssh_config option as `Key=Value`, like ssh -o: before the config file, first value wins (repeatable)")
	fs.StringVar(&o.kube.Kubeconfig, "kubeconfig", "", "kubeconfig `FILE` for k8s/NODE targets, like kubectl's (default $KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&o.kube.Context, "context", "", "kubeconfig `CONTEXT` for k8s/NODE targets, like kubectl's (default its current context)")
	fs.StringVar(&o.kube.Selector, "k8s-selector", "", "probe the Kubernetes nodes this label `SELECTOR` picks (k8s/ alone: every GPU node)")
	fs.StringVar(&o.kube.AgentNamespace, "agent-namespace", kube.DefaultAgentNamespace, "`NAMESPACE` of the gputriage agent pods on Kubernetes nodes (contrib/k8s/agent.yaml)")
}

// addSessionFlags registers the flags that say how each session is opened and what it runs.
func (o *reachFlags) addSessionFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&o.connectTimeout, "connect-timeout", 10*time.Second, "TCP connect `DURATION` per host (ConnectTimeout in ssh config wins)")
	fs.BoolVar(&o.acceptNew, "accept-new", false, "trust and record unknown host keys (like StrictHostKeyChecking accept-new); a changed key is always refused")
	fs.BoolVar(&o.askPassphrase, "ask-passphrase", false, "prompt for the passphrase of encrypted identity files the agent does not hold (terminal only)")
	fs.BoolVar(&o.sudo, "sudo", false, "run the probe under sudo -n to see other users' processes; falls back to unprivileged when sudo wants a password")
}

// fanoutFlags say how many hosts a sweep probes at once, and whether it traces each
// connection.
type fanoutFlags struct {
	fanout int
	debug  bool // --debug-ssh
}

func (o *fanoutFlags) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.fanout, "fanout", sshexec.DefaultFanout, "`N` hosts probed at once (pdsh's -f; here -f is a hosts file)")
	fs.BoolVar(&o.debug, "debug-ssh", false, "print on stderr how each host is reached and how its connection ended, with its stderr")
}

// sshOptions are the SSH flags of a command that sweeps many hosts: how each is reached, and
// how many at once.
type sshOptions struct {
	reachFlags
	fanoutFlags
}

// addFlags lists the sweep's flags between ssh_config's and the session's, as --help always
// has.
func (o *sshOptions) addFlags(fs *pflag.FlagSet) {
	o.addConfigFlags(fs)
	o.fanoutFlags.addFlags(fs)
	o.addSessionFlags(fs)
}

// The flags that are one field.

func addTimeout(fs *pflag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, "timeout", 60*time.Second, "the `DURATION` each host gets, every phase included")
}

func addVerbose(fs *pflag.FlagSet, p *bool) {
	fs.BoolVarP(p, "verbose", "v", false, "show each finding's explanation and all its evidence (not only its reasons and numbers), informational findings in full, and every host of a fleet")
}

func addQuiet(fs *pflag.FlagSet, p *int) {
	fs.CountVarP(p, "quiet", "q", "one line per host with problems instead of the report, for scripts; -qq: nothing, the exit status only")
}

func addShowSecrets(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "show-secrets", false, "show credentials in command lines and URLs (--api-key VALUE, HF_TOKEN=..., user:password@) instead of *** (not with --redact)")
}

func addVersion(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "version", false, "print the version and exit")
}

func addHelp(fs *pflag.FlagSet, p *bool) {
	fs.BoolVarP(p, "help", "h", false, "show this help and exit")
}
