package parse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The capture header: the format version and the run's nonce. Version 2 sends every value a
// host's users control encoded or NUL-terminated; version 1 is read for replay.
const (
	captureMagicV1 = "gputriage-capture v1 nonce="
	captureMagicV2 = "gputriage-capture v2 nonce="
)

// CaptureHeader is the first line of a capture of the current format for nonce.
func CaptureHeader(nonce string) string {
	return captureMagicV2 + nonce + "\n"
}

// sectionLimits is the client's own bound on each section's body, in bytes (the probe cuts
// each at the same bound, plus 64 bytes for the rc trailer). A host's "limit=" is never read:
// a larger one must not make the parser hold more.
var sectionLimits = map[string]int{
	"host":          64 << 10,
	"smi-gpu":       1 << 20,
	"smi-gpu-basic": 1 << 20,
	"smi-apps":      1 << 20,
	"apps-alive":    128 << 10,
	"smi-pids":      256 << 10,
	"fds":           4 << 20,
	"maps":          4 << 20,
	"fdstat":        1 << 20,
	"procs":         4 << 20,
	"users":         1 << 20,
	"units":         1 << 20,
	"user-units":    1 << 20,
	"shm-df":        64 << 10,
	"shm-ls":        8 << 20,
	"shm-dirs":      512 << 10,
	"ancestors":     1 << 20,
	"slurm":         1 << 20,
}

// defaultSectionLimit bounds a section this client does not know.
const defaultSectionLimit = 64 << 10

// maxSections bounds how many sections a capture may hold; the probe prints 18 at most.
const maxSections = 64

// base64Sections are the version 2 sections whose bounded stream (body and rc trailer)
// travels base64-encoded: their bodies may hold NUL, which the probe's shell cannot keep.
var base64Sections = map[string]bool{"fds": true}

// IsBase64Section reports whether a version 2 section's stream travels base64-encoded, in
// lines of 76 characters, between its begin and end markers.
func IsBase64Section(name string) bool { return base64Sections[name] }

// SectionLimit is the client's bound on the body of the named section.
func SectionLimit(name string) int {
	if n, ok := sectionLimits[name]; ok {
		return n
	}
	return defaultSectionLimit
}

