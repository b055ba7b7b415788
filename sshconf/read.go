package sshconf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// systemConfig is OpenSSH's system-wide client config, read after the
// user's when no -F is given.
var systemConfig = "/etc/ssh/ssh_config"

const (
	maxIncludeDepth = 16      // READCONF_MAX_DEPTH in OpenSSH
	maxIncludeReads = 256     // files one pass may read: a file that includes itself twice would double each level
	maxConfigBytes  = 4 << 20 // a config file is a few KiB; refuse to slurp a device
)

// fileSystem is what reading a config needs; tests and the fuzzer swap it
// for one held in memory.
type fileSystem interface {
	ReadFile(name string) ([]byte, error)
	Glob(pattern string) ([]string, error)
	Exists(name string) bool
}

type osFS struct{}

func (osFS) ReadFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("larger than %d bytes", maxConfigBytes)
	}
	return b, nil
}

func (osFS) Glob(pattern string) ([]string, error) { return filepath.Glob(pattern) }

func (osFS) Exists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// setting is one value under ssh's rule that the first one obtained wins.
type setting[T any] struct {
	v     T
	ok    bool
	where string // file:line it came from, for messages
}

func (s *setting[T]) set(v T, where string) {
	if !s.ok {
		s.v, s.ok, s.where = v, true, where
	}
}

type identity struct{ path, where string }

// conf gathers the settings for one host while its config files are read.
type conf struct {
	hostName         setting[string]
	user             setting[string]
	port             setting[int]
	identities       []identity
	identitiesOnly   setting[bool]
	jump             setting[string]
	proxyCommand     setting[string]
	userKnownHosts   setting[[]string]
	globalKnownHosts setting[[]string]
	strict           setting[string]
	hostKeyAlias     setting[string]
	connectTimeout   setting[time.Duration]
	fdpass           setting[bool]
	ignoreUnknown    setting[string]

	notes     []Note
	wantFinal bool
}

func (c *conf) note(keyword, where, text string) {
	n := Note{Keyword: keyword, Where: where, Text: text}
	for _, o := range c.notes {
		if o == n {
			return
		}
	}
	c.notes = append(c.notes, n)
}

func (c *conf) addIdentity(path, where string) {
	for _, id := range c.identities {
		if id.path == path {
			return
		}
	}
	c.identities = append(c.identities, identity{path, where})
}

// reader holds what one pass over the config files matches against.
type reader struct {
	fs    fileSystem
	o     Options
	alias string
	final bool // the second pass ssh makes for `Match final` / `Match canonical`
	c     *conf
	reads int // included files read so far in this pass
}

