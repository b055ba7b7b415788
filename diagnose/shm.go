package diagnose

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/gputriage/gputriage/parse"
)

const (
	// staleMinBytes: an unheld /dev/shm entry this large is reported as stale.
	staleMinBytes = gib
	// staleSegmentMinBytes: NCCL and PyTorch segments are scratch space that their owner
	// removes on a clean exit; one left behind this large is reported too.
	staleSegmentMinBytes = 64 * mib
	// shmFullWarnPct and shmFullErrorPct are df's Use% thresholds; shmLowFreeBytes is the
	// free space below which /dev/shm is reported however small it is.
	shmFullWarnPct  = 90
	shmFullErrorPct = 98
	shmLowFreeBytes = gib
	// shmTopConsumers is how many of the largest entries shm-full lists.
	shmTopConsumers = 5
)

// staleSegmentPrefixes are the runtimes' scratch segments held to the lower threshold.
var staleSegmentPrefixes = []string{"nccl-", "torch_"}

type shmIndex struct {
	entries  []*parse.ShmEntry
	children map[string][]*parse.ShmEntry
	newest   map[string]time.Time // path -> newest mtime of it and everything below
}

func (h *host) indexShm() shmIndex {
	ix := shmIndex{children: map[string][]*parse.ShmEntry{}, newest: map[string]time.Time{}}
	for i := range h.s.Shm.Entries {
		e := &h.s.Shm.Entries[i]
		if e.Path == "/dev/shm" || !strings.HasPrefix(e.Path, "/dev/shm/") {
			continue
		}
		ix.entries = append(ix.entries, e)
		parent := path.Dir(e.Path)
		ix.children[parent] = append(ix.children[parent], e)
		for p := e.Path; p != "/dev/shm" && p != "/" && p != "."; p = path.Dir(p) {
			if e.MTime.After(ix.newest[p]) {
				ix.newest[p] = e.MTime
			}
		}
	}
	return ix
}

func staleThreshold(p string) int64 {
	base := path.Base(p)
	for _, pre := range staleSegmentPrefixes {
		if strings.HasPrefix(base, pre) {
			return staleSegmentMinBytes
		}
	}
	return staleMinBytes
}

// staleEntries are the largest unheld subtrees: an entry nobody holds that reaches its
// threshold; below a held directory, its children are looked at instead.
func (ix shmIndex) staleEntries() []*parse.ShmEntry {
	var out []*parse.ShmEntry
	var walk func(dir string)
	walk = func(dir string) {
		for _, e := range ix.children[dir] {
			if e.Type != 'f' && e.Type != 'd' {
				continue
			}
			if len(e.Holders) > 0 {
				if e.Type == 'd' {
					walk(e.Path)
				}
				continue
			}
			if e.TreeBytes >= staleThreshold(e.Path) {
				out = append(out, e)
			}
		}
	}
	walk("/dev/shm")
	slices.SortFunc(out, func(a, b *parse.ShmEntry) int {
		return cmp.Or(cmp.Compare(b.TreeBytes, a.TreeBytes), strings.Compare(a.Path, b.Path))
	})
	return out
}

func (h *host) ownerName(uid int) string { return h.userName(&uid, "") }

func (h *host) describeEntry(ix shmIndex, e *parse.ShmEntry) string {
	kind := "file"
	if e.Type == 'd' {
		kind = "directory"
	}
	line := fmt.Sprintf("%s: %s, %s, owner %s", e.Path, kind, fmtBytes(e.TreeBytes), h.ownerName(e.UID))
	if t := ix.newest[e.Path]; !t.IsZero() {
		line += fmt.Sprintf(", last modified %s ago (%s)", FormatAge(h.ref.Sub(t)), fmtTime(t))
	}
	return line
}

// shmStaleFinding reports large /dev/shm entries that no live process maps or holds open.
func (h *host) shmStaleFinding() (Finding, bool) {
	if !h.s.Shm.Listed {
		return Finding{}, false
	}
	ix := h.indexShm()
	stale := ix.staleEntries()
	if len(stale) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeShmStale, Severity: Warning}
	var total int64
	for _, e := range stale {
		total += e.TreeBytes
		f.Files = append(f.Files, e.Path)
		f.Evidence = append(f.Evidence, h.describeEntry(ix, e))
		f.Fix = append(f.Fix, "rm -rf -- "+shellQuote(e.Path))
	}
	if h.s.Shm.Truncated {
		f.Evidence = append(f.Evidence, "the /dev/shm listing was cut at its bound: sizes may be low and entries missing")
	}
	f.Fix = append(f.Fix, "df -h /dev/shm")
	n := len(stale)
	f.Title = fmt.Sprintf("%s of /dev/shm in %d %s that no process uses", fmtBytes(total), n, plural(n, "entry", "entries"))
	var ex strings.Builder
	fmt.Fprintf(&ex, "/dev/shm is RAM (a tmpfs). No running process maps or holds open %s, so %s most likely left by finished or crashed jobs: "+
		"model weights copied there for fast loading, or NCCL and PyTorch shared-memory segments whose owner died. "+
		"%s %s of RAM and of /dev/shm space until removed. Check that no job is about to use %s (weights staged for the next launch are fine to keep), then remove %s. ",
		plural(n, "this entry", "these entries"), plural(n, "it is", "they are"), plural(n, "It holds", "They hold"), fmtBytes(total),
		plural(n, "it", "them"), plural(n, "it", "them"))
	if h.notRoot() {
		ex.WriteString("The probe did not run as root, so another user's process could still be using them unseen: rerun gputriage with --sudo to be sure. ")
	}
	ex.WriteString("Removing a file that a process still maps would not free its memory anyway (see shm-deleted-mapped).")
	f.Explanation = ex.String()
	return f, true
}

