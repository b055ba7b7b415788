package explain

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// doc is a paste split into lines, with ANSI escape sequences and carriage returns removed.
// lines are normalized for matching (see normalize) and a message a terminal or mailer wrapped
// in the middle of a phrase is joined back into one line; raw holds the same lines as pasted,
// for quoting.
type doc struct {
	lines []string
	raw   []string
}

func newDoc(text string) *doc {
	if len(text) > MaxInputBytes {
		text = text[:MaxInputBytes]
	}
	text = stripANSI(text)
	raw := strings.Split(text, "\n")
	d := &doc{lines: make([]string, 0, len(raw)), raw: make([]string, 0, len(raw))}
	for _, r := range raw {
		r = strings.TrimRight(r, "\r")
		l := normalize(r)
		if n := len(d.lines); n > 0 && straddles(d.lines[n-1], l) {
			d.lines[n-1] += " " + stripPrefix(l)
			d.raw[n-1] += " " + strings.TrimSpace(r)
			continue
		}
		d.lines = append(d.lines, l)
		d.raw = append(d.raw, r)
	}
	return d
}

// normalize makes a line match by meaning, not punctuation: typographic apostrophes and
// quotes (a chat client or word processor turns couldn't into couldn’t) become ASCII ones,
// and every run of spaces, tabs and no-break spaces becomes one space.
func normalize(l string) string {
	clean := true
	for i := 0; i < len(l); i++ {
		if l[i] >= 0x80 || l[i] == '\t' || (l[i] == ' ' && i+1 < len(l) && l[i+1] == ' ') {
			clean = false
			break
		}
	}
	if clean {
		return l
	}
	var b strings.Builder
	b.Grow(len(l))
	space := false
	for _, r := range l {
		switch r {
		case '\u2018', '\u2019', '\u201a', '\u201b', '\u2032', '\u02bc', '\u00b4', '`':
			r = '\''
		case '\u201c', '\u201d', '\u201e', '\u201f', '\u2033':
			r = '"'
		case '\t', '\u00a0', '\u2007', '\u202f':
			r = ' '
		}
		if r == ' ' && space {
			continue
		}
		space = r == ' '
		b.WriteRune(r)
	}
	return b.String()
}

// phrases are the fixed phrases the families start from. A paste wrapped inside one of them
// is joined back (straddles).
var phrases = []string{
	sglangAnchor, vllmAnchor, torchAnchor, "OutOfMemoryError",
	"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver",
	"Failed to initialize NVML", "Driver/library version mismatch", "NVML library version",
	"Unable to determine the device handle for GPU", "No devices were found",
	"API mismatch: the client has the version", "this kernel module has the version",
	"No NVIDIA graphics adapter probed", "The NVIDIA probe routine was not called for",
	"failed to extend /dev/shm/", "Error while creating shared memory segment", "unhandled system error",
	"Unexpected bus error encountered in worker", "insufficient shared memory (shm)",
	"dataloader's workers are out of shared memory", "Tried to allocate", "has a total capacity of",
	"this process has", "Of the allocated memory",
}

// phraseSplit is one of the phrases cut at one of its spaces: head ends a line, tail starts
// the next.
type phraseSplit struct{ head, tail string }

// splitsByLastByte indexes every phraseSplit by the last byte of its head, so a line is
// compared only with the splits that can end it.
var splitsByLastByte = func() (t [256][]phraseSplit) {
	for _, p := range phrases {
		for k := 1; k < len(p)-1; k++ {
			if p[k] == ' ' {
				t[p[k-1]] = append(t[p[k-1]], phraseSplit{p[:k], p[k+1:]})
			}
		}
	}
	return t
}()

// straddles reports whether one of the phrases was cut by a line break at a space: prev ends
// with the phrase's first words and next starts, after its log prefix, with the rest.
func straddles(prev, next string) bool {
	prev = strings.TrimRight(prev, " ")
	if prev == "" || next == "" {
		return false
	}
	splits := splitsByLastByte[prev[len(prev)-1]]
	if len(splits) == 0 {
		return false
	}
	next = stripPrefix(next)
	for _, sp := range splits {
		if strings.HasSuffix(prev, sp.head) && strings.HasPrefix(next, sp.tail) {
			return true
		}
	}
	return false
}

// stripANSI removes terminal escape sequences: CSI (ESC [ ... final byte), OSC (ESC ] ...
// BEL or ESC \), and two-byte escapes. Pasted logs carry colors; the phrases we match sit
// between them. One pass, linear.
func stripANSI(s string) string {
	if !strings.ContainsRune(s, 0x1b) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != 0x1b {
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case '[':
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j + 1
		case ']':
			j := i + 2
			for j < len(s) {
				if s[j] == 0x07 {
					j++
					break
				}
				if s[j] == 0x1b && j+1 < len(s) && s[j+1] == '\\' {
					j += 2
					break
				}
				j++
			}
			i = j
		default:
			i += 2
		}
	}
	return b.String()
}

// maxQuote caps a quoted line: one line of a paste can be megabytes long.
const maxQuote = 2000

