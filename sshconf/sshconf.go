// Package sshconf resolves a host, as the user typed it, into the settings
// OpenSSH's `ssh -G` would use for it: it reads ssh_config files (Host and
// Match blocks, Include, first value wins) and expands ~, %tokens and ${VAR}
// where ssh does. It also says which config lines for a host gputriage does
// not act on, so nothing is silently dropped. HostNames lists the host names
// a shell completes from (ssh_config Host names and known_hosts names), for
// `gputriage __complete-hosts`.
//
// The parser follows OpenSSH 9's readconf.c rather than
// github.com/kevinburke/ssh_config: that library resolves Include against
// the process owner's real home, turns `Match exec` into a whole-file parse
// error, gives `?` the meaning "zero or one character", matches `Match host`
// against the alias instead of the HostName, and does not expose which
// included file a line came from.
package sshconf

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

var (
	// ErrConfig is wrapped by every error caused by the content of a config
	// file; the message names the file and line.
	ErrConfig = errors.New("bad ssh config")
	// ErrJump is wrapped when a ProxyJump chain cannot be built: a loop,
	// too many hops, or a bad hop on the command line.
	ErrJump = errors.New("bad proxy jump")
	// ErrName is wrapped when a host or user name given on the command line
	// (or as a jump hop) holds characters ssh refuses: shell syntax that a
	// ProxyCommand's %h, %n or %r would carry into a shell.
	ErrName = errors.New("invalid name")
)

// Options says where the config comes from and carries the command-line
// overrides; like ssh's -l, -p, -i, -J and -o they win over any config file.
type Options struct {
	// ConfigFile is ssh's -F: "" reads ~/.ssh/config then the system file
	// (/etc/ssh/ssh_config), "none" reads no file at all.
	ConfigFile string
	// Home is the user's home directory, for ~, %d and relative Include.
	Home string
	// LocalUser is the local login name: %u, and the default User.
	LocalUser string
	// LocalHost is the local host name: %l, and %L up to its first dot.
	LocalHost string

	User     string   // -l
	Port     int      // -p; 0 means not given
	Identity []string // -i, in order; files that do not exist are dropped, as ssh does
	Jump     string   // -J, "[user@]host[:port][,...]" or "none"
	// Opts are -o options, in order, each one config line ("Key=Value" or
	// "Key Value"). Like ssh, they are read before any config file (after
	// -l, -p, -i and -J), so the first value given wins; Host, Match and
	// Include are refused. They apply to the target only, not to its jump
	// hops, which ssh reaches with a command line of their own.
	Opts []string

	// Getenv resolves ${VAR} in IdentityFile and UserKnownHostsFile; nil
	// means no variable is set.
	Getenv func(string) string
}

// Host is what ssh would use to reach one host.
type Host struct {
	Alias    string // as typed; what Host patterns were matched against
	HostName string // after HostName and %h, lower-cased as ssh does
	Port     int
	User     string
	// IdentityFiles are expanded paths in the order ssh tries them; ssh's
	// default list when none is configured. `IdentityFile none` entries are
	// dropped.
	IdentityFiles  []string
	IdentitiesOnly bool
	// ProxyJump is the chain of hops in connection order, each resolved
	// with its own config the way ssh invokes it (`ssh -l U -p P -W ...
	// hop`); the first hop's own ProxyJump, if any, comes before it.
	// Empty for a direct connection.
	ProxyJump []Host
	// ProxyJumpSpec is the ProxyJump in effect as `ssh -G` prints it; ""
	// for none.
	ProxyJumpSpec string
	// UserKnownHostsFiles are expanded; GlobalKnownHostsFiles are taken as
	// written, as ssh does. `none` gives an empty list.
	UserKnownHostsFiles   []string
	GlobalKnownHostsFiles []string
	HostKeyAlias          string
	// StrictHostKeyChecking is "yes", "no", "ask" or "accept-new".
	StrictHostKeyChecking string
	ConnectTimeout        time.Duration // 0 means none
	// ProxyCommand is the ProxyCommand in effect as `ssh -G` prints it (the
	// rest of its line as written); "" for none. ProxyCommandLine is the
	// command ssh would run for it: %h, %k, %n, %p, %r and %% expanded.
	// A host has a ProxyCommand or a ProxyJump, never both: the first one
	// set wins, as in ssh.
	ProxyCommand, ProxyCommandLine string
	// ProxyUseFdpass: the ProxyCommand hands back a connected socket
	// rather than speak SSH on its output (only set with a ProxyCommand).
	ProxyUseFdpass bool
	// Notes lists, once each, the config lines for this host that change
	// how ssh would reach it and that gputriage does not act on. Lines that
	// do not matter to a non-interactive command (SendEnv, ControlMaster,
	// ForwardAgent, UseKeychain, ...) are not listed.
	Notes []Note
}

