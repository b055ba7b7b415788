package sshexec

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// Fingerprint is the key's SHA256 fingerprint as OpenSSH prints it ("SHA256:...").
func Fingerprint(key ssh.PublicKey) string {
	return ssh.FingerprintSHA256(key)
}

// AppendKnownHost records key for host (and port, when not 22) at the end of the known_hosts
// file, creating the file (0600) and its directory (0700) when missing. With hashed, the host
// field is hashed like `ssh-keygen -H` does.
func AppendKnownHost(file, host string, port int, key ssh.PublicKey, hashed bool) error {
	_, err := appendKnownHost(file, knownHostsName(host, port), key, hashed)
	return err
}

// knownHostsName is the host field OpenSSH writes and looks up: "host" on port 22 (or 0),
// "[host]:port" otherwise, lower-cased as ssh lower-cases the host name.
func knownHostsName(host string, port int) string {
	host = lowerASCII(host)
	if port == 0 || port == 22 {
		return host
	}
	return "[" + host + "]:" + strconv.Itoa(port)
}

// appendKnownHost writes one line for name and returns its line number in file.
func appendKnownHost(file, name string, key ssh.PublicKey, hashed bool) (int, error) {
	if strings.ContainsAny(name, " \t\r\n,") || name == "" {
		return 0, fmt.Errorf("known_hosts: refusing to record host name %q", name)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return 0, fmt.Errorf("known_hosts: %w", err)
	}
	f, err := os.OpenFile(file, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("known_hosts: %w", err)
	}
	defer f.Close()
	old, err := os.ReadFile(file)
	if err != nil {
		return 0, fmt.Errorf("known_hosts: %w", err)
	}
	var line bytes.Buffer
	if len(old) > 0 && old[len(old)-1] != '\n' {
		line.WriteByte('\n')
	}
	if hashed {
		name = xknownhosts.HashHostname(name)
	}
	line.WriteString(name)
	line.WriteByte(' ')
	line.Write(ssh.MarshalAuthorizedKey(key)) // "type base64\n"
	lineNo := bytes.Count(old, []byte("\n")) + 1
	if len(old) > 0 && old[len(old)-1] != '\n' {
		lineNo++
	}
	if _, err := f.Write(line.Bytes()); err != nil {
		return 0, fmt.Errorf("known_hosts: %s: %w", file, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("known_hosts: %s: %w", file, err)
	}
	return lineNo, nil
}

// hostKeys is the known_hosts state of one sweep: every file any host or jump host names, read
// once before the first host is dialled, plus the keys accepted during the sweep (accept-new),
// so that a host met twice (a shared jump host) is recorded once and a second, different key for
// it is caught.
type hostKeys struct {
	files map[string]*knownHostsFile // nil for a file that does not exist; read-only once built
	// acceptOff says why accept-new is off for the whole run ("" when it is not): a known_hosts
	// file could not be read fully, so a host that looks new may be known there with another key.
	acceptOff string

	mu       sync.Mutex
	accepted map[string]acceptedKey // by known_hosts name
}

type acceptedKey struct {
	key  ssh.PublicKey
	file string
	line int
}

// newHostKeys reads the known_hosts files of every target and jump host. Like OpenSSH, a
// missing file is no error; one that cannot be read fully is used as far as it was read, noted
// on each host that names it, and turns accept-new off for the run.
func newHostKeys(targets []Target) *hostKeys {
	h := &hostKeys{files: map[string]*knownHostsFile{}, accepted: map[string]acceptedKey{}}
	var walk func(t Target)
	walk = func(t Target) {
		for _, f := range knownHostsFiles(t) {
			if _, done := h.files[f]; done {
				continue
			}
			kf := readKnownHostsFile(f)
			h.files[f] = kf
			if kf != nil && kf.err != nil && h.acceptOff == "" {
				h.acceptOff = fmt.Sprintf("known_hosts file %v", kf.err)
			}
		}
		for _, hop := range t.Jump {
			walk(hop)
		}
	}
	for _, t := range targets {
		walk(t)
	}
	return h
}

// knownHostsFiles are the files a target's key is looked up in: user files, then global ones.
func knownHostsFiles(t Target) []string {
	return append(append([]string(nil), t.KnownHostsFiles...), t.GlobalKnownHostsFiles...)
}

// readKnownHostsFile returns nil for a file that does not exist.
func readKnownHostsFile(file string) *knownHostsFile {
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &knownHostsFile{err: fmt.Errorf("%s: %w", file, err)}
	case fi.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0: // opening a FIFO would block
		return &knownHostsFile{err: fmt.Errorf("%s: not a regular file", file)}
	}
	f, err := os.Open(file)
	if err != nil {
		return &knownHostsFile{err: fmt.Errorf("%s: %w", file, err)}
	}
	defer f.Close()
	kf := parseKnownHosts(f, file, maxKnownHostsBytes)
	return &kf
}

