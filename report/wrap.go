package report

import (
	"strings"
	"unicode/utf8"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// wrapWords breaks plain (sanitized, uncolored) text at spaces into lines of at most first
// cells (the first line) and rest cells (the others); a word longer than a line is split.
func wrapWords(text string, first, rest int) []string {
	limit, rest := max(first, 1), max(rest, 1)
	var out []string
	cur, curW := "", 0
	flush := func() {
		out = append(out, cur)
		cur, curW, limit = "", 0, rest
	}
	// Split at single spaces so that runs of spaces inside a value (an argument) survive; a
	// number and its unit stay one word.
	for _, word := range glueWords(strings.Split(text, " ")) {
		if word == "" {
			if curW > 0 && curW < limit {
				cur += " "
				curW++
			}
			continue
		}
		for word != "" {
			ww := lipgloss.Width(word)
			sep := min(curW, 1)
			if curW+sep+ww <= limit {
				cur += strings.Repeat(" ", sep) + word
				curW += sep + ww
				break
			}
			if curW > 0 {
				flush()
				continue
			}
			// A word longer than a whole line: cut it.
			head := ansi.Truncate(word, limit, "")
			if head == "" || !strings.HasPrefix(word, head) {
				_, n := utf8.DecodeRuneInString(word)
				head = word[:n]
			}
			cur, curW = head, lipgloss.Width(head)
			word = word[len(head):]
			flush()
		}
	}
	if curW > 0 || len(out) == 0 {
		out = append(out, cur)
	}
	return out
}

// units are the words that read as one with the number before them: "55,286 MiB", "4 MiB",
// "90 %". Wrapping never puts them at the start of a line after their number.
var units = map[string]bool{
	"B": true, "KiB": true, "MiB": true, "GiB": true, "TiB": true, "KB": true, "MB": true,
	"GB": true, "TB": true, "bytes": true, "%": true, "ms": true, "s": true,
}

// glueWords joins, with their space, the words wrapping must not part: a number and its unit
// ("55,286 MiB"), a product ("0.9 × 97,252"), and a GPU or PID and its number ("GPU 0").
func glueWords(words []string) []string {
	out := make([]string, 0, len(words))
	for i, w := range words {
		if i > 0 && w != "" && len(out) > 0 && out[len(out)-1] != "" && words[i-1] != "" &&
			glued(lastWord(out[len(out)-1]), w) {
			out[len(out)-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}

// lastWord is the part of a glued word after its last space.
func lastWord(s string) string {
	return s[strings.LastIndexByte(s, ' ')+1:]
}

// glued reports whether the space between words a and b must not break.
func glued(a, b string) bool {
	if a == "×" || b == "×" {
		return true
	}
	if endsWithDigit(a) && units[strings.TrimRight(b, ".,;:)]")] {
		return true
	}
	switch strings.TrimLeft(a, "([") {
	case "GPU", "GPUs", "PID", "PIDs":
		return b[0] >= '0' && b[0] <= '9'
	}
	return false
}

func endsWithDigit(s string) bool {
	return s != "" && s[len(s)-1] >= '0' && s[len(s)-1] <= '9'
}
