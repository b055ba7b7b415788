package sshconf

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// tildeExpand replaces a leading "~" or "~/" with home. "~user/" is left as
// written: looking up other users' homes is not this package's business.
func tildeExpand(p, home string) string {
	if p == "~" {
		return home
	}
	if strings.HasPrefix(p, "~/") {
		return strings.TrimRight(home, "/") + p[1:]
	}
	return p
}

// expandHostName expands HostName the way ssh.c does: %h is the alias and
// %% a percent sign; anything else stays as written.
func expandHostName(v, alias string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+1 < len(v) {
			switch v[i+1] {
			case 'h':
				b.WriteString(alias)
				i++
				continue
			case '%':
				b.WriteByte('%')
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// tokens holds the values of ssh's client %tokens
// (DEFAULT_CLIENT_PERCENT_EXPAND_ARGS in OpenSSH 9.2).
type tokens struct {
	home, localUser, localHost string
	host, alias, user, port    string
	keyAlias                   string
	getenv                     func(string) string
}

// expand applies ~, then %tokens and ${VAR} in one scan, as ssh does for
// IdentityFile and UserKnownHostsFile. An unknown token or unset variable
// is an error, as it is fatal to ssh.
func (t tokens) expand(s string) (string, error) {
	s = tildeExpand(s, t.home)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '$' && i+1 < len(s) && s[i+1] == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", errors.New("unterminated ${")
			}
			name := s[i+2 : i+2+end]
			val := ""
			if t.getenv != nil {
				val = t.getenv(name)
			}
			if val == "" {
				return "", fmt.Errorf("env var ${%s} has no value", name)
			}
			b.WriteString(val)
			i += 2 + end
		case s[i] == '%':
			if i+1 >= len(s) {
				return "", errors.New("trailing %")
			}
			i++
			v, err := t.token(s[i])
			if err != nil {
				return "", err
			}
			b.WriteString(v)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// expandProxy expands a ProxyCommand as ssh's expand_proxy_command does:
// %h, %k, %n, %p, %r and %% only; ~ and ${VAR} are left to the shell. An
// unknown token is an error, as it is fatal to ssh.
func (t tokens) expandProxy(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 >= len(s) {
			return "", errors.New("trailing %")
		}
		i++
		switch s[i] {
		case 'h', 'k', 'n', 'p', 'r', '%':
			v, _ := t.token(s[i])
			b.WriteString(v)
		default:
			return "", fmt.Errorf("unknown token %%%c", s[i])
		}
	}
	return b.String(), nil
}

// validHostName is OpenSSH's valid_hostname: ssh refuses a host name typed on
// its command line that could smuggle shell syntax into a %h or %n of a
// ProxyCommand.
func validHostName(s string) bool {
	if strings.HasPrefix(s, "-") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte("'`\"$\\;&<>|(){},", s[i]) >= 0 || isSpaceOrCntrl(s[i]) {
			return false
		}
	}
	return true
}

// validRemoteUser is OpenSSH's valid_ruser, for a user given on the command
// line (-l, user@host): no shell syntax, no option-like word after a blank,
// no trailing backslash.
func validRemoteUser(s string) bool {
	if strings.HasPrefix(s, "-") {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] < 0x20 || s[i] == 0x7f, strings.IndexByte("'`\";&<>|(){}", s[i]) >= 0:
			return false
		case (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\v' || s[i] == '\f' || s[i] == '\r') &&
			i+1 < len(s) && s[i+1] == '-':
			return false
		case s[i] == '\\' && i == len(s)-1:
			return false
		}
	}
	return true
}

// isSpaceOrCntrl is C's isspace || iscntrl in the C locale.
func isSpaceOrCntrl(c byte) bool {
	return c < 0x20 || c == ' ' || c == 0x7f
}

func (t tokens) token(c byte) (string, error) {
	switch c {
	case '%':
		return "%", nil
	case 'C':
		sum := sha1.Sum([]byte(t.localHost + t.host + t.port + t.user))
		return hex.EncodeToString(sum[:]), nil
	case 'L':
		short, _, _ := strings.Cut(t.localHost, ".")
		return short, nil
	case 'i':
		return strconv.Itoa(os.Getuid()), nil
	case 'k':
		return t.keyAlias, nil
	case 'l':
		return t.localHost, nil
	case 'n':
		return t.alias, nil
	case 'p':
		return t.port, nil
	case 'd':
		return t.home, nil
	case 'h':
		return t.host, nil
	case 'r':
		return t.user, nil
	case 'u':
		return t.localUser, nil
	}
	return "", fmt.Errorf("unknown token %%%c", c)
}

// matchPattern is OpenSSH's match_pattern: '*' matches any run of
// characters, '?' exactly one, everything else itself, case-sensitively.
// It runs in O(len(s)*len(p)) however many stars the pattern has.
func matchPattern(s, p string) bool {
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchList is OpenSSH's match_pattern_list: 1 when a pattern in the comma
// separated list matches, -1 when a negated one does (which wins), else 0.
func matchList(s, list string, lower bool) int {
	got := 0
	for _, p := range strings.Split(list, ",") {
		neg := strings.HasPrefix(p, "!")
		if neg {
			p = p[1:]
		}
		if lower {
			p = strings.ToLower(p)
		}
		if matchPattern(s, p) {
			if neg {
				return -1
			}
			got = 1
		}
	}
	return got
}

// jumpHop is one hop of a ProxyJump as written.
type jumpHop struct {
	raw  string
	user string
	host string
	port int // 0 when not given
}

// parseJumpSpec splits "[user@]host[:port][,...]" (or ssh:// URIs) into
// hops, checking each like OpenSSH's parse_jump.
func parseJumpSpec(spec string) ([]jumpHop, error) {
	if spec == "" {
		return nil, errors.New("empty")
	}
	var hops []jumpHop
	for _, raw := range strings.Split(spec, ",") {
		h, err := parseHop(raw)
		if err != nil {
			return nil, err
		}
		hops = append(hops, h)
	}
	return hops, nil
}

func parseHop(raw string) (jumpHop, error) {
	h := jumpHop{raw: raw}
	s := raw
	if rest, ok := strings.CutPrefix(s, "ssh://"); ok {
		s = strings.TrimSuffix(rest, "/")
		if strings.Contains(s, "/") {
			return h, fmt.Errorf("hop %q: a path is not allowed", raw)
		}
	}
	if i := strings.LastIndexByte(s, '@'); i >= 0 {
		if i == 0 {
			return h, fmt.Errorf("hop %q: empty user", raw)
		}
		h.user, s = s[:i], s[i+1:]
	}
	var port string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return h, fmt.Errorf("hop %q: unclosed [", raw)
		}
		h.host, s = s[1:end], s[end+1:]
		if s != "" {
			if s[0] != ':' {
				return h, fmt.Errorf("hop %q: junk after ]", raw)
			}
			port = s[1:]
		}
	} else {
		h.host, port, _ = strings.Cut(s, ":")
	}
	if h.host == "" {
		return h, fmt.Errorf("hop %q: empty host", raw)
	}
	if strings.ContainsAny(h.host, " \t") {
		return h, fmt.Errorf("hop %q: blank in host", raw)
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 {
			return h, fmt.Errorf("hop %q: bad port %q", raw, port)
		}
		h.port = p
	}
	return h, nil
}

