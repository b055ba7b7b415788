package diagnose

import (
	"fmt"
	"strings"
)

// Words of shm-stale and shm-full.

// shmEntryLine describes one /dev/shm entry: kind, size, owner and last change.
func shmEntryLine(sf ShmFile) string {
	kind := "file"
	if sf.Dir {
		kind = "directory"
	}
	var size int64
	if sf.Bytes != nil {
		size = *sf.Bytes
	}
	line := fmt.Sprintf("%s: %s, %s, owner %s", sf.Path, kind, fmtBytes(size), sf.Owner)
	if sf.Modified != nil && sf.Age != nil {
		line += fmt.Sprintf(", last modified %s ago (%s)", FormatAge(*sf.Age), fmtTime(*sf.Modified))
	}
	return line
}

// shmStaleWords composes a shm-stale finding's words from its facts.
func shmStaleWords(f *Finding) {
	var total int64
	for _, sf := range f.Shm {
		total += *sf.Bytes
		f.Evidence = append(f.Evidence, shmEntryLine(sf))
	}
	if f.ShmTruncated {
		f.Evidence = append(f.Evidence, "the /dev/shm listing was cut at its bound: sizes may be low and entries missing")
	}
	n := len(f.Shm)
	f.Title = fmt.Sprintf("%s of /dev/shm in %d %s that no process uses", fmtBytes(total), n, plural(n, "entry", "entries"))
	var ex strings.Builder
	fmt.Fprintf(&ex, "/dev/shm is RAM (a tmpfs). No running process maps or holds open %s, so %s most likely left by finished or crashed jobs: "+
		"model weights copied there for fast loading, or NCCL and PyTorch shared-memory segments whose owner died. "+
		"%s %s of RAM and of /dev/shm space until removed. Check that no job is about to use %s (weights staged for the next launch are fine to keep), then remove %s. ",
		plural(n, "this entry", "these entries"), plural(n, "it is", "they are"), plural(n, "It holds", "They hold"), fmtBytes(total),
		plural(n, "it", "them"), plural(n, "it", "them"))
	if f.NotRoot {
		ex.WriteString("The probe did not run as root, so another user's process could still be using them unseen: rerun gputriage with --sudo to be sure. ")
	}
	ex.WriteString("Removing a file that a process still maps would not free its memory anyway (see shm-deleted-mapped).")
	f.Explanation = ex.String()
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// shmFullWords composes a shm-full finding's words from its facts: /dev/shm's numbers and
// who keeps deleted files there (f.ShmUse), its largest entries with who uses them.
func shmFullWords(f *Finding) {
	u := f.ShmUse
	if u.Pct < shmFullWarnPct {
		f.Title = fmt.Sprintf("/dev/shm has only %s free (size %s)", fmtBytes(u.AvailBytes), fmtBytes(u.SizeBytes))
	} else {
		f.Title = fmt.Sprintf("/dev/shm is %d%% full: %s free of %s", u.Pct, fmtBytes(u.AvailBytes), fmtBytes(u.SizeBytes))
	}
	f.Evidence = append(f.Evidence, fmt.Sprintf("/dev/shm: size %s, used %s (%d%%), free %s", fmtBytes(u.SizeBytes), fmtBytes(u.UsedBytes), u.Pct, fmtBytes(u.AvailBytes)))
	for _, sf := range f.Shm {
		line := shmEntryLine(sf)
		switch {
		case len(sf.PIDs) > 0:
			line += ", used by " + holdersText(f, sf.PIDs)
		case f.HoldersUnknown:
			line += ", used by no process the probe saw (its view of open files and mappings was cut: see probe-limited)"
		default:
			line += ", used by no process"
		}
		f.Evidence = append(f.Evidence, line)
	}
	if len(u.Blamed) > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("deleted files still held by %s: %s (invisible to ls and du)", fmtPIDs(u.Blamed), fmtBytes(u.BlamedBytes)))
	}
	if len(u.Healthy) > 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("deleted files kept by work that looks healthy (a runtime's segments, a running service's files): %s, by %s",
			fmtBytes(u.HealthyBytes), fmtPIDs(u.Healthy)))
	}
	f.Explanation = "Programs that share memory between processes put it in /dev/shm, and fail when it is full. " +
		"NCCL's shared-memory transport fails with \"Call to posix_fallocate failed : No space left on device\" or " +
		"\"Error while creating shared memory segment\" (\"failed to extend /dev/shm\" in newer versions), so multi-GPU jobs die at startup; " +
		"PyTorch DataLoader workers die with \"bus error\" (\"This might be caused by insufficient shared memory (shm)\"); " +
		"vLLM and SGLang use it to pass data between their processes. "
	if u.SizeBytes < 2*gib {
		f.Explanation += "This /dev/shm is small: a container's default (Docker gives 64 MiB) is too little for such jobs; start the container with --shm-size=16g (or more), or in Kubernetes mount an emptyDir with medium: Memory at /dev/shm. "
	}
	f.Explanation += "Free space by removing what no process uses and stopping processes that keep deleted files, or enlarge /dev/shm."
	f.Fix = fixWords(f.Actions, 0, f.Checks)
}

// holdersText names the processes that use a /dev/shm entry, each GPU process with the
// verdict on it: a full /dev/shm is no fault of the healthy work whose files are there.
func holdersText(f *Finding, pids []int) string {
	var other, left, healthy []int
	for _, pid := range pids {
		switch f.named(pid).Verdict {
		case VerdictLeftover:
			left = append(left, pid)
		case "":
			other = append(other, pid)
		default:
			healthy = append(healthy, pid)
		}
	}
	var parts []string
	if len(other) > 0 {
		parts = append(parts, fmtPIDs(other))
	}
	if len(left) > 0 {
		parts = append(parts, fmtPIDs(left)+" (looks abandoned: see leftover-process)")
	}
	if len(healthy) > 0 {
		parts = append(parts, fmtPIDs(healthy)+" (GPU work that looks healthy)")
	}
	return strings.Join(parts, "; ")
}
