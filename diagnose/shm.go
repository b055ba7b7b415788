package diagnose

import (
	"cmp"
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
	if h.shmIx != nil {
		return *h.shmIx
	}
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
	h.shmIx = &ix
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

// shmFile is what a finding says of one /dev/shm entry.
func (h *host) shmFile(ix shmIndex, e *parse.ShmEntry) ShmFile {
	size := e.TreeBytes
	sf := ShmFile{Path: e.Path, Bytes: &size, Dir: e.Type == 'd', Owner: h.ownerName(e.UID), PIDs: sortedInts(e.Holders)}
	if t := ix.newest[e.Path]; !t.IsZero() {
		age := h.ref.Sub(t)
		sf.Modified, sf.Age = &t, &age
	}
	return sf
}

// removeAction removes an entry nobody uses, which gives its bytes back.
func removeAction(e *parse.ShmEntry) Action {
	return Action{Kind: ActionRemoveFiles, Target: e.Path, Frees: Impact{ShmBytes: e.TreeBytes},
		Steps: []Command{{Line: "rm -rf -- " + shellQuote(e.Path)}}}
}

// holdersUnknown reports whether the capture may not show every process that maps or holds
// open a /dev/shm file: its fds or maps section was cut at its bound or its step failed. Any
// user can map a file tens of thousands of times and so cut the maps section; an entry that
// the processes read after theirs hold then only looks unused, and removing it would pull a
// running server's weights from under it.
func (h *host) holdersUnknown() bool {
	for _, sec := range h.s.Sections {
		if (sec.Name == "fds" || sec.Name == "maps") && !sec.Complete() {
			return true
		}
	}
	return false
}

// shmStaleFinding reports large /dev/shm entries that no live process maps or holds open;
// none when the capture may not show every holder (holdersUnknown).
func (h *host) shmStaleFinding() (Finding, bool) {
	if !h.s.Shm.Listed || h.holdersUnknown() {
		return Finding{}, false
	}
	ix := h.indexShm()
	stale := ix.staleEntries()
	if len(stale) == 0 {
		return Finding{}, false
	}
	f := Finding{Code: CodeShmStale, Severity: Warning, Checks: []Command{verifyShm}}
	for _, e := range stale {
		f.Files = append(f.Files, e.Path)
		f.Shm = append(f.Shm, h.shmFile(ix, e))
		f.Actions = append(f.Actions, removeAction(e))
	}
	f.ShmTruncated, f.NotRoot = h.s.Shm.Truncated, h.notRoot()
	shmStaleWords(&f)
	return f, true
}

// shmUsage is /dev/shm's size and use, as df reports them.
type shmUsage struct {
	size, used, avail int64
	pct               int
}

// shmUsage reads df's numbers; false when they are unknown.
func (h *host) shmUsage() (shmUsage, bool) {
	sh := h.s.Shm
	if sh.SizeBytes == nil || *sh.SizeBytes <= 0 {
		return shmUsage{}, false
	}
	u := shmUsage{size: *sh.SizeBytes}
	switch {
	case sh.UsedBytes != nil && sh.AvailBytes != nil:
		u.used, u.avail = *sh.UsedBytes, *sh.AvailBytes
	case sh.UsedBytes != nil:
		u.used, u.avail = *sh.UsedBytes, max(u.size-*sh.UsedBytes, 0)
	case sh.AvailBytes != nil:
		u.used, u.avail = max(u.size-*sh.AvailBytes, 0), *sh.AvailBytes
	default:
		return shmUsage{}, false
	}
	if u.used+u.avail > 0 {
		// df rounds Use% up.
		u.pct = int((u.used*100 + u.used + u.avail - 1) / (u.used + u.avail))
	}
	return u, true
}

// shmFullFinding reports /dev/shm near full, who fills it, and what would free it.
func (h *host) shmFullFinding() (Finding, bool) {
	u, ok := h.shmUsage()
	if !ok {
		return Finding{}, false
	}
	f := Finding{Code: CodeShmFull, Checks: []Command{verifyShm}}
	switch {
	case u.pct >= shmFullErrorPct:
		f.Severity = Error
	case u.pct >= shmFullWarnPct || u.avail < shmLowFreeBytes:
		f.Severity = Warning
	default:
		return Finding{}, false
	}
	ix := h.indexShm()
	top := slices.Clone(ix.children["/dev/shm"])
	slices.SortFunc(top, func(a, b *parse.ShmEntry) int {
		return cmp.Or(cmp.Compare(b.TreeBytes, a.TreeBytes), strings.Compare(a.Path, b.Path))
	})
	for i, e := range top {
		if i == shmTopConsumers || e.TreeBytes == 0 {
			break
		}
		f.Shm = append(f.Shm, h.shmFile(ix, e))
		f.Files = append(f.Files, e.Path)
	}
	keep := h.deletedShmUse()
	f.PIDs = keep.blamed
	if !h.holdersUnknown() {
		for _, e := range ix.staleEntries() {
			f.Actions = append(f.Actions, removeAction(e))
		}
	}
	var ad actionAdder
	for _, pid := range f.PIDs {
		if _, bad := h.leftovers[pid]; bad && h.gpByPID[pid] != nil {
			f.Actions = ad.add(f.Actions, h.stopAction(h.gpByPID[pid]))
		}
	}
	sudo := h.sudo(nil)
	f.Actions = append(f.Actions,
		Action{Kind: ActionInspect, Target: "/dev/shm", Steps: []Command{{Line: sudo + "du -sh /dev/shm/* 2>/dev/null | sort -h | tail"}}},
		Action{Kind: ActionResizeShm, Target: "/dev/shm", Steps: []Command{{Line: sudo + "mount -o remount,size=<SIZE>G /dev/shm",
			Note: "on the host; lasts until reboot, fstab makes it permanent"}}})
	f.ShmUse = &ShmUse{SizeBytes: u.size, UsedBytes: u.used, AvailBytes: u.avail, Pct: u.pct,
		Blamed: keep.blamed, BlamedBytes: keep.blamedBytes, Healthy: keep.healthy, HealthyBytes: keep.healthyBytes}
	f.HoldersUnknown = h.holdersUnknown()
	for _, sf := range f.Shm {
		h.name(&f, sf.PIDs...)
	}
	shmFullWords(&f)
	return f, true
}

// shmKeeping is who keeps deleted /dev/shm files, and those files' bytes: the processes a
// finding may blame for them, and those that look healthy.
type shmKeeping struct {
	blamed, healthy           []int
	blamedBytes, healthyBytes int64
}

// onOtherShm reports whether u's file is known to be on another device than the probe's
// /dev/shm: a container's own /dev/shm, whose files fill not this one.
func (h *host) onOtherShm(u parse.ShmUse) bool {
	dev := h.s.Host.ShmDev
	return dev != "" && u.File != "" && !strings.HasPrefix(u.File, dev)
}

// deletedShmUse splits the processes that keep deleted /dev/shm files on this /dev/shm (any,
// transient too: all count against /dev/shm until their holders exit). Blamed are the leftovers and the
// processes whose deleted files look removed by hand while no running unit vouches for them
// (shm-deleted-mapped at warning); the others look healthy: a runtime's segments (NCCL's,
// PyTorch's) or the live service of a running unit, whose files anyone who may write their
// directory can delete. Any user can fill /dev/shm, so its being full must not make healthy
// work the culprit. A file's bytes count as blamed when any blamed process keeps it.
func (h *host) deletedShmUse() shmKeeping {
	var k shmKeeping
	size := map[string]int64{}
	blamedPath := map[string]bool{}
	for i := range h.s.Processes {
		p := &h.s.Processes[i]
		if p.Gone {
			continue // exited: its files are freed
		}
		var paths []string
		for _, u := range p.Shm {
			if !u.Deleted || h.onOtherShm(u) {
				continue
			}
			k := shmFileKey(u)
			paths = append(paths, k)
			if _, ok := size[k]; !ok && u.Bytes != nil {
				size[k] = *u.Bytes
			}
		}
		if len(paths) == 0 {
			continue
		}
		if !h.shmBlamed(p) {
			k.healthy = append(k.healthy, p.PID)
			continue
		}
		k.blamed = append(k.blamed, p.PID)
		for _, path := range paths {
			blamedPath[path] = true
		}
	}
	for path, n := range size {
		if blamedPath[path] {
			k.blamedBytes += n
		} else {
			k.healthyBytes += n
		}
	}
	slices.Sort(k.blamed)
	slices.Sort(k.healthy)
	return k
}

// shmBlamed reports whether p's deleted /dev/shm files are a fault of p's: it is a leftover,
// or it keeps deleted files that are not a runtime's segments and no running unit vouches for
// it (see shmDeletedFinding).
func (h *host) shmBlamed(p *parse.Process) bool {
	if _, bad := h.leftovers[p.PID]; bad {
		return true
	}
	if len(deletedShm(p)) == 0 {
		return false
	}
	gp := h.gpByPID[p.PID]
	if gp == nil {
		gp = h.plainProcess(p.PID)
	}
	_, served := h.servedUnit(gp)
	return !served
}

func sortedInts(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
