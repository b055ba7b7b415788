package triage

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/readiness"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/sshexec"
)

// Config is what one run of the pipeline needs: how hosts are reached, what each host gets,
// what is kept of it once diagnosed, and the process's streams. The command line maps its
// flags onto it; the zero value of a field is ssh's default.
type Config struct {
	// How hosts are reached, as ssh's own options would (see sshconf.Options).
	SSHConfig      string   // ssh -F; "" is ~/.ssh/config, then /etc/ssh/ssh_config
	User           string   // ssh -l
	Port           int      // ssh -p
	Identity       []string // ssh -i
	Jump           string   // ssh -J
	Options        []string // ssh -o Key=Value
	ConnectTimeout time.Duration
	AcceptNew      bool // trust and record unknown host keys
	AskPassphrase  bool // prompt on Stdin (a terminal) for encrypted identity files
	Fanout         int  // hosts probed at once
	Debug          bool // say on Stderr how each host is reached and how its connection ended

	Sudo    bool          // run the probe under sudo -n, falling back to unprivileged
	Timeout time.Duration // what each host gets, every phase included
	Save    string        // also keep each host's raw capture in this directory, for Replay

	// Scheduler is what Slurm says of each host, by label: it goes with the host's report.
	Scheduler map[string]*report.Scheduler
	// Job, when set, is the --tp job each host is answered for while its whole snapshot is at
	// hand; Keep is how many bytes of each raw capture the report keeps.
	Job  *readiness.Job
	Keep int
	// Each, when set, is given each host as it arrives, diagnosed, with its whole snapshot,
	// before what no report reads is dropped; it is called concurrently.
	Each func(h *report.Host)
	// Progress, when set, is told how the sweep stands as hosts start and end.
	Progress func(sshexec.Progress)

	// Kube is how Kubernetes nodes (targets k8s/NODE, k8s/) are reached: kubectl's kubeconfig
	// and context, the node selector, the agent's namespace. The cluster is opened at the
	// first such target Resolve meets.
	Kube kube.Config
	kube *kube.Cluster

	// The process: its environment, the terminal a passphrase prompt reads, and where notes go.
	Getenv func(string) string
	Stdin  io.Reader
	Stderr io.Writer
}

// UsageError is a Config, or a host named in it, that cannot run: the command line's fault.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// Host is one host as the user named it and as ssh_config resolves it, or a Kubernetes node.
type Host struct {
	Label string // as typed: the report's host name and the capture's file name
	Conf  sshconf.Host
	Node  string // a Kubernetes node (k8s/NODE), reached through its agent; "" over SSH
	kube  *kube.Cluster
}

// Resolve resolves each target against one reading of the ssh_config files; k8s/NODE is that
// node, and k8s/ the nodes Kube.Selector picks (with none, every GPU node), each once.
func (c *Config) Resolve(ts []hostlist.Target) ([]Host, error) {
	home, _ := os.UserHomeDir()
	local := c.Getenv("USER")
	if u, err := user.Current(); err == nil {
		local = u.Username
	}
	lhost, _ := os.Hostname()
	conf := sshconf.NewConfig() // every host resolved against one reading of the files
	out := make([]Host, 0, len(ts))
	seen := map[string]bool{}
	for _, t := range c.withSelector(ts) {
		if node, ok := kube.Node(t.Host); ok {
			hs, err := c.resolveNodes(t, node)
			if err != nil {
				return nil, err
			}
			for _, h := range hs {
				if !seen[h.Label] {
					seen[h.Label] = true
					out = append(out, h)
				}
			}
			continue
		}
		so := sshconf.Options{ConfigFile: c.SSHConfig, Home: home, LocalUser: local, LocalHost: lhost,
			User: c.User, Port: c.Port, Identity: c.Identity, Jump: c.Jump, Opts: c.Options, Getenv: c.Getenv}
		if t.User != "" {
			so.User = t.User
		}
		if t.Port != 0 {
			so.Port = t.Port
		}
		h, err := conf.Resolve(t.Host, so)
		if err != nil {
			return nil, usagef("%s: %v", t, err)
		}
		out = append(out, Host{Label: t.String(), Conf: h})
	}
	return out, nil
}

// ResolveOne resolves one host named as the operator named it ("user@gpu01:2222").
func (c *Config) ResolveOne(label string) (Host, error) {
	ts, err := hostlist.Expand(label)
	if err != nil || len(ts) != 1 {
		return Host{}, fmt.Errorf("host %q: not one host", label)
	}
	hs, err := c.Resolve(ts)
	if err != nil {
		return Host{}, err
	}
	return hs[0], nil
}

