package sshexec

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"golang.org/x/crypto/ssh"
)

// This file reads known_hosts files and matches host names against them the way OpenSSH's
// hostfile.c and match.c do, because "as strict as ssh" is only true if the same file means the
// same thing to both: lines of any length, host patterns compared case-insensitively against a
// lower-cased name, hashed names hashed from that lower-cased name, "!" negation, "*" and "?"
// wildcards over the whole "[host]:port" string. golang.org/x/crypto/ssh/knownhosts differs on
// each of these (a 64 KiB line limit that drops the rest of the file, case-sensitive patterns,
// wildcards that never match another port).

// maxKnownHostsBytes bounds how much of one known_hosts file is read; a million hashed entries
// take about 150 MiB. A longer file is read up to the bound and counts as not read fully.
const maxKnownHostsBytes = 256 << 20

const (
	markerCA      = "@cert-authority"
	markerRevoked = "@revoked"
)

// knownHost is one usable known_hosts line.
type knownHost struct {
	marker string // "", markerCA or markerRevoked
	hosts  string // the host field as written: a pattern list, or one "|1|salt|hash"
	salt   []byte // of a hashed field that can match, decoded once
	sum    []byte
	key    ssh.PublicKey
	file   string
	line   int
}

// knownHostsFile is what one file holds.
type knownHostsFile struct {
	entries []knownHost
	hashed  bool  // some host field is hashed: new entries are hashed too
	err     error // why the file was not read fully (entries hold what was); nil if it was

	// The entries by name, so that a sweep of N hosts does not match every host against every
	// line: plain[name] are the entries whose host field is a list of plain names (no wildcard,
	// no negation, not hashed) holding name, lower-cased; others are all the rest (hashed,
	// patterns, @revoked), which are matched one by one. Both in file order.
	plain  map[string][]int
	others []int
}

// add appends e and indexes it.
func (kf *knownHostsFile) add(e knownHost) {
	i := len(kf.entries)
	kf.entries = append(kf.entries, e)
	names, ok := plainNames(e)
	if !ok {
		kf.others = append(kf.others, i)
		return
	}
	if kf.plain == nil {
		kf.plain = map[string][]int{}
	}
	for _, n := range names {
		if l := kf.plain[n]; len(l) == 0 || l[len(l)-1] != i { // a name listed twice on a line
			kf.plain[n] = append(l, i)
		}
	}
}

// plainNames are the lower-cased names of an entry whose host field lists plain names only:
// such an entry matches a name exactly when it lists it (matchHostList).
func plainNames(e knownHost) ([]string, bool) {
	if e.marker == markerRevoked || strings.HasPrefix(e.hosts, "|") || strings.ContainsAny(e.hosts, "*?!") {
		return nil, false
	}
	names := strings.Split(e.hosts, ",")
	for i, n := range names {
		if len(n) >= 1023 { // fails the whole list: leave it to matchHostList
			return nil, false
		}
		names[i] = lowerASCII(n)
	}
	return names, true
}

// candidates calls fn, in file order, with every entry that may match name (every @revoked
// entry among them): the entries that list it, and those that must be matched one by one.
func (kf *knownHostsFile) candidates(name string, fn func(knownHost)) {
	named, others := kf.plain[name], kf.others
	for len(named) > 0 || len(others) > 0 {
		var i int
		if len(others) == 0 || (len(named) > 0 && named[0] < others[0]) {
			i, named = named[0], named[1:]
		} else {
			i, others = others[0], others[1:]
		}
		fn(kf.entries[i])
	}
}

// parseKnownHosts reads r, at most limit bytes, line by line whatever the line length. Lines
// that are not entries (comments, blanks, unknown markers, bad keys) are skipped, as OpenSSH
// skips them. err is set when r could not be read to its end; entries then hold the lines read
// before that point.
func parseKnownHosts(r io.Reader, file string, limit int64) knownHostsFile {
	var kf knownHostsFile
	br := bufio.NewReader(io.LimitReader(r, limit+1))
	var read int64
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		read += int64(len(line))
		if read > limit {
			kf.err = fmt.Errorf("%s is larger than %d MiB; only the lines before that were read", file, limit>>20)
			return kf
		}
		if err != nil && !errors.Is(err, io.EOF) {
			var pe *fs.PathError
			if errors.As(err, &pe) { // it names the file again
				err = pe.Err
			}
			kf.err = fmt.Errorf("%s: reading line %d: %w", file, n, err)
			return kf
		}
		if e, ok := parseKnownHostsLine(line); ok {
			e.file, e.line = file, n
			kf.hashed = kf.hashed || strings.HasPrefix(e.hosts, "|")
			kf.add(e)
		}
		if err != nil {
			return kf
		}
	}
}

