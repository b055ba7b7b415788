package report

import (
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
