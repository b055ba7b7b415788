package report

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gputriage/gputriage/diagnose"
)

// Folding repeated items: a numbered series of files is one line in brace form, like the
// shell's, "/dev/shm/m/model-000{01..12}-of-00012.safetensors", with what the files share
// said once ("4 MiB each, 48 MiB in all").

// minSeries is the fewest files folded into one line: two are clearer listed.
const minSeries = 3

// pathShape splits a path into its text between digit runs (len(runs)+1 parts) and the runs.
func pathShape(p string) (texts, runs []string) {
	start, inDigits := 0, false
	for i := 0; i <= len(p); i++ {
		d := i < len(p) && p[i] >= '0' && p[i] <= '9'
		if i == len(p) || d != inDigits {
			if inDigits {
				runs = append(runs, p[start:i])
			} else {
				texts = append(texts, p[start:i])
			}
			start, inDigits = i, d
		}
	}
	if inDigits || len(texts) == len(runs) {
		texts = append(texts, "")
	}
	return texts, runs
}

// seriesKey is the identity of p's series when its digit run k varies: p with that run
// replaced by its width.
func seriesKey(texts, runs []string, k int) string {
	var b strings.Builder
	for i, t := range texts {
		b.WriteString(t)
		if i < len(runs) {
			if i == k {
				b.WriteString("\x00" + strconv.Itoa(len(runs[i])) + "\x00")
			} else {
				b.WriteString(runs[i])
			}
		}
	}
	return b.String()
}

// foldSeries groups items (paths, sanitized) into series that differ in one digit run of the
// same width, at least minSeries long, and returns each group's indexes into paths, in the
// order of their first member, with the folded text of each group.
func foldSeries(paths []string) (groups [][]int, texts []string) {
	done := make([]bool, len(paths))
	for i, p := range paths {
		if done[i] {
			continue
		}
		best, bestK := []int{i}, -1
		pt, pr := pathShape(p)
		for k := range pr {
			key := seriesKey(pt, pr, k)
			var members []int
			for j := i; j < len(paths); j++ {
				if done[j] {
					continue
				}
				jt, jr := pathShape(paths[j])
				if len(jr) == len(pr) && seriesKey(jt, jr, k) == key {
					members = append(members, j)
				}
			}
			if len(members) > len(best) {
				best, bestK = members, k
			}
		}
		if len(best) < minSeries {
			best, bestK = []int{i}, -1
		}
		for _, j := range best {
			done[j] = true
		}
		groups = append(groups, best)
		if bestK < 0 {
			texts = append(texts, p)
			continue
		}
		texts = append(texts, braceText(paths, best, pt, pr, bestK))
	}
	return groups, texts
}

// braceText writes a series in brace form: the shared digits outside the braces, the values
// inside as ranges of consecutive numbers ("{01..05,07}").
func braceText(paths []string, members []int, pt, pr []string, k int) string {
	vals := make([]string, len(members))
	for i, j := range members {
		_, r := pathShape(paths[j])
		vals[i] = r[k]
	}
	slices.Sort(vals) // equal widths: text order is number order
	vals = slices.Compact(vals)
	common := vals[0]
	for _, v := range vals[1:] {
		for !strings.HasPrefix(v, common) {
			common = common[:len(common)-1]
		}
	}
	common = common[:min(len(common), len(vals[0])-1)]
	var parts []string
	for i := 0; i < len(vals); {
		j := i
		for j+1 < len(vals) && consecutive(vals[j], vals[j+1]) {
			j++
		}
		if j == i {
			parts = append(parts, vals[i][len(common):])
		} else {
			parts = append(parts, vals[i][len(common):]+".."+vals[j][len(common):])
		}
		i = j + 1
	}
	var b strings.Builder
	for i, t := range pt {
		b.WriteString(t)
		if i < len(pr) {
			if i == k {
				b.WriteString(common + "{" + strings.Join(parts, ",") + "}")
			} else {
				b.WriteString(pr[i])
			}
		}
	}
	return b.String()
}

func consecutive(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	return err1 == nil && err2 == nil && y == x+1
}