// shmFullFinding reports /dev/shm near full.
func (h *host) shmFullFinding() (Finding, bool) {
	sh := h.s.Shm
	if sh.SizeBytes == nil || *sh.SizeBytes <= 0 {
		return Finding{}, false
	}
	size := *sh.SizeBytes
	var used, avail int64
	switch {
	case sh.UsedBytes != nil && sh.AvailBytes != nil:
		used, avail = *sh.UsedBytes, *sh.AvailBytes
	case sh.UsedBytes != nil:
		used, avail = *sh.UsedBytes, max(size-*sh.UsedBytes, 0)
	case sh.AvailBytes != nil:
		used, avail = max(size-*sh.AvailBytes, 0), *sh.AvailBytes
	default:
		return Finding{}, false
	}
	pct := 0
	if used+avail > 0 {
		// df rounds Use% up.
		pct = int((used*100 + used + avail - 1) / (used + avail))
	}
	var sev Severity
	switch {
	case pct >= shmFullErrorPct:
		sev = Error
	case pct >= shmFullWarnPct || avail < shmLowFreeBytes:
		sev = Warning
	default:
		return Finding{}, false
	}
	f := Finding{Code: CodeShmFull, Severity: sev}
	if pct < shmFullWarnPct {
		f.Title = fmt.Sprintf("/dev/shm has only %s free (size %s)", fmtBytes(avail), fmtBytes(size))
	} else {
		f.Title = fmt.Sprintf("/dev/shm is %d%% full: %s free of %s", pct, fmtBytes(avail), fmtBytes(size))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("/dev/shm: size %s, used %s (%d%%), free %s", fmtBytes(size), fmtBytes(used), pct, fmtBytes(avail)))

	ix := h.indexShm()
	top := slices.Clone(ix.children["/dev/shm"])
	slices.SortFunc(top, func(a, b *parse.ShmEntry) int {
		return cmp.Or(cmp.Compare(b.TreeBytes, a.TreeBytes), strings.Compare(a.Path, b.Path))
	})
	for i, e := range top {
		if i == shmTopConsumers || e.TreeBytes == 0 {
			break
		}
		line := h.describeEntry(ix, e)
		if len(e.Holders) > 0 {
			line += ", used by " + fmtPIDs(sortedInts(e.Holders))
		} else {
			line += ", used by no process"
		}
		f.Evidence = append(f.Evidence, line)
		f.Files = append(f.Files, e.Path)
	}
	// Deleted files still count against /dev/shm until their holders exit.
	var delBytes int64
	var delPIDs []int
	seen := map[string]bool{}
	for i := range h.s.Processes {
		p := &h.s.Processes[i]
		counted := false
		for _, u := range p.Shm {
			if !u.Deleted {
				continue
			}
			if !counted {
				counted = true
				delPIDs = append(delPIDs, p.PID)
			}
			if u.Bytes != nil && !seen[u.Path] {
				seen[u.Path] = true
				delBytes += *u.Bytes
			}
		}
	}
	if len(delPIDs) > 0 {
		slices.Sort(delPIDs)
		f.PIDs = delPIDs
		f.Evidence = append(f.Evidence, fmt.Sprintf("deleted files still held by %s: %s (invisible to ls and du)", fmtPIDs(delPIDs), fmtBytes(delBytes)))
	}

	f.Explanation = "Programs that share memory between processes put it in /dev/shm, and fail when it is full. " +
		"NCCL's shared-memory transport fails with \"Call to posix_fallocate failed : No space left on device\" or " +
		"\"Error while creating shared memory segment\" (\"failed to extend /dev/shm\" in newer versions), so multi-GPU jobs die at startup; " +
		"PyTorch DataLoader workers die with \"bus error\" (\"This might be caused by insufficient shared memory (shm)\"); " +
		"vLLM and SGLang use it to pass data between their processes. "
	if size < 2*gib {
		f.Explanation += "This /dev/shm is small: a container's default (Docker gives 64 MiB) is too little for such jobs; start the container with --shm-size=16g (or more), or in Kubernetes mount an emptyDir with medium: Memory at /dev/shm. "
	}
	f.Explanation += "Free space by removing what no process uses and stopping processes that keep deleted files, or enlarge /dev/shm."
	for _, e := range ix.staleEntries() {
		f.Fix = append(f.Fix, "rm -rf -- "+shellQuote(e.Path))
	}
	for _, pid := range delPIDs {
		if gp := h.gpByPID[pid]; gp != nil {
			if _, bad := h.leftovers[pid]; bad {
				for _, c := range h.stopAction(gp).Steps {
					f.Fix = append(f.Fix, commandWords(c))
				}
			}
		}
	}
	f.Fix = append(f.Fix,
		h.sudo(nil)+"du -sh /dev/shm/* 2>/dev/null | sort -h | tail",
		h.sudo(nil)+"mount -o remount,size=<SIZE>G /dev/shm  # on the host; lasts until reboot, fstab makes it permanent",
		"df -h /dev/shm")
	return f, true
}

func sortedInts(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