// hostKeyCheck verifies one hop's host key. Its failure is kept in err, typed, because
// NewClientConn flattens it into a string.
type hostKeyCheck struct {
	keys      *hostKeys
	target    Target            // the hop being checked
	name      string            // known_hosts name looked up: alias, host or [host]:port, lower-cased
	bare      string            // the name without its port, also asked on a non-default port ("" if none)
	kfs       []*knownHostsFile // the hop's files that exist, user files first
	files     []string          // their names
	entries   []knownHost       // their entries for name, @revoked ones aside
	revokedBy []knownHost       // their @revoked entries, whatever host they name
	bareDone  bool
	bareOnes  []knownHost // their entries for bare, once asked
	acceptNew bool
	direct    bool // reached without a jump host (ssh-keyscan can reach it)

	err   *Error
	notes []string // starts with the notes about the hop's files
}

func (h *hostKeys) newCheck(t Target, acceptNew, direct bool) *hostKeyCheck {
	c := &hostKeyCheck{keys: h, target: t, acceptNew: acceptNew, direct: direct}
	if t.HostKeyAlias != "" {
		c.name = lowerASCII(t.HostKeyAlias)
	} else {
		c.name = knownHostsName(t.HostName, portOf(t))
		if portOf(t) != 22 { // OpenSSH's "checking without port identifier"
			c.bare = lowerASCII(t.HostName)
		}
	}
	for _, f := range knownHostsFiles(t) {
		kf := h.files[f]
		if kf == nil {
			continue
		}
		if kf.err != nil {
			note := fmt.Sprintf("known_hosts file not read fully: %v", kf.err)
			if acceptNew {
				note += "; accept-new is off for this run"
			}
			c.notes = append(c.notes, note)
		}
		c.files = append(c.files, f)
		c.kfs = append(c.kfs, kf)
		kf.candidates(c.name, func(e knownHost) { // once per hop: a hashed entry costs an HMAC to match
			switch {
			case e.marker == markerRevoked:
				c.revokedBy = append(c.revokedBy, e)
			case e.matches(c.name):
				c.entries = append(c.entries, e)
			}
		})
	}
	return c
}

// bareEntries are the entries for the bare host name, looked for only when needed (OpenSSH's
// retry without the port).
func (c *hostKeyCheck) bareEntries() []knownHost {
	if c.bare == "" || c.bareDone {
		return c.bareOnes
	}
	c.bareDone = true
	for _, kf := range c.kfs {
		kf.candidates(c.bare, func(e knownHost) {
			if e.marker != markerRevoked && e.matches(c.bare) {
				c.bareOnes = append(c.bareOnes, e)
			}
		})
	}
	return c.bareOnes
}

// lookupAddr is what ssh.NewClientConn receives as its address and hands to the callback:
// HostKeyAlias replaces host and port, as in OpenSSH. Certificate principals are checked
// against its host part.
func lookupAddr(t Target) string {
	if t.HostKeyAlias != "" {
		return net.JoinHostPort(lowerASCII(t.HostKeyAlias), "22")
	}
	return net.JoinHostPort(lowerASCII(t.HostName), strconv.Itoa(portOf(t)))
}

// algorithms are the host key algorithms known for the hop's name, so that the server offers a
// key that can be checked; nil (any) when none is known.
func (c *hostKeyCheck) algorithms() []string {
	var algos []string
	seen := map[string]bool{}
	for _, e := range c.entries {
		for _, a := range algorithmsFor(e.key, e.marker == markerCA) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	if len(algos) == 0 {
		c.keys.mu.Lock()
		if a, ok := c.keys.accepted[c.name]; ok {
			algos = algorithmsFor(a.key, false)
		}
		c.keys.mu.Unlock()
	}
	return algos
}

func algorithmsFor(key ssh.PublicKey, ca bool) []string {
	t := key.Type()
	if !ca {
		if t == ssh.KeyAlgoRSA {
			return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
		}
		return []string{t}
	}
	switch t {
	case ssh.KeyAlgoRSA:
		return []string{ssh.CertAlgoRSASHA512v01, ssh.CertAlgoRSASHA256v01, ssh.CertAlgoRSAv01}
	case ssh.KeyAlgoED25519:
		return []string{ssh.CertAlgoED25519v01}
	case ssh.KeyAlgoECDSA256:
		return []string{ssh.CertAlgoECDSA256v01}
	case ssh.KeyAlgoECDSA384:
		return []string{ssh.CertAlgoECDSA384v01}
	case ssh.KeyAlgoECDSA521:
		return []string{ssh.CertAlgoECDSA521v01}
	case ssh.KeyAlgoSKED25519:
		return []string{ssh.CertAlgoSKED25519v01}
	case ssh.KeyAlgoSKECDSA256:
		return []string{ssh.CertAlgoSKECDSA256v01}
	}
	return nil
}

func (c *hostKeyCheck) callback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := c.check(hostname, remote, key)
	if err != nil {
		c.err = err
		return err
	}
	return nil
}

