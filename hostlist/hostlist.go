// Package hostlist expands and folds pdsh/Slurm host lists: "gpu[01-16]",
// "node[1-4,7,10-12]", "rack[1-2]-gpu[01-04]", comma-separated lists, and user@host, host:port
// and user@[v6addr]:port targets. Fold is the inverse, like dshbak -c: "gpu[03,07-09]".
package hostlist

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxHosts is the most hosts one expansion may produce. A range beyond it is almost always a
// typo (gpu[1-100000]); it is refused with a usage error rather than swept.
const MaxHosts = 20000

// ErrSyntax is wrapped by every error of Expand.
var ErrSyntax = errors.New("bad host list")

// Target is one host as the user wrote it.
type Target struct {
	User string // "" when not given
	Host string // name, alias, IPv4 or IPv6 address (without brackets)
	Port int    // 0 when not given
}

// String writes the target back in the form the user would type.
func (t Target) String() string {
	h := t.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if t.Port != 0 {
		h += ":" + strconv.Itoa(t.Port)
	}
	if t.User != "" {
		h = t.User + "@" + h
	}
	return h
}

// Expand expands one argument (which may hold a comma-separated list) into targets, in order.
func Expand(arg string) ([]Target, error) {
	var out []Target
	for _, item := range splitTop(arg) {
		if item == "" {
			continue
		}
		ts, err := expandOne(item, MaxHosts-len(out))
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// ExpandAll expands every argument, drops duplicates (same user, host and port) keeping the
// first, and enforces MaxHosts over the whole list.
func ExpandAll(args []string) ([]Target, error) {
	seen := map[Target]bool{}
	var out []Target
	for _, a := range args {
		ts, err := Expand(a)
		if err != nil {
			return nil, err
		}
		for _, t := range ts {
			if seen[t] {
				continue
			}
			seen[t] = true
			out = append(out, t)
			if len(out) > MaxHosts {
				return nil, fmt.Errorf("%w: more than %d hosts", ErrSyntax, MaxHosts)
			}
		}
	}
	return out, nil
}

// splitTop splits on commas that are not inside brackets.
func splitTop(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
		case ']':
			if depth > 0 {
				depth--
			}
		case ',':
			if depth == 0 {
				parts = append(parts, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(parts, strings.TrimSpace(s[start:]))
}

func expandOne(item string, room int) ([]Target, error) {
	user := ""
	if i := strings.LastIndexByte(item, '@'); i >= 0 {
		user, item = item[:i], item[i+1:]
		if user == "" || strings.ContainsAny(user, "[]@ \t") {
			return nil, fmt.Errorf("%w: bad user in %q", ErrSyntax, user+"@"+item)
		}
	}
	// An IPv6 literal: [addr] or [addr]:port.
	if strings.HasPrefix(item, "[") {
		if end := strings.IndexByte(item, ']'); end > 0 && strings.Contains(item[1:end], ":") {
			t := Target{User: user, Host: item[1:end]}
			rest := item[end+1:]
			if rest != "" {
				if !strings.HasPrefix(rest, ":") {
					return nil, fmt.Errorf("%w: unexpected %q after [%s]", ErrSyntax, rest, t.Host)
				}
				p, err := parsePort(rest[1:], item)
				if err != nil {
					return nil, err
				}
				t.Port = p
			}
			return []Target{t}, nil
		}
	}
	port := 0
	if i := strings.LastIndexByte(item, ':'); i >= 0 && !strings.Contains(item[i:], "]") {
		if strings.Count(item, ":") > 1 {
			return []Target{{User: user, Host: item}}, nil // a bare IPv6 address
		}
		p, err := parsePort(item[i+1:], item)
		if err != nil {
			return nil, err
		}
		port, item = p, item[:i]
	}
	if item == "" {
		return nil, fmt.Errorf("%w: empty host name", ErrSyntax)
	}
	names, err := expandBrackets(item, room)
	if err != nil {
		return nil, err
	}
	out := make([]Target, len(names))
	for i, n := range names {
		out[i] = Target{User: user, Host: n, Port: port}
	}
	return out, nil
}

func parsePort(s, item string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("%w: bad port %q in %q", ErrSyntax, s, item)
	}
	return p, nil
}

// expandBrackets expands every [..] group of a name, left to right (a cartesian product).
func expandBrackets(s string, room int) ([]string, error) {
	open := strings.IndexByte(s, '[')
	if open < 0 {
		if strings.IndexByte(s, ']') >= 0 {
			return nil, fmt.Errorf("%w: %q has ']' without '['", ErrSyntax, s)
		}
		return []string{s}, nil
	}
	end := strings.IndexByte(s[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%w: %q has '[' without ']'", ErrSyntax, s)
	}
	end += open
	prefix, body, rest := s[:open], s[open+1:end], s[end+1:]
	items, err := expandRanges(body, room)
	if err != nil {
		return nil, fmt.Errorf("%w (in %q)", err, s)
	}
	tails, err := expandBrackets(rest, room)
	if err != nil {
		return nil, err
	}
	if len(items)*len(tails) > room {
		return nil, fmt.Errorf("%w: %q expands to more than %d hosts", ErrSyntax, s, MaxHosts)
	}
	out := make([]string, 0, len(items)*len(tails))
	for _, it := range items {
		for _, tl := range tails {
			out = append(out, prefix+it+tl)
		}
	}
	return out, nil
}

// expandRanges expands "1-4,7,10-12" keeping zero padding ("01-16" gives 01..16).
func expandRanges(body string, room int) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("%w: empty range []", ErrSyntax)
	}
	var out []string
	for _, part := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isDigits(lo) || (isRange && !isDigits(hi)) {
			return nil, fmt.Errorf("%w: bad range %q", ErrSyntax, part)
		}
		if !isRange {
			out = append(out, lo)
			continue
		}
		a, errA := strconv.Atoi(lo)
		b, errB := strconv.Atoi(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("%w: bad range %q", ErrSyntax, part)
		}
		if b < a {
			return nil, fmt.Errorf("%w: range %q runs backwards", ErrSyntax, part)
		}
		if b-a+1 > room-len(out) {
			return nil, fmt.Errorf("%w: range %q is more than %d hosts", ErrSyntax, part, MaxHosts)
		}
		width := 0
		if len(lo) > 1 && lo[0] == '0' {
			width = len(lo)
		}
		for n := a; n <= b; n++ {
			out = append(out, fmt.Sprintf("%0*d", width, n))
		}
	}
	return out, nil
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