func (c *Config) target(r Host) sshexec.Target {
	if r.Node != "" {
		return c.kubeTarget(r, probeCommand(c.Sudo), true)
	}
	var conv func(h sshconf.Host, name string) sshexec.Target
	conv = func(h sshconf.Host, name string) sshexec.Target {
		t := sshexec.Target{Name: name, HostName: h.HostName, Port: h.Port, User: h.User,
			IdentityFiles: h.IdentityFiles, IdentitiesOnly: h.IdentitiesOnly,
			KnownHostsFiles: h.UserKnownHostsFiles, GlobalKnownHostsFiles: h.GlobalKnownHostsFiles, HostKeyAlias: h.HostKeyAlias,
			ConnectTimeout: h.ConnectTimeout, ProxyCommand: h.ProxyCommandLine, ProxyUseFdpass: h.ProxyUseFdpass,
			// "no" and "ask" are not honored: a sweep never skips the check and never prompts.
			AcceptNew: c.AcceptNew || h.StrictHostKeyChecking == "accept-new"}
		for _, hop := range h.ProxyJump {
			t.Jump = append(t.Jump, conv(hop, hop.Alias))
		}
		return t
	}
	return conv(r.Conf, r.Label)
}

// sessions are the options every SSH session of a run shares, whatever it runs: deadlines,
// host key policy, the user's shell for ProxyCommand, the agent and the passphrase prompt.
// closeAgent ends the agent connection once the sessions are done.
func (c *Config) sessions(timeout time.Duration) (sopt sshexec.Options, closeAgent func(), err error) {
	sopt = sshexec.Options{
		Timeout:        timeout,
		ConnectTimeout: c.ConnectTimeout,
		AcceptNew:      c.AcceptNew,
		Shell:          c.Getenv("SHELL"), // a ProxyCommand runs in the user's shell, as ssh runs it
	}
	if c.AskPassphrase {
		in, ok := c.Stdin.(*os.File)
		if !ok || !term.IsTerminal(int(in.Fd())) {
			return sshexec.Options{}, func() {}, usagef("--ask-passphrase needs a terminal on standard input")
		}
		var mu sync.Mutex
		sopt.Passphrase = func(file string) ([]byte, error) {
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(c.Stderr, "Enter passphrase for key '%s': ", file)
			b, err := term.ReadPassword(int(in.Fd()))
			fmt.Fprintln(c.Stderr)
			return b, err
		}
	}
	ag, closer, err := sshexec.AgentFromEnv(c.Getenv)
	if err != nil {
		fmt.Fprintf(c.Stderr, "gputriage: ssh-agent: %v (continuing with identity files)\n", err)
	}
	if ag != nil {
		sopt.Agent = ag
	}
	closeAgent = func() {}
	if closer != nil {
		closeAgent = func() { closer.Close() }
	}
	return sopt, closeAgent, nil
}

// probeOptions are the sshexec options of a sweep and of a pool: sessions' with the probe and
// its bounds, under this run's nonce.
func (c *Config) probeOptions(timeout time.Duration) (sopt sshexec.Options, nonce string, closeAgent func(), err error) {
	sopt, closeAgent, err = c.sessions(timeout)
	if err != nil {
		return sopt, "", closeAgent, err
	}
	nonce = NewNonce()
	sopt.Command = probeCommand(c.Sudo)
	sopt.Stdin = probeInput(nonce, timeout)
	sopt.MaxOutput = MaxCaptureBytes
	sopt.Head = headCheck(nonce)
	return sopt, nonce, closeAgent, nil
}

// debug is --debug-ssh's writer, nil without it.
func (c *Config) debug() *sshDebug {
	if !c.Debug {
		return nil
	}
	return &sshDebug{w: c.Stderr}
}

// Exec runs command on h with stdin over one SSH session, h reached as the probe reaches it
// (ssh_config, known_hosts, agent), reading at most maxOut bytes of its output, within
// timeout: fix's apply script, Slurm's queries on a login node. With Debug it says how h is
// reached and how the session ended.
func (c *Config) Exec(ctx context.Context, h Host, command string, stdin []byte, maxOut int, timeout time.Duration) (sshexec.Result, error) {
	sopt, closeAgent, err := c.sessions(timeout)
	if err != nil {
		return sshexec.Result{}, err
	}
	defer closeAgent()
	sopt.Command, sopt.Stdin, sopt.MaxOutput, sopt.Fanout = command, stdin, maxOut, 1
	t := c.target(h)
	if h.Node != "" {
		t = c.kubeTarget(h, command, false)
	}
	debug := c.debug()
	debug.route(h.Label, t, sopt.Agent != nil, sopt)
	r := sshexec.Run(ctx, []sshexec.Target{t}, sopt)[0]
	debug.result(h.Label, &r)
	return r, nil
}

// ProbeCommand is the remote command line of the probe, and of anything else that is to run
// as the probe does (under --sudo: root where sudo -n lets it, else the login user).
func (c *Config) ProbeCommand() string { return probeCommand(c.Sudo) }