// check decides as OpenSSH's check_host_key does: a key recorded for the name is accepted;
// other keys recorded for it, of any type, make it a changed key; with none, on a non-default
// port, the key recorded for the bare host name is accepted too; otherwise the host is new.
func (c *hostKeyCheck) check(hostname string, remote net.Addr, key ssh.PublicKey) *Error {
	if r := c.revoked(key); r != nil {
		return &Error{Phase: PhaseHostKey, Kind: KindRevoked, Err: &xknownhosts.RevokedError{Revoked: *r}, Message: fmt.Sprintf(
			"host key for %s (%s %s) is marked @revoked at %s:%d; refusing to connect",
			c.target.Name, key.Type(), Fingerprint(key), r.Filename, r.Line)}
	}
	if cert, ok := key.(*ssh.Certificate); ok {
		cc := ssh.CertChecker{
			IsHostAuthority: func(auth ssh.PublicKey, _ string) bool { return c.isAuthority(auth) },
			IsRevoked:       func(cert *ssh.Certificate) bool { return c.revoked(cert.SignatureKey) != nil },
		}
		if err := cc.CheckHostKey(hostname, remote, cert); err != nil {
			return &Error{Phase: PhaseHostKey, Kind: KindHostCert, Err: err, Message: fmt.Sprintf(
				"host certificate for %s not accepted: %v", c.target.Name, err)}
		}
		return nil
	}
	want, ok := known(c.entries, key)
	if !ok && len(want) == 0 {
		_, ok = known(c.bareEntries(), key)
	}
	switch {
	case ok:
		return nil
	case len(want) > 0:
		return c.changed(&xknownhosts.KeyError{Want: want}, key, want)
	}
	return c.unknown(&xknownhosts.KeyError{}, key)
}

// known looks key up among the plain entries for a name: ok when one holds it; otherwise want
// lists those entries, which hold other keys.
func known(entries []knownHost, key ssh.PublicKey) (want []xknownhosts.KnownKey, ok bool) {
	for _, e := range entries {
		if e.marker != "" {
			continue
		}
		if bytes.Equal(e.key.Marshal(), key.Marshal()) {
			return nil, true
		}
		want = append(want, xknownhosts.KnownKey{Key: e.key, Filename: e.file, Line: e.line})
	}
	return want, false
}

// knownKeys lists every entry for the hop's name, certificate authorities included, for the
// message about a server that offers none of their key types.
func (c *hostKeyCheck) knownKeys() []xknownhosts.KnownKey {
	var out []xknownhosts.KnownKey
	for _, e := range c.entries {
		out = append(out, xknownhosts.KnownKey{Key: e.key, Filename: e.file, Line: e.line})
	}
	return out
}

func (c *hostKeyCheck) isAuthority(auth ssh.PublicKey) bool {
	for _, es := range [][]knownHost{c.entries, c.bareEntries()} {
		for _, e := range es {
			if e.marker == markerCA && bytes.Equal(e.key.Marshal(), auth.Marshal()) {
				return true
			}
		}
	}
	return false
}

// revoked finds a @revoked entry for key (or the key a certificate certifies) in any of the
// hop's files, whatever its host field: stricter than OpenSSH, which applies the line to the
// hosts it names only.
func (c *hostKeyCheck) revoked(key ssh.PublicKey) *xknownhosts.KnownKey {
	blob := key.Marshal()
	if cert, ok := key.(*ssh.Certificate); ok {
		blob = cert.Key.Marshal()
	}
	for _, e := range c.revokedBy {
		if bytes.Equal(e.key.Marshal(), blob) {
			return &xknownhosts.KnownKey{Key: e.key, Filename: e.file, Line: e.line}
		}
	}
	return nil
}

