package report

import (
	"fmt"
	"html"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Sanitize makes a string that came from a remote host safe to show on a terminal or in a
// ticket. Nothing is removed silently: every byte that could move the cursor, recolor the
// screen, reorder text or hide itself is replaced by a visible escape, so the reader sees that
// it was there.
//
//   - ESC and the other C0 controls, DEL: \x1b, \x00, \x7f; newline, carriage return and tab
//     as \n, \r and \t. An escape sequence (CSI, OSC) loses its ESC (and its BEL or ST
//     terminator), which leaves harmless printable text such as \x1b[31m.
//   - C1 controls (U+0080–U+009F, among them the one-rune CSI U+009B): \u009b.
//   - Format characters (Unicode category Cf: bidi overrides and isolates U+202A–U+202E and
//     U+2066–U+2069, marks U+200E, U+200F, U+061C, zero-width U+200B–U+200D, U+2060, U+FEFF,
//     soft hyphen, tag characters) and the line and paragraph separators U+2028, U+2029:
//     \u202e, or \U000e0041 above U+FFFF.
//   - Bytes that are not valid UTF-8: \xff.
//
// A backslash already in s is kept as it is, so a literal "\x1b" typed on the remote side looks
// like an escaped ESC; it is equally harmless. The result is valid UTF-8 and Sanitize is
// idempotent.
func Sanitize(s string) string {
	return sanitize(s, false)
}

// sanitizeBlock is Sanitize for multi-line text shown verbatim (a raw capture in a code
// block): newlines and tabs stay real, everything else is escaped as in Sanitize.
func sanitizeBlock(s string) string {
	return sanitize(s, true)
}

func sanitize(s string, block bool) string {
	if isClean(s, block) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			fmt.Fprintf(&b, `\x%02x`, s[i])
			i++
			continue
		}
		i += size
		switch {
		case block && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unsafeRune(r) && r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		case unsafeRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// isClean reports whether s needs no escaping; most strings are plain ASCII.
func isClean(s string, block bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanUnicode(s[i:], block)
		}
		if c < 0x20 || c == 0x7f {
			if block && (c == '\n' || c == '\t') {
				continue
			}
			return false
		}
	}
	return true
}

func cleanUnicode(s string, block bool) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return false
		}
		i += size
		if block && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || unsafeRune(r) {
			return false
		}
	}
	return true
}

// unsafeRune reports runes above ASCII that a terminal or renderer would act on or hide.
func unsafeRune(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r)
}

// mdText sanitizes s and escapes it for Markdown (GitHub-flavored) inline text and table
// cells: it backslash-escapes the punctuation that starts emphasis, code, links,
// strikethrough, math and table cells, and turns <, > and & into entities so no HTML or
// autolink survives. A word GitHub would turn into a link (linkable) is shown as a code span
// instead, where nothing links: no escaping can stop GFM's autolinks (it finds
// "alice\@example.com" after unescaping) or GitHub's @mentions and #123 references (found in
// the rendered HTML's text, outside code).
func mdText(s string) string {
	s = Sanitize(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for len(s) > 0 {
		if w := s[:wordEnd(s)]; linkable(w) {
			// A word holds no backtick and no |, the one character a table cell splits on
			// even inside a code span.
			b.WriteString("`" + w + "`")
			s = s[len(w):]
			continue
		}
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch r {
		case '\\', '`', '*', '_', '[', ']', '~', '$', '|':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wordEnd is the length of the word s starts with: up to a space, backtick or |; 0 when s
// starts with one of them.
func wordEnd(s string) int {
	if i := strings.IndexAny(s, " `|"); i >= 0 {
		return i
	}
	return len(s)
}

// linkable reports whether GitHub could turn a word into a link: a URL (scheme://, www.), an
// email address or @mention (any @), or an issue reference (# and a digit).
func linkable(w string) bool {
	if strings.Contains(w, "@") || strings.Contains(w, "://") {
		return true
	}
	for i := 0; i+3 < len(w); i++ {
		if lower(w[i]) == 'w' && hasPrefixFold(w[i:], "www.") {
			return true
		}
	}
	for i := 0; i+1 < len(w); i++ {
		if w[i] == '#' && w[i+1] >= '0' && w[i+1] <= '9' {
			return true
		}
	}
	return false
}

// htmlText is html.EscapeString for remote text inside our own HTML (a <summary>), with a
// linkable word in <code>, where GitHub finds no @mention or #reference.
func htmlText(s string) string {
	var b strings.Builder
	for _, w := range strings.SplitAfter(s, " ") {
		word := strings.TrimSuffix(w, " ")
		if linkable(word) {
			b.WriteString("<code>" + html.EscapeString(word) + "</code>" + w[len(word):])
		} else {
			b.WriteString(html.EscapeString(w))
		}
	}
	return b.String()
}

// mdLine is mdText for text that starts a line or a list item, where a leading #, -, +, =
// or "1." would make a heading, a list or a setext underline. Leading spaces are dropped:
// four of them would start a code block.
func mdLine(s string) string {
	s = mdText(strings.TrimLeft(s, " "))
	if s == "" {
		return s
	}
	switch s[0] {
	case '#', '+', '-', '=':
		return "\\" + s
	}
	i := 0
	for i < len(s) && i < 10 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i > 0 && i < len(s) && (s[i] == '.' || s[i] == ')') {
		return s[:i] + "\\" + s[i:]
	}
	return s
}

// fence returns a backtick fence longer than any run of backticks in body, so nothing in body
// can close the code block early.
func fence(body string) string {
	longest, run := 0, 0
	for i := 0; i < len(body); i++ {
		if body[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat("`", max(3, longest+1))
}

// messageLines writes a multi-line remote message (nvidia-smi's, say) on one line, its lines
// separated by " / ", each made safe by esc, rather than showing its newlines as "\n".
func messageLines(msg string, esc func(string) string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, esc(l))
		}
	}
	return strings.Join(parts, " / ")
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix p, in any case.
func hasPrefixFold[T ~string | ~[]byte](s T, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if lower(s[i]) != p[i] {
			return false
		}
	}
	return true
}