// Note is one config line gputriage does not act on, and what that means.
type Note struct {
	Keyword string // as written, or "Match exec" and the like
	Where   string // file:line, or the command-line option
	Text    string // what gputriage does instead
}

func (n Note) String() string { return fmt.Sprintf("%s (%s): %s", n.Keyword, n.Where, n.Text) }

// KnownHostsFiles returns the user's files then the global ones, the order
// ssh consults them in.
func (h Host) KnownHostsFiles() []string {
	out := make([]string, 0, len(h.UserKnownHostsFiles)+len(h.GlobalKnownHostsFiles))
	out = append(out, h.UserKnownHostsFiles...)
	return append(out, h.GlobalKnownHostsFiles...)
}

// maxJumpDepth bounds how many hops a chain may gather through first hops'
// own ProxyJump settings; ssh itself would recurse until it ran out of
// processes.
const maxJumpDepth = 16

// Resolve returns the settings ssh would use for alias. Errors wrap
// ErrConfig (naming file and line) or ErrJump. It reads the config files
// afresh; to resolve many hosts, use a Config.
func Resolve(alias string, o Options) (Host, error) {
	return resolve(alias, o, osFS{})
}

// Config resolves many hosts against one reading of the config files: each
// file, Include glob and identity file check is read from the disk once,
// the first time a host needs it, and each file is split into lines and
// arguments once. A sweep resolves every host against the same text, even
// if a file changes meanwhile. It is safe for concurrent use.
type Config struct {
	fs *cachedFS
}

// NewConfig returns a Config that has read nothing yet.
func NewConfig() *Config {
	return &Config{fs: newCachedFS(osFS{})}
}

// Resolve is the package's Resolve, reading through c.
func (c *Config) Resolve(alias string, o Options) (Host, error) {
	return resolve(alias, o, c.fs)
}

func resolve(alias string, o Options, fsys fileSystem) (Host, error) {
	return resolveChain(alias, o, fsys, nil)
}

// resolveChain resolves alias and, through the first hop's own ProxyJump,
// its whole chain; seen holds the hops already being resolved, to stop loops.
func resolveChain(alias string, o Options, fsys fileSystem, seen []string) (Host, error) {
	c, err := readConfig(alias, o, fsys)
	if err != nil {
		return Host{}, err
	}
	h, err := c.host(alias, o)
	if err != nil {
		return Host{}, err
	}
	if h.ProxyJumpSpec == "" {
		return h, nil
	}
	hops, err := parseJumpSpec(h.ProxyJumpSpec)
	if err != nil {
		return Host{}, fmt.Errorf("%w: %s: %v", ErrJump, alias, err)
	}
	key := fmt.Sprintf("%s@%s:%d", h.User, h.HostName, h.Port)
	for _, s := range seen {
		if s == key {
			return Host{}, fmt.Errorf("%w: loop through %s (%s)", ErrJump, alias, strings.Join(append(seen, key), " -> "))
		}
	}
	seen = append(seen, key)
	if len(seen) > maxJumpDepth {
		return Host{}, fmt.Errorf("%w: more than %d hops reaching %s", ErrJump, maxJumpDepth, alias)
	}
	base := Options{
		ConfigFile: o.ConfigFile,
		Home:       o.Home,
		LocalUser:  o.LocalUser,
		LocalHost:  o.LocalHost,
		Getenv:     o.Getenv,
	}
	// ssh reaches the target through `ssh -J first,... -W target last`, so
	// every hop but the first is told its jumps on the command line and
	// only the first hop's own ProxyJump is followed.
	for i, hop := range hops {
		ho := base
		ho.User, ho.Port = hop.user, hop.port
		if i > 0 {
			ho.Jump = joinJumpSpec(hops[:i])
		}
		var hh Host
		if i == 0 {
			hh, err = resolveChain(hop.host, ho, fsys, seen)
		} else {
			hh, err = resolveHop(hop.host, ho, fsys)
		}
		if err != nil {
			return Host{}, err
		}
		if i == 0 {
			h.ProxyJump = append(h.ProxyJump, hh.ProxyJump...)
		}
		hh.ProxyJump = nil
		h.ProxyJump = append(h.ProxyJump, hh)
	}
	return h, nil
}

// resolveHop resolves a hop whose own jumps come from the command line and
// so need no chain of their own.
func resolveHop(alias string, o Options, fsys fileSystem) (Host, error) {
	c, err := readConfig(alias, o, fsys)
	if err != nil {
		return Host{}, err
	}
	return c.host(alias, o)
}

