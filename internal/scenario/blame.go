package scenario

import (
	"fmt"
	"regexp"
	"strings"
)

// Innocents are what a staged situation must never blame: PIDs of healthy processes and names
// of units, containers and jobs that did nothing wrong, matched as whole tokens; and command
// patterns that must never be suggested (e.g. stopping the system's sshd.service).
type Innocents struct {
	PIDs  []int
	Names []string
	// Commands are regular expressions no line of the report may match.
	Commands []*regexp.Regexp
}

// Blamed returns every unit of text (sentence, bullet or command; see Units) that names an
// innocent, each with what it named. A unit that calls what it names healthy is not blame:
// the memory-imbalance finding must name healthy holders as healthy.
func (in Innocents) Blamed(units ...string) []string {
	var out []string
	tokens := make([]string, 0, len(in.PIDs)+len(in.Names))
	for _, p := range in.PIDs {
		tokens = append(tokens, fmt.Sprint(p))
	}
	tokens = append(tokens, in.Names...)
	for _, u := range units {
		for _, re := range in.Commands {
			if re.MatchString(u) {
				out = append(out, fmt.Sprintf("%q matches forbidden %s", u, re))
			}
		}
		if strings.Contains(u, "healthy") {
			continue
		}
		for _, tok := range tokens {
			if HasToken(u, tok) {
				out = append(out, fmt.Sprintf("%q names innocent %q", u, tok))
			}
		}
	}
	return out
}

// Units splits text into sentences and lines: a line break ends a unit, and so does ". "
// (a sentence's end), so "PID 7 looks left over. PID 9 is healthy." is two units.
func Units(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, s := range strings.SplitAfter(line, ". ") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// HasToken reports whether tok occurs in s as a whole token: not inside a longer number or
// name. Letters, digits and "_@-" continue a token on either side; "." continues it only when
// a letter or digit follows (so "PID 42." names 42, and "42.5" does not).
func HasToken(s, tok string) bool {
	if tok == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(s[from:], tok)
		if i < 0 {
			return false
		}
		i += from
		j := i + len(tok)
		if !continuesBefore(s, i) && !continuesAfter(s, j) {
			return true
		}
		from = i + 1
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '@' || c == '-'
}

func continuesBefore(s string, i int) bool {
	if i == 0 {
		return false
	}
	c := s[i-1]
	return isNameByte(c) || c == '.'
}

func continuesAfter(s string, j int) bool {
	if j >= len(s) {
		return false
	}
	c := s[j]
	if c == '.' {
		return j+1 < len(s) && isNameByte(s[j+1]) && s[j+1] != '-'
	}
	return isNameByte(c)
}