// parseKnownHostsLine parses "[marker] hosts keytype base64 [comment]".
func parseKnownHostsLine(line []byte) (knownHost, bool) {
	var e knownHost
	rest := bytes.TrimLeft(bytes.TrimRight(line, "\r\n"), " \t")
	if len(rest) == 0 || rest[0] == '#' {
		return e, false
	}
	if rest[0] == '@' {
		var m []byte
		m, rest = nextField(rest)
		switch string(m) {
		case markerCA, markerRevoked:
			e.marker = string(m)
		default:
			return e, false
		}
	}
	var hosts, typ, blob []byte
	hosts, rest = nextField(rest)
	typ, rest = nextField(rest)
	blob, _ = nextField(rest)
	if len(hosts) == 0 || len(blob) == 0 {
		return e, false
	}
	raw, err := base64.StdEncoding.DecodeString(string(blob))
	if err != nil {
		return e, false
	}
	key, err := ssh.ParsePublicKey(raw)
	if err != nil || key.Type() != string(typ) {
		return e, false
	}
	e.hosts, e.key = string(hosts), key
	if hosts[0] == '|' {
		e.salt, e.sum, _ = decodeHashed(e.hosts)
	}
	return e, true
}

// nextField splits off the first space- or tab-separated field.
func nextField(b []byte) (field, rest []byte) {
	i := bytes.IndexAny(b, " \t")
	if i < 0 {
		return b, nil
	}
	return b[:i], bytes.TrimLeft(b[i:], " \t")
}

// matches reports whether the entry's host field names host, a lower-cased known_hosts name
// ("host" or "[host]:port").
func (e knownHost) matches(host string) bool {
	if strings.HasPrefix(e.hosts, "|") {
		return e.salt != nil && hashedMatches(e.salt, e.sum, host)
	}
	return matchHostList(host, e.hosts)
}

// decodeHashed splits a "|1|salt|hash" field. ok only when the field is exactly what OpenSSH
// writes for that salt and hash (canonical base64 of 20 bytes each): OpenSSH compares the whole
// field with the one it computes, so no other form can ever match.
func decodeHashed(field string) (salt, sum []byte, ok bool) {
	rest, ok := strings.CutPrefix(field, "|1|")
	if !ok {
		return nil, nil, false
	}
	salt64, sum64, ok := strings.Cut(rest, "|")
	if !ok {
		return nil, nil, false
	}
	enc := base64.StdEncoding
	salt, err1 := enc.DecodeString(salt64)
	sum, err2 := enc.DecodeString(sum64)
	if err1 != nil || err2 != nil || len(salt) != sha1.Size || len(sum) != sha1.Size ||
		enc.EncodeToString(salt) != salt64 || enc.EncodeToString(sum) != sum64 {
		return nil, nil, false
	}
	return salt, sum, true
}

func hashedMatches(salt, sum []byte, host string) bool {
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return hmac.Equal(mac.Sum(nil), sum)
}

// hashedHostMatches is OpenSSH's match_maybe_hashed for a hashed field.
func hashedHostMatches(field, host string) bool {
	salt, sum, ok := decodeHashed(field)
	return ok && hashedMatches(salt, sum, host)
}

// matchHostList is OpenSSH's match_hostname: a comma-separated list of patterns, each
// lower-cased; a matching "!pattern" vetoes the line; a pattern of 1023 bytes or more fails
// the whole list.
func matchHostList(host, list string) bool {
	positive := false
	for rest, more := list, true; more; {
		var p string
		p, rest, more = strings.Cut(rest, ",")
		negated := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		if len(p) >= 1023 {
			return false
		}
		if matchPattern(host, lowerASCII(p)) {
			if negated {
				return false
			}
			positive = true
		}
	}
	return positive
}

// lowerASCII lower-cases A-Z only, byte by byte, as OpenSSH's tolower does in the C locale.
func lowerASCII(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r >= 'A' && r <= 'Z' }) < 0 {
		return s // nothing to lower: no copy
	}
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return string(b)
}

// matchPattern is OpenSSH's match_pattern: "*" matches any run of bytes, "?" any one byte, all
// else itself. It backtracks to the last "*" only, so it takes O(len(s)*len(p)) at worst.
func matchPattern(s, p string) bool {
	si, pi := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == s[si]):
			si++
			pi++
		case star >= 0:
			mark++
			si, pi = mark, star+1
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