// SectionNames lists the sections the client bounds by its own table, sorted.
func SectionNames() []string {
	names := make([]string, 0, len(sectionLimits))
	for n := range sectionLimits {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SplitCapture splits a capture into its sections (the format is in docs/capture.md). Only
// marker lines carrying the nonce declared on the first line count, so nothing a remote
// process printed can open, close or end a section. Each body is bounded by SectionLimit. A
// section without its rc trailer or end marker is kept, marked Truncated. A section name
// that appears twice is listed in Contested. The returned Capture is never nil; the error,
// wrapping ErrParse, is set only when the first line does not declare a nonce, and then the
// Capture is empty.
func SplitCapture(raw []byte) (*Capture, error) {
	c := &Capture{}
	first, rest, _ := bytes.Cut(raw, []byte("\n"))
	first = bytes.TrimSuffix(first, []byte("\r"))
	nonce, ok := strings.CutPrefix(string(first), captureMagicV2)
	c.Version = 2
	if !ok {
		nonce, ok = strings.CutPrefix(string(first), captureMagicV1)
		c.Version = 1
	}
	if !ok || !isNonce(nonce) {
		c.Version = 0
		return c, fmt.Errorf("%w: capture header: want %q, got %q", ErrParse, captureMagicV2+"NONCE", clip(first, 80))
	}
	c.Nonce = nonce
	sp := splitter{c: c, raw: raw, prefix: "@@gputriage " + nonce + " ", seen: map[string]int{}}
	sp.lines(len(raw) - len(rest))
	for name, n := range sp.seen {
		if n > 1 {
			c.Contested = append(c.Contested, name)
		}
	}
	slices.Sort(c.Contested)
	return c, nil
}

// splitter holds SplitCapture's state while it walks the lines.
type splitter struct {
	c         *Capture
	raw       []byte
	prefix    string
	cur       *Section
	bodyStart int
	crlf      bool
	seen      map[string]int // section name -> times begun
}

// lines walks the capture from off, one line at a time: linear in its length.
func (sp *splitter) lines(off int) {
	raw := sp.raw
	for off < len(raw) {
		lineEnd := bytes.IndexByte(raw[off:], '\n')
		next := len(raw)
		if lineEnd >= 0 {
			lineEnd += off
			next = lineEnd + 1
		} else {
			lineEnd = len(raw)
		}
		line := raw[off:lineEnd]
		lineCRLF := bytes.HasSuffix(line, []byte("\r"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if m, ok := bytes.CutPrefix(line, []byte(sp.prefix)); ok {
			verb, arg, _ := strings.Cut(string(m), " ")
			switch verb {
			case "begin":
				sp.closeAt(off-1, false)
				name, _, _ := strings.Cut(arg, " ") // the host's "limit=" is not read
				sp.seen[name]++
				if len(sp.c.Sections) >= maxSections {
					sp.c.TooMany = true
					return
				}
				sp.cur = &Section{Name: name, Limit: SectionLimit(name)}
				sp.bodyStart, sp.crlf = next, lineCRLF
			case "end":
				if sp.cur != nil && arg == sp.cur.Name {
					sp.closeAt(off-1, true)
				}
			case "done":
				sp.closeAt(off-1, false)
				if !sp.c.Done {
					sp.c.DoneEnd = next
				}
				sp.c.Done = true
			}
		}
		off = next
	}
	sp.closeAt(len(raw), false)
}

// closeAt ends the open section with its region raw[bodyStart:end]; ended says an end marker
// (rather than a new begin, done or the end of input) closed it.
func (sp *splitter) closeAt(end int, ended bool) {
	cur := sp.cur
	if cur == nil {
		return
	}
	sp.cur = nil
	region := sp.raw[sp.bodyStart:max(end, sp.bodyStart)]
	cut := false
	if sp.c.Version >= 2 && base64Sections[cur.Name] {
		region, cut = decodeRegion(region, cur.Limit)
	}
	cur.Body, cur.ExitCode, cur.Truncated = splitTrailer(region, sp.prefix)
	if !ended || cut {
		cur.Truncated = true
	}
	if sp.crlf {
		cur.Body = bytes.TrimSuffix(cur.Body, []byte("\r"))
	}
	if cur.ExitCode != nil {
		// The trailer travels inside head -c LIMIT+64: a trailer that exactly fills the
		// bound without its newline may have lost digits of its exit code.
		trailer := len(sp.prefix) + len("rc=") + len(strconv.Itoa(*cur.ExitCode)) + 2
		if len(cur.Body)+trailer > cur.Limit+64 {
			cur.ExitCode, cur.Truncated = nil, true
		}
	}
	if len(cur.Body) > cur.Limit+64 {
		// The probe never sends more than the bound (head -c LIMIT+64): a longer body did
		// not come from it. Keep the bound and say the section was cut, so one host cannot
		// make the parser hold more than the probe would send.
		cur.Body, cur.ExitCode, cur.Truncated = cur.Body[:cur.Limit+64], nil, true
	}
	sp.c.Sections = append(sp.c.Sections, *cur)
}

// decodeRegion decodes a base64 section region: at most what encodes limit+64 bytes is
// decoded, and what does not decode is dropped; cut says either happened.
func decodeRegion(region []byte, limit int) (out []byte, cut bool) {
	text := bytes.TrimRight(region, "\r\n")
	enc := (limit + 64 + 2) / 3 * 4
	if maxText := enc + 2*(enc/76+1); len(text) > maxText { // base64's lines of 76, maybe CRLF
		text, cut = text[:maxText], true
	}
	out = make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(out, text)
	if err != nil {
		// Decode stops at the first bad byte: keep what came before it.
		cut = true
		n = max(n, 0)
	}
	return out[:n], cut
}

// splitTrailer finds the last rc trailer in a section's region and returns the body before
// it, the exit code, and whether the trailer was missing (the body was cut at its bound).
func splitTrailer(region []byte, prefix string) (body []byte, rc *int, truncated bool) {
	marker := []byte(prefix + "rc=")
	var at, codeAt int
	if i := bytes.LastIndex(region, append([]byte("\n"), marker...)); i >= 0 {
		at, codeAt = i, i+1+len(marker)
	} else if bytes.HasPrefix(region, marker) {
		at, codeAt = 0, len(marker)
	} else {
		return region, nil, true
	}
	code, _, _ := bytes.Cut(region[codeAt:], []byte("\n"))
	code = bytes.TrimSuffix(code, []byte("\r"))
	if n, err := strconv.Atoi(string(code)); err == nil {
		rc = &n
	}
	return region[:at], rc, rc == nil
}

func isNonce(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// clip shortens remote text quoted in an error message.
func clip[T ~string | ~[]byte](s T, n int) string {
	if len(s) > n {
		return string(s[:n]) + "..."
	}
	return string(s)
}