// defaultIdentities is what OpenSSH 9.2's `ssh -G` lists when no identity
// is configured; newer releases drop id_dsa.
var defaultIdentities = []string{
	"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
	"~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa",
}

// host turns the gathered settings into a Host, filling ssh's defaults and
// expanding tokens in the order ssh.c does.
func (c *conf) host(alias string, o Options) (Host, error) {
	h := Host{Alias: alias}
	h.HostName = alias
	if c.hostName.ok {
		h.HostName = expandHostName(c.hostName.v, alias)
	}
	h.HostName = strings.ToLower(h.HostName)
	h.Port = 22
	if c.port.ok {
		h.Port = c.port.v
	}
	h.User = o.LocalUser
	if c.user.ok {
		h.User = c.user.v
	}
	h.IdentitiesOnly = c.identitiesOnly.v
	// ssh lower-cases the alias (its known_hosts lookups and %k with it), as it does HostName.
	h.HostKeyAlias = strings.ToLower(c.hostKeyAlias.v)
	h.StrictHostKeyChecking = "ask"
	if c.strict.ok {
		h.StrictHostKeyChecking = c.strict.v
	}
	h.ConnectTimeout = c.connectTimeout.v
	if c.jump.ok && c.jump.v != "none" {
		h.ProxyJumpSpec = jumpSpecAsSSH(c.jump.v)
	}

	t := tokens{
		home:      o.Home,
		localUser: o.LocalUser,
		localHost: o.LocalHost,
		host:      h.HostName,
		alias:     alias,
		user:      h.User,
		port:      strconv.Itoa(h.Port),
		keyAlias:  alias,
		getenv:    o.Getenv,
	}
	if h.HostKeyAlias != "" {
		t.keyAlias = h.HostKeyAlias
	}
	if err := h.setProxyCommand(c, t); err != nil {
		return Host{}, err
	}
	h.Notes = c.notes
	if err := h.setFiles(c, t); err != nil {
		return Host{}, err
	}
	return h, nil
}

// setFiles fills the identity and known_hosts files, with ssh's defaults and tokens expanded
// ("none" names no file).
func (h *Host) setFiles(c *conf, t tokens) error {
	ids := c.identities
	if len(ids) == 0 {
		for _, d := range defaultIdentities {
			ids = append(ids, identity{path: d, where: "default"})
		}
	}
	for _, id := range ids {
		if strings.EqualFold(id.path, "none") {
			continue
		}
		p, err := t.expand(id.path)
		if err != nil {
			return fmt.Errorf("%w: %s: IdentityFile %q: %v", ErrConfig, id.where, id.path, err)
		}
		h.IdentityFiles = append(h.IdentityFiles, p)
	}
	uk := setting[[]string]{v: []string{"~/.ssh/known_hosts", "~/.ssh/known_hosts2"}}
	if c.userKnownHosts.ok {
		uk = c.userKnownHosts
	}
	for _, f := range uk.v {
		if strings.EqualFold(f, "none") {
			continue
		}
		p, err := t.expand(f)
		if err != nil {
			return fmt.Errorf("%w: %s: UserKnownHostsFile %q: %v", ErrConfig, uk.where, f, err)
		}
		h.UserKnownHostsFiles = append(h.UserKnownHostsFiles, p)
	}
	gk := []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	if c.globalKnownHosts.ok {
		gk = c.globalKnownHosts.v
	}
	for _, f := range gk {
		if !strings.EqualFold(f, "none") {
			h.GlobalKnownHostsFiles = append(h.GlobalKnownHostsFiles, f)
		}
	}
	return nil
}

// setProxyCommand fills the ProxyCommand fields from c, expanding its
// tokens as ssh's expand_proxy_command does.
func (h *Host) setProxyCommand(c *conf, t tokens) error {
	pc := c.proxyCommand
	if !pc.ok || strings.EqualFold(pc.v, "none") {
		return nil
	}
	line, err := t.expandProxy(pc.v)
	if err != nil {
		return fmt.Errorf("%w: %s: ProxyCommand %q: %v", ErrConfig, pc.where, pc.v, err)
	}
	h.ProxyCommand, h.ProxyCommandLine, h.ProxyUseFdpass = pc.v, line, c.fdpass.v
	return nil
}

// display shortens a path under home to ~/..., for messages.
func display(path, home string) string {
	if home != "" {
		if rel, err := filepath.Rel(home, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return "~/" + filepath.ToSlash(rel)
		}
	}
	return path
}