// quote makes a log line safe to print: valid UTF-8, no control characters (a pasted log can
// carry sequences that would drive the reader's terminal), at most maxQuote bytes.
func quote(line string) string {
	line = strings.TrimSpace(line)
	cut := false
	if len(line) > maxQuote {
		line = line[:maxQuote]
		// Drop a rune the cut split, rather than show a replacement character.
		for k := 0; k < utf8.UTFMax && len(line) > 0 && !utf8.ValidString(line); k++ {
			line = line[:len(line)-1]
		}
		cut = true
	}
	line = strings.ToValidUTF8(line, "\uFFFD")
	line = strings.Map(func(r rune) rune {
		if r == '\t' {
			return ' '
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return '\uFFFD'
		}
		return r
	}, line)
	if cut {
		line += " […]"
	}
	return line
}

// lineSet collects the indexes of quoted lines, bounded by maxLines.
type lineSet struct {
	idx  []int
	seen map[int]bool
	more int
}

func (s *lineSet) add(i int) {
	if s.seen == nil {
		s.seen = map[int]bool{}
	}
	if s.seen[i] {
		return
	}
	s.seen[i] = true
	if len(s.idx) >= maxLines {
		s.more++
		return
	}
	s.idx = append(s.idx, i)
}

func (s *lineSet) first() int {
	if len(s.idx) == 0 {
		return -1
	}
	m := s.idx[0]
	for _, i := range s.idx {
		m = min(m, i)
	}
	return m
}

func (s *lineSet) quoted(d *doc) []string {
	out := make([]string, 0, len(s.idx))
	for _, i := range s.idx {
		out = append(out, quote(d.raw[i]))
	}
	return out
}

// maxWindow bounds the text one message is parsed from, so a megabyte-long line with many
// matches costs linear time, not quadratic.
const maxWindow = 4096

// window returns line i from byte off on (at most maxWindow bytes), followed by the
// continuation lines that start, after their log prefix, with one of conts — a message a
// terminal wrapped over several lines. Lines containing stop start a new message and end
// the window. used lists the line indexes taken.
func (d *doc) window(i, off int, conts []string, stop string) (text string, used []int) {
	text = clip(d.lines[i][off:], maxWindow)
	used = []int{i}
	for j := i + 1; j < len(d.lines) && j <= i+8 && len(text) < 4*maxWindow; j++ {
		l := stripPrefix(d.lines[j])
		if stop != "" && strings.Contains(l, stop) {
			break
		}
		// A line a terminal wrapped carries no log prefix of its own; a prefixed line that
		// starts in lower case is the logger's next record.
		ok := midSentence(text, l) && l == strings.TrimLeft(d.lines[j], " \t>")
		for _, c := range conts {
			if strings.HasPrefix(l, c) {
				ok = true
				break
			}
		}
		if !ok {
			break
		}
		text += " " + clip(l, maxWindow)
		used = append(used, j)
	}
	return text, used
}

