package parse

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

const captureMagic = "gputriage-capture v1 nonce="

// SplitCapture splits a capture into its sections (the format is in docs/capture.md). Only
// marker lines carrying the nonce declared on the first line count, so nothing a remote
// process printed can open, close or end a section. A section without its rc trailer or end
// marker is kept, marked Truncated. The returned Capture is never nil; the error, wrapping
// ErrParse, is set only when the first line does not declare a nonce, and then the Capture is
// empty.
func SplitCapture(raw []byte) (*Capture, error) {
	c := &Capture{}
	first, rest, _ := bytes.Cut(raw, []byte("\n"))
	first = bytes.TrimSuffix(first, []byte("\r"))
	nonce, ok := strings.CutPrefix(string(first), captureMagic)
	if !ok || !isNonce(nonce) {
		return c, fmt.Errorf("%w: capture header: want %q, got %q", ErrParse, captureMagic+"NONCE", clip(first, 80))
	}
	c.Nonce = nonce
	prefix := "@@gputriage " + nonce + " "
	off := len(raw) - len(rest) // offset of the current line

	var cur *Section
	var bodyStart int
	var crlf bool
	// closeAt ends the open section with its body region raw[bodyStart:end]; ended says an
	// end marker (rather than a new begin, done or the end of input) closed it.
	closeAt := func(end int, ended bool) {
		if cur == nil {
			return
		}
		region := raw[bodyStart:max(end, bodyStart)]
		cur.Body, cur.ExitCode, cur.Truncated = splitTrailer(region, prefix)
		if !ended {
			cur.Truncated = true
		}
		if crlf {
			cur.Body = bytes.TrimSuffix(cur.Body, []byte("\r"))
		}
		if cur.ExitCode != nil && cur.Limit > 0 {
			// The trailer travels inside head -c LIMIT+64: a trailer that exactly fills the
			// bound without its newline may have lost digits of its exit code.
			trailer := len(prefix) + len("rc=") + len(strconv.Itoa(*cur.ExitCode)) + 2
			if len(cur.Body)+trailer > cur.Limit+64 {
				cur.ExitCode, cur.Truncated = nil, true
			}
		}
		if cur.Limit > 0 && len(cur.Body) > cur.Limit+64 {
			// The probe never sends more than its declared bound (head -c LIMIT+64): a longer
			// body did not come from it. Keep the bound and say the section was cut, so one
			// host cannot make the parser hold more than the probe promised.
			cur.Body, cur.ExitCode, cur.Truncated = cur.Body[:cur.Limit+64], nil, true
		}
		c.Sections = append(c.Sections, *cur)
		cur = nil
	}

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
		if m, ok := bytes.CutPrefix(line, []byte(prefix)); ok {
			verb, arg, _ := strings.Cut(string(m), " ")
			switch verb {
			case "begin":
				closeAt(off-1, false)
				name, lim, _ := strings.Cut(arg, " ")
				s := &Section{Name: name}
				if v, ok := strings.CutPrefix(lim, "limit="); ok {
					if n, err := strconv.Atoi(v); err == nil && n >= 0 {
						s.Limit = n
					}
				}
				cur, bodyStart, crlf = s, next, lineCRLF
			case "end":
				if cur != nil && arg == cur.Name {
					closeAt(off-1, true)
				}
			case "done":
				closeAt(off-1, false)
				c.Done = true
			}
		}
		off = next
	}
	closeAt(len(raw), false)
	return c, nil
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