func (c *hostKeyCheck) changed(err error, key ssh.PublicKey, want []xknownhosts.KnownKey) *Error {
	var b strings.Builder
	fmt.Fprintf(&b, "HOST KEY CHANGED for %s (known_hosts name %s): it offered %s %s, but ",
		c.target.Name, c.name, key.Type(), Fingerprint(key))
	for i, w := range want {
		if i > 0 {
			b.WriteString(", and ")
		}
		fmt.Fprintf(&b, "%s:%d has %s %s", w.Filename, w.Line, w.Key.Type(), Fingerprint(w.Key))
	}
	fmt.Fprintf(&b, ". Someone may be intercepting the connection, or the host was reinstalled. "+
		"Verify the new key out of band, then remove the old entry with: ssh-keygen -R %s -f %s. "+
		"No option overrides this check", shellQuote(c.name), shellQuote(want[0].Filename))
	return &Error{Phase: PhaseHostKey, Kind: KindHostKeyChanged, Err: err, Message: b.String()}
}

func (c *hostKeyCheck) unknown(err error, key ssh.PublicKey) *Error {
	c.keys.mu.Lock()
	defer c.keys.mu.Unlock()
	if a, ok := c.keys.accepted[c.name]; ok {
		if bytes.Equal(a.key.Marshal(), key.Marshal()) {
			return nil
		}
		return c.changed(err, key, []xknownhosts.KnownKey{{Key: a.key, Filename: a.file, Line: a.line}})
	}
	file := ""
	if len(c.target.KnownHostsFiles) > 0 {
		file = c.target.KnownHostsFiles[0]
	}
	if c.acceptNew && file != "" && c.keys.acceptOff == "" {
		hashed := c.keys.files[file] != nil && c.keys.files[file].hashed
		line, werr := appendKnownHost(file, c.name, key, hashed)
		if werr == nil {
			c.keys.accepted[c.name] = acceptedKey{key: key, file: file, line: line}
			c.notes = append(c.notes, fmt.Sprintf("accepted new host key for %s (%s %s), recorded at %s:%d",
				c.target.Name, key.Type(), Fingerprint(key), file, line))
			return nil
		}
		c.notes = append(c.notes, fmt.Sprintf("could not record new host key: %v", werr))
	}
	where := "in no known_hosts file"
	if len(c.files) > 0 {
		where = "in none of " + strings.Join(c.files, ", ")
	}
	msg := fmt.Sprintf("unknown host key for %s: %s offered %s key %s, which is %s; %s",
		c.target.Name, c.name, key.Type(), Fingerprint(key), where, c.trustAdvice(file, key))
	if c.acceptNew && c.keys.acceptOff != "" {
		msg += fmt.Sprintf(" (accept-new is off for this run: %s)", c.keys.acceptOff)
	}
	return &Error{Phase: PhaseHostKey, Kind: KindUnknownHostKey, Err: err, Message: msg}
}

// trustAdvice says how to trust an unknown key after verifying it.
func (c *hostKeyCheck) trustAdvice(file string, key ssh.PublicKey) string {
	switch {
	case file == "":
		return "no known_hosts file is configured to record it in (UserKnownHostsFile none)"
	case c.direct && c.target.HostKeyAlias == "":
		args := []string{"ssh-keyscan", "-t", keyscanType(key)}
		if p := portOf(c.target); p != 22 {
			args = append(args, "-p", strconv.Itoa(p))
		}
		args = append(args, shellQuote(c.target.HostName))
		return fmt.Sprintf("verify that fingerprint out of band, then trust it with: %s >> %s (or rerun with --accept-new)",
			strings.Join(args, " "), shellQuote(file))
	}
	// keyscan cannot reach it through a jump host, nor write the alias: give the line
	line := c.name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
	return fmt.Sprintf("verify that fingerprint out of band, then trust it with: echo %s >> %s (or rerun with --accept-new)",
		shellQuote(line), shellQuote(file))
}

func keyscanType(key ssh.PublicKey) string {
	switch t := key.Type(); {
	case t == ssh.KeyAlgoED25519:
		return "ed25519"
	case strings.HasPrefix(t, "ecdsa-"):
		return "ecdsa"
	case t == ssh.KeyAlgoRSA:
		return "rsa"
	default:
		return t
	}
}

// shellQuote quotes s for a POSIX shell when it needs it. It is used only in advice printed to
// the user, never in a command sent to a host.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