// midSentence reports whether next carries on a sentence that text broke off: text does not
// end a sentence and next starts with a lower-case letter or a digit ("... GPU 0 has a total
// capacity of 14.75 GiB" / "of which 235.06 MiB is free").
func midSentence(text, next string) bool {
	text = strings.TrimRight(text, " ")
	if text == "" || next == "" || strings.ContainsRune(".:!?)", rune(text[len(text)-1])) {
		return false
	}
	c := next[0]
	return c >= 'a' && c <= 'z' || isDigit(c)
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// stripPrefix removes what loggers put before a message: leading space, then up to three
// bracketed tokens such as "[rank0]:", "(VllmWorker rank=0 pid=123)" or "[2025-03-09 14:40:46
// TP4]", each optionally followed by ':'.
func stripPrefix(l string) string {
	l = strings.TrimLeft(l, " \t>")
	for range 3 {
		if l == "" || (l[0] != '[' && l[0] != '(') {
			break
		}
		closer := byte(']')
		if l[0] == '(' {
			closer = ')'
		}
		j := strings.IndexByte(clip(l, 96), closer)
		if j < 0 {
			break
		}
		l = strings.TrimLeft(strings.TrimPrefix(l[j+1:], ":"), " \t")
	}
	return l
}

// rankIn finds the rank a log prefix names: SGLang's "TP3", PyTorch's "[rank3]:", vLLM's
// "rank=3" or "Worker_TP3". It looks only at prefix, the text before the message.
func rankIn(prefix string) *int {
	prefix = clip(prefix, 256)
	for _, key := range []string{"TP", "[rank", "rank="} {
		for from := 0; from < len(prefix); {
			j := strings.Index(prefix[from:], key)
			if j < 0 {
				break
			}
			j += from
			from = j + len(key)
			if key == "TP" && j > 0 && isLetter(prefix[j-1]) {
				continue
			}
			n, rest, ok := leadingInt(prefix[j+len(key):])
			if !ok || (rest != "" && isLetter(rest[0])) {
				continue
			}
			return &n
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// leadingInt reads a non-negative decimal integer of at most 9 digits at the start of s.
func leadingInt(s string) (int, string, bool) {
	j := 0
	for j < len(s) && j < 9 && isDigit(s[j]) {
		j++
	}
	if j == 0 || (j < len(s) && isDigit(s[j])) {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:j])
	if err != nil {
		return 0, s, false
	}
	return n, s[j:], true
}

// leadingFloat reads a decimal number at the start of s ("39.74761962890625", "1e-05"),
// also inside a numpy or torch wrapper ("np.float64(39.7)").
func leadingFloat(s string) (float64, string, bool) {
	s = strings.TrimLeft(s, " ")
	if k := strings.IndexByte(clip(s, 24), '('); k > 0 && isLetter(s[0]) {
		s = s[k+1:]
	}
	j := 0
	if j < len(s) && (s[j] == '-' || s[j] == '+') {
		j++
	}
	digits := 0
	for j < len(s) && j < 64 && (isDigit(s[j]) || s[j] == '.') {
		if isDigit(s[j]) {
			digits++
		}
		j++
	}
	if digits == 0 {
		return 0, s, false
	}
	if j+1 < len(s) && (s[j] == 'e' || s[j] == 'E') && (isDigit(s[j+1]) || ((s[j+1] == '-' || s[j+1] == '+') && j+2 < len(s) && isDigit(s[j+2]))) {
		j += 2
		for j < len(s) && j < 80 && isDigit(s[j]) {
			j++
		}
	}
	v, err := strconv.ParseFloat(s[:j], 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, s, false
	}
	rest := s[j:]
	if strings.HasPrefix(rest, ")") {
		rest = rest[1:]
	}
	return v, rest, true
}

// valueAfter finds key in s and reads the number that follows it.
func valueAfter(s, key string) (float64, bool) {
	j := strings.Index(s, key)
	if j < 0 {
		return 0, false
	}
	v, _, ok := leadingFloat(s[j+len(key):])
	return v, ok
}

var sizeUnits = []struct {
	name string
	gib  float64
}{
	{"bytes", 1.0 / (1 << 30)},
	{"byte", 1.0 / (1 << 30)},
	{"KiB", 1.0 / (1 << 20)},
	{"MiB", 1.0 / (1 << 10)},
	{"GiB", 1},
	{"TiB", 1 << 10},
}

// leadingSize reads a size as PyTorch formats it ("14.52 GiB", "0 bytes", "576.00 KiB") at the
// start of s and returns it in GiB.
func leadingSize(s string) (float64, string, bool) {
	v, rest, ok := leadingFloat(s)
	if !ok || v < 0 {
		return 0, s, false
	}
	rest = strings.TrimLeft(rest, " ")
	for _, u := range sizeUnits {
		if strings.HasPrefix(rest, u.name) {
			return v * u.gib, rest[len(u.name):], true
		}
	}
	return 0, s, false
}

// sizeAfter finds key in s and reads the size that follows it.
func sizeAfter(s, key string) (float64, bool) {
	j := strings.Index(s, key)
	if j < 0 {
		return 0, false
	}
	v, _, ok := leadingSize(s[j+len(key):])
	return v, ok
}

// gib formats a GiB value for text: "53.98 GiB".
func gib(v float64) string { return fmt.Sprintf("%.2f GiB", v) }

// mib formats a GiB value in MiB with thousands separators: "55,275 MiB".
func mib(v float64) string { return group(int64(math.Round(v*1024))) + " MiB" }

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// round2 rounds to two decimals, as the messages print their numbers.
func round2(v float64) float64 { return math.Round(v*100) / 100 }

// hitGroups folds one family's hits by key: the first hit of a key stands for the group and
// the lines of every hit with that key are quoted with it. At most maxPerFamily groups are
// kept; the lines of hits past that are counted as MoreLines of the last group.
type hitGroups[T any] struct {
	list     []*hitGroup[T]
	byKey    map[string]*hitGroup[T]
	overflow int
}

type hitGroup[T any] struct {
	hit   T
	lines lineSet
}

// add records the lines a hit rests on under key.
func (gs *hitGroups[T]) add(key string, hit T, used []int) {
	g := gs.byKey[key]
	if g == nil {
		if len(gs.list) >= maxPerFamily {
			gs.overflow++
			return
		}
		if gs.byKey == nil {
			gs.byKey = map[string]*hitGroup[T]{}
		}
		g = &hitGroup[T]{hit: hit}
		gs.byKey[key] = g
		gs.list = append(gs.list, g)
	}
	for _, u := range used {
		g.lines.add(u)
	}
}

// found explains every group, in the order their keys first appeared.
func (gs *hitGroups[T]) found(d *doc, explain func(T) Explanation) []found {
	out := make([]found, 0, len(gs.list))
	for k, g := range gs.list {
		ex := explain(g.hit)
		ex.Lines, ex.MoreLines = g.lines.quoted(d), g.lines.more
		if k == len(gs.list)-1 {
			ex.MoreLines += gs.overflow
		}
		out = append(out, found{first: g.lines.first(), ex: ex})
	}
	return out
}
