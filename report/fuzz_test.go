package report

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
)

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		"", "python3 -m sglang.launch_server", osc, csiRed, rlo, invalid, "a\nb\tc",
		"\u009b\u200b\ufeff\U000e0041\u2028", "日本語", "\x00\x7f", "|`<>&#",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, fn := range []func(string) string{Sanitize, mdText, mdLine} {
			out := fn(in)
			if !utf8.ValidString(out) {
				t.Fatalf("%q: output %q is not valid UTF-8", in, out)
			}
			for _, r := range out {
				if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r) {
					t.Fatalf("%q: output %q holds %U", in, out, r)
				}
			}
		}
		s := Sanitize(in)
		if Sanitize(s) != s {
			t.Fatalf("Sanitize is not idempotent on %q", in)
		}
		block := sanitizeBlock(in)
		if strings.ContainsFunc(block, func(r rune) bool { return r != '\n' && r != '\t' && unsafeOrControl(r) }) {
			t.Fatalf("sanitizeBlock(%q) = %q holds a control", in, block)
		}
		if !utf8.ValidString(block) {
			t.Fatalf("sanitizeBlock(%q) is not valid UTF-8", in)
		}
		// The text layout must hold any sanitized value within its width.
		for _, l := range wrapWords(s, 10, 12) {
			if w := lipgloss.Width(l); w > 12 {
				t.Fatalf("wrapWords(%q) gave a line of %d cells: %q", s, w, l)
			}
		}
	})
}

func unsafeOrControl(r rune) bool {
	return r < 0x20 || r == 0x7f || unsafeRune(r)
}

// FuzzRedact checks that redaction never panics and that no registered name survives as a
// whole word.
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"alice@gpu03.corp.example:22", "/home/alice/x 10.0.0.1", "fe80::1%eth0 ::ffff:1.2.3.4",
		"GPU03-alice_x gpu030", "std::vector 12:00:03", "1.2.3.4.5", invalid + osc} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		r := &redactor{names: map[string]string{}, ips: map[netip.Addr]string{}}
		r.addHost("gpu03.corp.example")
		r.addUser("alice")
		out := r.str(in)
		for _, name := range []string{"gpu03", "alice", "corp.example"} {
			if r.str(out) != out {
				t.Fatalf("str is not idempotent: %q -> %q -> %q", in, out, r.str(out))
			}
			// Lower A-Z byte by byte: strings.ToLower turns an invalid byte into three, and the
			// offsets found in the lowered copy must hold in out.
			low := asciiLower(out)
			for i := 0; ; {
				j := strings.Index(low[i:], name)
				if j < 0 {
					break
				}
				a, b := i+j, i+j+len(name)
				if (a == 0 || !isWordByte(out[a-1])) && (b == len(out) || !isWordByte(out[b])) {
					t.Fatalf("%q survives in %q (from %q)", name, out, in)
				}
				i = a + 1
			}
		}
	})
}

// asciiLower lowers A-Z byte by byte, leaving every other byte, valid UTF-8 or not, as it is.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// FuzzMaskCapture: masking a raw capture never panics, and masking twice changes nothing
// more.
func FuzzMaskCapture(f *testing.F) {
	f.Add([]byte("@@gputriage n begin fds limit=9\nL3Byb2MvMS9mZAkzCS9kZXYvc2htL0hGX1RPS0VOPXNlY3JldA==\n@@gputriage n end fds\n"))
	f.Add([]byte("pid 1\x00cgroup 0::/\x00argv cHl0aG9uMwAtLWFwaS1rZXkAc2VjcmV0\n\x00cwd /\n\x00end\x00"))
	f.Add([]byte("argv cHl0aG9uMwAtLWFwaS1rZXkAc2VjcmV0\nHF_TOKEN=x\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		once := maskCapture(raw)
		if twice := maskCapture(once); !bytes.Equal(twice, once) {
			t.Errorf("masking %q twice: %q, then %q", raw, once, twice)
		}
	})
}