// readConfig applies the command-line overrides, then the config files, the
// way ssh.c does, including the final pass when a Match asks for one.
func readConfig(alias string, o Options, fsys fileSystem) (*conf, error) {
	if !validHostName(alias) {
		return nil, fmt.Errorf("%w: host %q: hostname contains invalid characters, which ssh refuses", ErrName, alias)
	}
	if o.User != "" && !validRemoteUser(o.User) {
		return nil, fmt.Errorf("%w: user %q: remote username contains invalid characters, which ssh refuses", ErrName, o.User)
	}
	c := &conf{}
	if o.User != "" {
		c.user.set(o.User, "-l")
	}
	if o.Port != 0 {
		if o.Port < 0 || o.Port > 65535 {
			return nil, fmt.Errorf("%w: -p %d: bad port", ErrConfig, o.Port)
		}
		c.port.set(o.Port, "-p")
	}
	for _, id := range o.Identity {
		p := tildeExpand(id, o.Home)
		if !fsys.Exists(p) {
			c.note("IdentityFile "+id, "-i", "not accessible; ssh drops it too")
			continue
		}
		c.addIdentity(p, "-i")
	}
	if o.Jump != "" {
		if o.Jump != "none" {
			if _, err := parseJumpSpec(o.Jump); err != nil {
				return nil, fmt.Errorf("%w: -J %q: %v", ErrJump, o.Jump, err)
			}
		}
		c.jump.set(o.Jump, "-J")
	}
	r := &reader{fs: fsys, o: o, alias: alias, c: c}
	if err := r.commandLine(o.Opts); err != nil {
		return nil, err
	}
	if err := r.readAll(); err != nil {
		return nil, err
	}
	if c.wantFinal {
		// ssh sets the HostName to its expanded, lower-cased form before
		// re-reading the config for the final pass.
		hn := alias
		if c.hostName.ok {
			hn = expandHostName(c.hostName.v, alias)
		}
		c.hostName = setting[string]{v: strings.ToLower(hn), ok: true, where: c.hostName.where}
		r.final = true
		if err := r.readAll(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// commandLine applies -o options as ssh.c does: each is one config line,
// always active, named "-o" and numbered by its place among the -o options.
func (r *reader) commandLine(opts []string) error {
	active := true
	l := cfgLine{r: r, name: "-o", userConf: true}
	for i, opt := range opts {
		l.num = i + 1
		if strings.ContainsAny(opt, "\r\n") {
			return l.errorf("%q: one option per -o", opt)
		}
		tl := tokenize([]byte(opt))[0]
		if tl.skip {
			return l.errorf("empty option %q", opt)
		}
		switch tl.key {
		case "host", "match", "include":
			return l.errorf("%s directive not supported as a command-line option", tl.keyword)
		}
		if err := l.process(&tl, &active); err != nil {
			return err
		}
	}
	return nil
}

func (r *reader) readAll() error {
	r.reads = 0
	switch r.o.ConfigFile {
	case "none":
		return nil
	case "":
		user := filepath.Join(r.o.Home, ".ssh", "config")
		if err := r.readTop(user, true, false); err != nil {
			return err
		}
		return r.readTop(systemConfig, false, false)
	default:
		return r.readTop(r.o.ConfigFile, true, true)
	}
}

// readTop reads a top-level file; only a file named with -F must exist.
func (r *reader) readTop(path string, userConf, mustExist bool) error {
	data, err := r.fs.ReadFile(path)
	if err != nil {
		if !mustExist && errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%w: %s: %w", ErrConfig, display(path, r.o.Home), err)
	}
	active := true
	return r.readData(path, data, userConf, false, 0, &active)
}

// readData processes one file's lines. Like read_config_file_depth it
// starts active unless it was included from an inactive block.
func (r *reader) readData(path string, data []byte, userConf, neverMatch bool, depth int, active *bool) error {
	*active = !neverMatch
	l := cfgLine{r: r, name: display(path, r.o.Home), userConf: userConf, neverMatch: neverMatch, depth: depth}
	lines := r.lines(path, data)
	for i := range lines {
		l.num = i + 1
		if err := l.process(&lines[i], active); err != nil {
			return err
		}
	}
	return nil
}

// lines is a file's text split into tokLines: once per file for a Config, which keeps them,
// or afresh.
func (r *reader) lines(path string, data []byte) []tokLine {
	if c, ok := r.fs.(*cachedFS); ok {
		return c.lines(path, data)
	}
	return tokenize(data)
}

// tokLine is one config line split into its keyword and arguments: the part of reading a line
// that does not depend on the host being resolved.
type tokLine struct {
	keyword, key, rest string
	args               []string // shared by every host: never modified
	err                error    // why the arguments could not be split
	skip               bool     // blank, or a comment
}

func tokenize(data []byte) []tokLine {
	text := strings.Split(string(data), "\n")
	out := make([]tokLine, len(text))
	for i, line := range text {
		keyword, rest, ok := splitKeyword(strings.TrimRight(line, " \t\r\f\n"))
		if !ok {
			out[i].skip = true
			continue
		}
		out[i] = tokLine{keyword: keyword, key: strings.ToLower(keyword), rest: rest}
		if rest != "" {
			out[i].args, out[i].err = splitArgs(rest)
		}
	}
	return out
}

// cfgLine is the context of one config line.
type cfgLine struct {
	r          *reader
	name       string
	num        int
	userConf   bool
	neverMatch bool
	depth      int
}

func (l *cfgLine) where() string { return fmt.Sprintf("%s:%d", l.name, l.num) }

func (l *cfgLine) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s line %d: %s", ErrConfig, l.name, l.num, fmt.Sprintf(format, args...))
}

func (l *cfgLine) process(tl *tokLine, active *bool) error {
	if tl.skip {
		return nil
	}
	keyword, key, rest, args := tl.keyword, tl.key, tl.rest, tl.args
	if rest == "" {
		return l.errorf("no argument after keyword %q", keyword)
	}
	if tl.err != nil {
		return l.errorf("%s: %v", keyword, tl.err)
	}
	switch key {
	case "host":
		return l.host(args, active)
	case "match":
		return l.match(keyword, args, active)
	case "include":
		return l.include(args, active)
	}
	if len(args) == 0 {
		return l.errorf("no argument after keyword %q", keyword)
	}
	on, c := *active, l.r.c
	switch {
	case singleValued[key]:
		if len(args) > 1 {
			return l.errorf("%s: garbage at end of line %q", keyword, strings.Join(args[1:], " "))
		}
		return l.single(key, keyword, args[0], on)
	case key == "proxyjump" || key == "proxycommand" || key == "proxyusefdpass":
		return l.proxy(key, keyword, rest, args, on)
	case !on:
	case key == "userknownhostsfile":
		c.userKnownHosts.set(args, l.where())
	case key == "globalknownhostsfile":
		c.globalKnownHosts.set(args, l.where())
	default:
		l.other(keyword, key, args)
	}
	return nil
}

// singleValued are the keywords read here that take exactly one argument.
var singleValued = map[string]bool{"hostname": true, "user": true, "port": true, "identityfile": true,
	"identitiesonly": true, "ignoreunknown": true, "stricthostkeychecking": true, "hostkeyalias": true,
	"connecttimeout": true}

// single checks and, when on, sets the one value v of a singleValued keyword. The line's
// file:line is formatted only then: most lines of a long config belong to other hosts, and
// formatting it for each was most of the cost of resolving a host.
func (l *cfgLine) single(key, keyword, v string, on bool) error {
	c, at := l.r.c, ""
	if on {
		at = l.where()
	}
	switch key {
	case "port":
		p, err := strconv.Atoi(v)
		if err != nil || p <= 0 || p > 65535 {
			return l.errorf("bad port %q", v)
		}
		if on {
			c.port.set(p, at)
		}
		return nil
	case "identitiesonly":
		b, ok := parseFlag(v)
		if !ok {
			return l.errorf("%s: unsupported option %q", keyword, v)
		}
		if on {
			c.identitiesOnly.set(b, at)
		}
		return nil
	case "stricthostkeychecking":
		s, ok := strictValue(v)
		if !ok {
			return l.errorf("%s: unsupported option %q", keyword, v)
		}
		if on {
			c.strict.set(s, at)
		}
		return nil
	case "connecttimeout":
		d, ok := parseTime(v)
		if !ok {
			return l.errorf("%s: invalid time value %q", keyword, v)
		}
		if on {
			c.connectTimeout.set(d, at)
		}
		return nil
	}
	if on {
		l.setString(key, v, at)
	}
	return nil
}

// setString sets a keyword whose value is any string.
func (l *cfgLine) setString(key, v, at string) {
	c := l.r.c
	switch key {
	case "hostname":
		c.hostName.set(v, at)
	case "user":
		c.user.set(v, at)
	case "identityfile":
		c.addIdentity(v, at)
	case "ignoreunknown":
		c.ignoreUnknown.set(v, at)
	case "hostkeyalias":
		c.hostKeyAlias.set(v, at)
	}
}

// strictValue reads StrictHostKeyChecking as ssh does: yes/true, no/false/off, ask, accept-new.
func strictValue(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return "yes", true
	case "no", "false", "off":
		return "no", true
	case "ask":
		return "ask", true
	case "accept-new":
		return "accept-new", true
	}
	return "", false
}

// proxy handles the lines that choose how a host is reached through another:
// ProxyJump and ProxyCommand, which compete (the first one set wins), and
// ProxyUseFdpass.
func (l *cfgLine) proxy(key, keyword, rest string, args []string, on bool) error {
	c := l.r.c
	switch key {
	case "proxyjump":
		// ssh takes the rest of the line as written, minus a comment.
		spec := rest
		if i := strings.IndexByte(spec, '#'); i >= 0 {
			spec = spec[:i]
		}
		spec = strings.TrimSpace(spec)
		if !strings.EqualFold(spec, "none") {
			if _, err := parseJumpSpec(spec); err != nil {
				return l.errorf("invalid ProxyJump %q: %v", spec, err)
			}
		} else {
			spec = "none"
		}
		if on && !c.proxyCommand.ok {
			c.jump.set(spec, l.where())
		}
	case "proxycommand":
		// ssh keeps the rest of the line as written, comment and all; "none"
		// in any case means none. A ProxyJump set before wins, except
		// "ProxyJump none", which leaves room for a ProxyCommand.
		if on && !c.proxyCommand.ok && (!c.jump.ok || c.jump.v == "none") {
			c.proxyCommand.set(strings.TrimLeft(rest, " \t="), l.where())
		}
	case "proxyusefdpass":
		if len(args) > 1 {
			return l.errorf("%s: garbage at end of line %q", keyword, strings.Join(args[1:], " "))
		}
		b, ok := parseFlag(args[0])
		if !ok {
			return l.errorf("%s: unsupported option %q", keyword, args[0])
		}
		if on {
			c.fdpass.set(b, l.where())
		}
	}
	return nil
}

// other notes the keywords gputriage does not act on that change how ssh
// would reach the host or prove who it is. Keywords that do not matter to a
// non-interactive command (SendEnv, ControlMaster, ForwardAgent, forwards,
// keepalives, ciphers, ...) pass without a word.
func (l *cfgLine) other(keyword, key string, args []string) {
	c, w := l.r.c, l.where()
	v := strings.ToLower(args[0])
	switch key {
	case "certificatefile", "pkcs11provider", "securitykeyprovider":
		c.note(keyword, w, "not supported by gputriage; keys are offered without it")
	case "knownhostscommand", "revokedhostkeys":
		c.note(keyword, w, "not supported by gputriage; host keys are checked against the known_hosts files alone")
	case "bindaddress", "bindinterface":
		c.note(keyword, w, "not supported by gputriage; the system picks the source address")
	case "identityagent":
		if v != "ssh_auth_sock" {
			c.note(keyword, w, "not supported by gputriage; it uses the agent at SSH_AUTH_SOCK")
		}
	case "canonicalizehostname":
		if v == "yes" || v == "always" || v == "true" {
			c.note(keyword, w, "not supported by gputriage; the HostName is used as written")
		}
	default:
		if !knownKeywords[key] && !harmlessKeywords[key] && !c.ignoredUnknown(key) {
			c.note(keyword, w, "not an ssh_config keyword gputriage knows; ignored (OpenSSH refuses a file with a keyword it does not know, unless IgnoreUnknown names it)")
		}
	}
}

// ignoredUnknown reports whether an IgnoreUnknown set before this line
// names key, as ssh checks it.
func (c *conf) ignoredUnknown(key string) bool {
	return c.ignoreUnknown.ok && matchList(key, c.ignoreUnknown.v, true) == 1
}

// host handles a Host line: it matches when any pattern matches the alias
// as typed (case-sensitively, as ssh does) and no negated one does.
func (l *cfgLine) host(args []string, active *bool) error {
	if len(args) == 0 {
		return l.errorf("Host: missing pattern")
	}
	*active = false
	if l.neverMatch {
		return nil
	}
	for _, a := range args {
		neg := strings.HasPrefix(a, "!")
		if neg {
			a = a[1:]
		}
		if matchPattern(l.r.alias, a) {
			if neg {
				*active = false
				return nil
			}
			*active = true
		}
	}
	return nil
}

// include reads the files an Include names, in glob order. A relative
// path is under ~/.ssh for user configs and /etc/ssh for the system one.
// An included file cannot change the includer's active state.
func (l *cfgLine) include(args []string, active *bool) error {
	if len(args) == 0 {
		return l.errorf("Include: missing argument")
	}
	if l.depth+1 > maxIncludeDepth {
		return l.errorf("Include nested more than %d deep", maxIncludeDepth)
	}
	r := l.r
	outer := *active
	for _, a := range args {
		p := tildeExpand(a, l.r.o.Home)
		if !filepath.IsAbs(p) && !strings.HasPrefix(p, "/") {
			if l.userConf {
				p = filepath.Join(l.r.o.Home, ".ssh", p)
			} else {
				p = filepath.Join("/etc/ssh", p)
			}
		}
		matches, err := l.r.fs.Glob(p)
		if err != nil {
			return l.errorf("Include %q: %v", a, err)
		}
		for _, m := range matches {
			if r.reads++; r.reads > maxIncludeReads {
				return l.errorf("Include: more than %d files included", maxIncludeReads)
			}
			data, err := l.r.fs.ReadFile(m)
			if err != nil {
				return l.errorf("Include %q: %v", m, err)
			}
			if err := l.r.readData(m, data, l.userConf, l.neverMatch || !outer, l.depth+1, active); err != nil {
				return err
			}
			*active = outer
		}
	}
	return nil
}

// match handles a Match line the way match_cfg_line does. Criteria that
// need something gputriage will not do (exec runs a command) or does not
// know count as not matching, and the host is told.
func (l *cfgLine) match(keyword string, args []string, active *bool) error {
	if len(args) == 0 {
		return l.errorf("Match: missing criteria")
	}
	r, c := l.r, l.r.c
	hostName := r.alias
	if c.hostName.ok {
		hostName = expandHostName(c.hostName.v, r.alias)
	}
	remoteUser := r.o.LocalUser
	if c.user.ok {
		remoteUser = c.user.v
	}
	result := true
	var unsupported []string
	for i := 0; i < len(args); i++ {
		attr := args[i]
		neg := strings.HasPrefix(attr, "!")
		if neg {
			attr = attr[1:]
		}
		la := strings.ToLower(attr)
		var ok bool
		switch la {
		case "all":
			if len(args) > 1 && !(len(args) == 2 && isFinalish(args)) {
				return l.errorf("Match: 'all' cannot be combined with other criteria")
			}
			ok = true
		case "canonical", "final":
			if la == "final" {
				c.wantFinal = true
			}
			ok = r.final
		default:
			if i+1 >= len(args) {
				return l.errorf("Match: missing argument for %q", attr)
			}
			i++
			arg := args[i]
			switch la {
			case "host":
				ok = matchList(strings.ToLower(hostName), arg, true) == 1
			case "originalhost":
				ok = matchList(strings.ToLower(r.alias), arg, true) == 1
			case "user":
				ok = matchList(remoteUser, arg, false) == 1
			case "localuser":
				ok = matchList(r.o.LocalUser, arg, false) == 1
			case "exec", "localnetwork", "tagged":
				unsupported = append(unsupported, attr)
				ok = neg // counts as not matching whatever the negation
			default:
				return l.errorf("Match: unsupported criterion %q", attr)
			}
		}
		if ok == neg {
			result = false
		}
	}
	if len(unsupported) > 0 {
		result = false
		if !l.neverMatch {
			c.note("Match "+strings.Join(unsupported, ", "), l.where(), "not evaluated by gputriage; its block is treated as not matching")
		}
	}
	*active = result && !l.neverMatch
	return nil
}

func isFinalish(args []string) bool {
	for _, a := range args {
		switch strings.ToLower(strings.TrimPrefix(a, "!")) {
		case "canonical", "final":
			return true
		}
	}
	return false
}

// splitKeyword splits a line into its keyword and the rest, accepting
// "Key value", "Key=value" and "Key = value" like ssh's strdelim.
func splitKeyword(s string) (keyword, rest string, ok bool) {
	s = strings.TrimLeft(s, " \t")
	if s == "" || s[0] == '#' {
		return "", "", false
	}
	i := strings.IndexAny(s, " \t=")
	if i < 0 {
		return s, "", true
	}
	keyword, rest = s[:i], s[i:]
	rest = strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(rest, "=") {
		rest = strings.TrimLeft(rest[1:], " \t")
	}
	return keyword, rest, true
}

// splitArgs splits the rest of a line like OpenSSH's argv_split: blanks
// separate arguments, single or double quotes group them, a backslash
// escapes a quote, a backslash or (outside quotes) a blank, and an
// unquoted # starting an argument ends the line.
func splitArgs(s string) ([]string, error) {
	var args []string
	i := 0
	for i < len(s) {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		if s[i] == '#' {
			break
		}
		var b strings.Builder
		var quote byte
		for ; i < len(s); i++ {
			ch := s[i]
			switch {
			case ch == '\\' && i+1 < len(s) && (s[i+1] == '\'' || s[i+1] == '"' || s[i+1] == '\\' || (quote == 0 && s[i+1] == ' ')):
				i++
				b.WriteByte(s[i])
			case quote == 0 && (ch == ' ' || ch == '\t'):
				goto done
			case quote == 0 && (ch == '"' || ch == '\''):
				quote = ch
			case quote != 0 && ch == quote:
				quote = 0
			default:
				b.WriteByte(ch)
			}
		}
		if quote != 0 {
			return nil, errors.New("unterminated quote")
		}
	done:
		args = append(args, b.String())
	}
	return args, nil
}

func parseFlag(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "yes", "true":
		return true, true
	case "no", "false":
		return false, true
	}
	return false, false
}

// parseTime reads ssh's time format: a number of seconds, or numbers each
// followed by s, m, h, d or w ("1h30m").
func parseTime(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var total, n int64
	digits := false
	for i := 0; i < len(v); i++ {
		ch := v[i]
		if ch >= '0' && ch <= '9' {
			n = n*10 + int64(ch-'0')
			if n > 1<<31 {
				return 0, false
			}
			digits = true
			continue
		}
		if !digits {
			return 0, false
		}
		var mul int64
		switch ch {
		case 's', 'S':
			mul = 1
		case 'm', 'M':
			mul = 60
		case 'h', 'H':
			mul = 3600
		case 'd', 'D':
			mul = 86400
		case 'w', 'W':
			mul = 604800
		default:
			return 0, false
		}
		total += n * mul
		n, digits = 0, false
		if total > 1<<31 {
			return 0, false
		}
	}
	total += n
	return time.Duration(total) * time.Second, true
}