// braceEscaper escapes the braces a name has of its own, as the shell does, so that a file
// named "model-{0001..0012}.bin" does not read as twelve files folded into one line.
var braceEscaper = strings.NewReplacer("{", `\{`, "}", `\}`)

// foldable is a path as a folded list shows it: sanitized, its own braces escaped.
func foldable(p string) string { return braceEscaper.Replace(Sanitize(p)) }

// foldPaths folds paths into series: one text per series or lone path, sanitized.
func foldPaths(paths []string) []string {
	san := make([]string, len(paths))
	for i, p := range paths {
		san[i] = foldable(p)
	}
	_, texts := foldSeries(san)
	return texts
}

// shmLines are a finding's /dev/shm files, series folded, sanitized: "/dev/shm/m/model-000
// {01..12}-of-00012.safetensors (deleted, mapped and open), 4 MiB each, 48 MiB in all". Files
// fold only with files kept the same way.
func shmLines(files []diagnose.ShmFile) []string {
	type class struct {
		state, owner string
		idx          []int
	}
	var classes []*class
	for i, f := range files {
		st, ow := diagnose.ShmState(f), Sanitize(f.Owner)
		var c *class
		for _, x := range classes {
			if x.state == st && x.owner == ow {
				c = x
			}
		}
		if c == nil {
			c = &class{state: st, owner: ow}
			classes = append(classes, c)
		}
		c.idx = append(c.idx, i)
	}
	var out []string
	for _, c := range classes {
		paths := make([]string, len(c.idx))
		for i, j := range c.idx {
			paths[i] = foldable(files[j].Path)
		}
		groups, texts := foldSeries(paths)
		for g, members := range groups {
			sub := make([]diagnose.ShmFile, len(members))
			for i, m := range members {
				sub[i] = files[c.idx[m]]
			}
			out = append(out, texts[g]+shmGroupTail(sub, c.state, c.owner))
		}
	}
	return out
}

// shmGroupTail says what the files of one line share: " (deleted, mapped and open), 4 MiB
// each, 48 MiB in all", with their owner and the oldest one's age when known.
func shmGroupTail(files []diagnose.ShmFile, state, owner string) string {
	var s string
	if state != "" {
		s = " (" + state + ")"
	}
	var sizes []string
	var total int64
	known, same := true, true
	for _, f := range files {
		if f.Bytes == nil {
			known = false
			continue
		}
		total += *f.Bytes
		if *f.Bytes != *files[0].Bytes {
			same = false
		}
	}
	switch {
	case !known:
	case len(files) == 1:
		sizes = append(sizes, diagnose.FormatSize(total))
	case same:
		sizes = append(sizes, diagnose.FormatSize(*files[0].Bytes)+" each", diagnose.FormatSize(total)+" in all")
	default:
		sizes = append(sizes, diagnose.FormatSize(total)+" in all")
	}
	if owner != "" {
		sizes = append(sizes, "owner "+owner)
	}
	var oldest *time.Duration
	for _, f := range files {
		if f.Age != nil && (oldest == nil || *f.Age > *oldest) {
			oldest = f.Age
		}
	}
	if oldest != nil {
		sizes = append(sizes, "unmodified for "+diagnose.FormatAge(*oldest))
	}
	if len(sizes) > 0 {
		s += ", " + strings.Join(sizes, ", ")
	}
	return s
}

// findingShm is the /dev/shm files f names: its typed Shm, or for a /dev/shm finding that
// has none yet (a code diagnose has not given typed facts), its Files as its processes keep
// them.
func findingShm(f diagnose.Finding, procs []diagnose.GPUProcess) []diagnose.ShmFile {
	if len(f.Shm) > 0 || !strings.HasPrefix(f.Code, "shm-") {
		return f.Shm
	}
	var out []diagnose.ShmFile
	for _, path := range f.Files {
		sf := diagnose.ShmFile{Path: path}
		for _, p := range procs {
			for _, u := range p.Shm {
				if u.Path == path {
					sf.Bytes, sf.Deleted = u.Bytes, u.Deleted
					sf.Mapped, sf.Open = sf.Mapped || u.Mapped, sf.Open || u.Open
				}
			}
		}
		out = append(out, sf)
	}
	return out
}
