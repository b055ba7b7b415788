package sshexec

import (
	"bufio"
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

	"github.com/skeema/knownhosts"
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
// "[host]:port" otherwise.
func knownHostsName(host string, port int) string {
	if port == 0 {
		port = 22
	}
	return xknownhosts.Normalize(net.JoinHostPort(host, strconv.Itoa(port)))
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

// fileIsHashed reports whether a known_hosts file already holds hashed host names, in which case
// new entries are hashed too (the user evidently ran ssh-keygen -H or has HashKnownHosts yes).
func fileIsHashed(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "@") { // @cert-authority / @revoked marker
			if i := strings.IndexAny(line, " \t"); i >= 0 {
				line = strings.TrimSpace(line[i:])
			}
		}
		if strings.HasPrefix(line, "|1|") {
			return true
		}
	}
	return false
}

// hostKeys is the known_hosts state of one sweep: each distinct list of files parsed once, plus
// the keys accepted during the sweep (AcceptNew), so that a host met twice (a shared jump host)
// is recorded once and a second, different key for it is caught.
type hostKeys struct {
	mu       sync.Mutex
	dbs      map[string]*hostKeyDB
	accepted map[string]acceptedKey // by known_hosts name
}

type hostKeyDB struct {
	once  sync.Once
	db    *knownhosts.HostKeyDB
	files []string // the files that exist and parse
	notes []string // files skipped, and why
	err   error
}

type acceptedKey struct {
	key  ssh.PublicKey
	file string
	line int
}

func newHostKeys() *hostKeys {
	return &hostKeys{dbs: map[string]*hostKeyDB{}, accepted: map[string]acceptedKey{}}
}

func (h *hostKeys) db(files []string) *hostKeyDB {
	k := strings.Join(files, "\x00")
	h.mu.Lock()
	d := h.dbs[k]
	if d == nil {
		d = &hostKeyDB{}
		h.dbs[k] = d
	}
	h.mu.Unlock()
	d.once.Do(func() { d.load(files) })
	return d
}

// load parses the files that exist. Like OpenSSH, a missing file is no error; an unreadable or
// unparsable one is skipped with a note rather than failing every host.
func (d *hostKeyDB) load(files []string) {
	for _, f := range files {
		if _, err := os.Stat(f); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, err := knownhosts.NewDB(f); err != nil {
			d.notes = append(d.notes, fmt.Sprintf("known_hosts file skipped: %v", err))
			continue
		}
		d.files = append(d.files, f)
	}
	d.db, d.err = knownhosts.NewDB(d.files...)
}

// hostKeyCheck verifies one hop's host key. Its failure is kept in err, typed, because
// NewClientConn flattens it into a string.
type hostKeyCheck struct {
	keys      *hostKeys
	db        *hostKeyDB
	target    Target // the hop being checked
	name      string // known_hosts name looked up: alias, host or [host]:port
	acceptNew bool
	direct    bool // reached without a jump host (ssh-keyscan can reach it)

	err   *Error
	notes []string
}

// lookupAddr is what ssh.NewClientConn receives as its address and hands to the callback:
// HostKeyAlias replaces host and port, as in OpenSSH.
func lookupAddr(t Target) string {
	if t.HostKeyAlias != "" {
		return net.JoinHostPort(t.HostKeyAlias, "22")
	}
	return net.JoinHostPort(strings.ToLower(t.HostName), strconv.Itoa(portOf(t)))
}

func (c *hostKeyCheck) algorithms() []string {
	if c.db.db == nil {
		return nil
	}
	algos := c.db.db.HostKeyAlgorithms(lookupAddr(c.target))
	if len(algos) == 0 {
		c.keys.mu.Lock()
		if a, ok := c.keys.accepted[c.name]; ok {
			algos = algorithmsFor(a.key)
		}
		c.keys.mu.Unlock()
	}
	return algos
}

func algorithmsFor(key ssh.PublicKey) []string {
	if key.Type() == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{key.Type()}
}

func (c *hostKeyCheck) callback(hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := c.check(hostname, remote, key)
	if err != nil {
		c.err = err
		return err
	}
	return nil
}

func (c *hostKeyCheck) check(hostname string, remote net.Addr, key ssh.PublicKey) *Error {
	if c.db.err != nil {
		return &Error{Phase: PhaseHostKey, Kind: KindConfig, Err: c.db.err,
			Message: fmt.Sprintf("cannot read known_hosts: %v", c.db.err)}
	}
	err := c.db.db.HostKeyCallback()(hostname, remote, key)
	if err == nil {
		return nil
	}
	var keyErr *xknownhosts.KeyError
	var revoked *xknownhosts.RevokedError
	switch {
	case errors.As(err, &revoked):
		return &Error{Phase: PhaseHostKey, Kind: KindRevoked, Err: err, Message: fmt.Sprintf(
			"host key for %s (%s %s) is marked @revoked at %s:%d; refusing to connect",
			c.target.Name, key.Type(), Fingerprint(key), revoked.Revoked.Filename, revoked.Revoked.Line)}
	case errors.As(err, &keyErr) && len(keyErr.Want) > 0:
		return c.changed(err, key, keyErr.Want)
	case errors.As(err, &keyErr):
		return c.unknown(err, key)
	}
	return &Error{Phase: PhaseHostKey, Kind: KindHostCert, Err: err, Message: fmt.Sprintf(
		"host certificate for %s not accepted: %v", c.target.Name, err)}
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
	if c.acceptNew && file != "" {
		line, werr := appendKnownHost(file, c.name, key, fileIsHashed(file))
		if werr == nil {
			c.keys.accepted[c.name] = acceptedKey{key: key, file: file, line: line}
			c.notes = append(c.notes, fmt.Sprintf("accepted new host key for %s (%s %s), recorded at %s:%d",
				c.target.Name, key.Type(), Fingerprint(key), file, line))
			return nil
		}
		c.notes = append(c.notes, fmt.Sprintf("could not record new host key: %v", werr))
	}
	where := "in no known_hosts file"
	if len(c.db.files) > 0 {
		where = "in none of " + strings.Join(c.db.files, ", ")
	}
	var trust string
	switch {
	case file == "":
		trust = "no known_hosts file is configured to record it in"
	case c.direct && c.target.HostKeyAlias == "":
		args := []string{"ssh-keyscan", "-t", keyscanType(key)}
		if p := portOf(c.target); p != 22 {
			args = append(args, "-p", strconv.Itoa(p))
		}
		args = append(args, shellQuote(c.target.HostName))
		trust = fmt.Sprintf("verify that fingerprint out of band, then trust it with: %s >> %s (or rerun with --accept-new)",
			strings.Join(args, " "), shellQuote(file))
	default: // keyscan cannot reach it through a jump host, nor write the alias: give the line
		line := c.name + " " + strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key)))
		trust = fmt.Sprintf("verify that fingerprint out of band, then trust it with: echo %s >> %s (or rerun with --accept-new)",
			shellQuote(line), shellQuote(file))
	}
	return &Error{Phase: PhaseHostKey, Kind: KindUnknownHostKey, Err: err, Message: fmt.Sprintf(
		"unknown host key for %s: %s offered %s key %s, which is %s; %s",
		c.target.Name, c.name, key.Type(), Fingerprint(key), where, trust)}
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