// jumpSpecAsSSH writes a valid ProxyJump the way `ssh -G` prints it: the
// earlier hops as written, the last one rebuilt as [user@]host[:port].
func jumpSpecAsSSH(spec string) string {
	i := strings.LastIndexByte(spec, ',')
	last, err := parseHop(spec[i+1:])
	if err != nil {
		return spec
	}
	out := spec[:i+1]
	if last.user != "" {
		out += last.user + "@"
	}
	if strings.Contains(last.host, ":") {
		out += "[" + last.host + "]"
	} else {
		out += last.host
	}
	if last.port != 0 {
		out += ":" + strconv.Itoa(last.port)
	}
	return out
}

func joinJumpSpec(hops []jumpHop) string {
	raws := make([]string, len(hops))
	for i, h := range hops {
		raws[i] = h.raw
	}
	return strings.Join(raws, ",")
}

// harmlessKeywords are the ssh_config keywords that do not matter to a
// non-interactive command gputriage runs over its own connection; UseKeychain
// is Apple's, which its ssh accepts.
var harmlessKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`
sendenv setenv controlmaster controlpath controlpersist forwardagent usekeychain
localcommand remotecommand localforward remoteforward dynamicforward
passwordauthentication kbdinteractiveauthentication challengeresponseauthentication
`) {
		m[k] = true
	}
	return m
}()

// knownKeywords are the ssh_config keywords of OpenSSH up to 10.x
// (including deprecated ones ssh still accepts) that need no word when
// gputriage does not act on them.
var knownKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range strings.Fields(`
addkeystoagent addressfamily batchmode canonicaldomains canonicalizefallbacklocal
canonicalizemaxdots canonicalizepermittedcnames casignaturealgorithms channeltimeout
checkhostip cipher ciphers clearallforwardings compression compressionlevel
connectionattempts dsaauthentication enableescapecommandline enablesshkeysign
escapechar exitonforwardfailure fallbacktorsh fingerprinthash forkafterauthentication
forwardx11 forwardx11timeout forwardx11trusted gatewayports globalknownhostsfile2
gssapiauthentication gssapiclientidentity gssapidelegatecredentials gssapikeyexchange
gssapikexalgorithms gssapirenewalforcesrekey gssapiserveridentity gssapitrustdns
hashknownhosts hostbasedacceptedalgorithms hostbasedauthentication hostbasedkeytypes
hostkeyalgorithms identityfile2 ignoreunknown ipqos kbdinteractivedevices
kerberosauthentication kerberostgtpassing kexalgorithms loglevel logverbose macs
nohostauthenticationforlocalhost numberofpasswordprompts obscurekeystroketiming
permitlocalcommand permitremoteopen preferredauthentications protocol
protocolkeepalives proxyusefdpass pubkeyacceptedalgorithms pubkeyacceptedkeytypes
pubkeyauthentication refuseconnection rekeylimit requesttty requiredrsasize
rhostsauthentication rhostsrsaauthentication rsaauthentication serveralivecountmax
serveraliveinterval sessiontype setuptimeout skeyauthentication smartcarddevice
stdinnull streamlocalbindmask streamlocalbindunlink syslogfacility tag tcpkeepalive
tisauthentication tunnel tunneldevice updatehostkeys useblacklistedkeys
useprivilegedport userknownhostsfile2 useroaming usersh verifyhostkeydns
versionaddendum visualhostkey warnweakcrypto xauthlocation afstokenpassing
`) {
		m[k] = true
	}
	return m
}()
