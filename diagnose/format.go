package diagnose

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
	gib = int64(1) << 30
)

// thousands writes n with comma thousands separators: 97252 -> "97,252".
func thousands(n int64) string {
	if n < 0 {
		return "-" + thousands(-n)
	}
	s := strconv.FormatInt(n, 10)
	if len(s) <= 3 {
		return s
	}
	var b strings.Builder
	pre := len(s) % 3
	if pre > 0 {
		b.WriteString(s[:pre])
	}
	for i := pre; i < len(s); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(s[i : i+3])
	}
	return b.String()
}

// fmtMiB is a MiB count as nvidia-smi would print it, with separators: "55,286 MiB".
func fmtMiB(n int64) string { return thousands(n) + " MiB" }

// fmtMiBGiB adds the GiB figure, which is what frameworks print: "41,958 MiB (40.97 GiB)".
func fmtMiBGiB(n int64) string {
	return fmt.Sprintf("%s (%.2f GiB)", fmtMiB(n), float64(n)/1024)
}

// fmtBytes picks the unit a reader expects for a size in bytes.
func fmtBytes(n int64) string {
	switch {
	case n >= gib:
		return fmt.Sprintf("%.2f GiB", float64(n)/float64(gib))
	case n >= mib:
		return fmtMiB(int64(math.Round(float64(n) / float64(mib))))
	case n >= kib:
		return thousands(int64(math.Round(float64(n)/float64(kib)))) + " KiB"
	default:
		return thousands(n) + " bytes"
	}
}

// FormatBytes formats a byte count in binary units with one decimal: "51.2 GiB".
func FormatBytes(v int64) string {
	const unit = 1024
	if v < unit {
		return fmt.Sprintf("%d B", v)
	}
	f := float64(v)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", f, u)
		}
	}
	return "" // unreachable
}

// FormatSize is a byte count for people, without a needless ".0": "4 MiB", "1.5 GiB".
func FormatSize(b int64) string {
	return strings.Replace(FormatBytes(b), ".0 ", " ", 1)
}

// FormatAge is a coarse duration for people: "45s", "12m", "2h13m", "3d04h". The report
// writes process ages with it too, so a finding and a table agree.
func FormatAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	default:
		return fmt.Sprintf("%dd%02dh", s/86400, s%86400/3600)
	}
}

// fmtTime is an exact UTC timestamp, the same on every machine that reads the capture.
func fmtTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

// fmtIndexes writes GPU indexes with runs collapsed: [0 1 2 3 5] -> "0-3, 5".
func fmtIndexes(xs []int) string {
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(xs[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(xs[i]), strconv.Itoa(xs[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}

// fmtGPUs is "GPU 3" or "GPUs 0-3, 5".
// FormatGPUs is "GPU 3" or "GPUs 0-3, 5": how findings, readiness and reports write GPU sets.
func FormatGPUs(xs []int) string {
	if len(xs) == 1 {
		return "GPU " + strconv.Itoa(xs[0])
	}
	return "GPUs " + fmtIndexes(xs)
}

// fmtPIDs is "PID 7" or "PIDs 7, 9".
func fmtPIDs(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	if len(xs) == 1 {
		return "PID " + s[0]
	}
	return "PIDs " + strings.Join(s, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// maxCmdline bounds a command line shown in a title or evidence line; the report shows argv
// in full elsewhere.
const maxCmdline = 200

// fmtArgv shows an argument vector as a shell would need it typed, so arguments with spaces
// stay distinguishable and control characters become visible escapes.
func fmtArgv(argv []string, truncated bool) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = shellWord(a)
	}
	s := strings.Join(parts, " ")
	if truncated {
		s += " …"
	}
	if r := []rune(s); len(r) > maxCmdline {
		s = string(r[:maxCmdline-1]) + "…"
	}
	return s
}

func isSafeShellByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		strings.IndexByte("@%+=:,./_-", c) >= 0
}

// shellWord quotes s for a POSIX shell only when it needs quoting.
func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	for i := 0; i < len(s); i++ {
		if !isSafeShellByte(s[i]) {
			return shellQuote(s)
		}
	}
	return s
}

// shellQuote always quotes: '...' when every byte is printable, else bash's $'...' with \xNN
// escapes, so a fix command never carries a raw control character or escape sequence.
func shellQuote(s string) string {
	printable := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\uFFFD' {
			printable = false
			break
		}
	}
	if printable {
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('\'')
	return b.String()
}
