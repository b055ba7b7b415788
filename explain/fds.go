package explain

import (
	"slices"
	"strconv"
	"strings"
)

// explainFDsUnreadable explains gputriage's own note that fd links under /proc could not be
// read ("263 fd links under /proc could not be read", "293 fd links of PID 1 could not be
// read"), and the tools' refusals it stands for ("find: '/proc/1/fd/0': Permission denied",
// "ls: cannot read symbolic link '/proc/1/fd/3': Permission denied").
func explainFDsUnreadable(d *doc) []found {
	var lines lineSet
	var pids []int
	links := -1
	for i, l := range d.lines {
		note := strings.Contains(l, " could not be read") && (strings.Contains(l, "fd links under /proc") ||
			strings.Contains(l, " fd links of PID") || strings.Contains(l, " fd link of PID"))
		tool := strings.Contains(l, "/proc/") && strings.Contains(l, "/fd") && strings.Contains(l, "Permission denied")
		if !note && !tool {
			continue
		}
		lines.add(i)
		if note && links < 0 {
			links = countBefore(l, " fd link")
		}
		if tool {
			pids = pidAfter(l, "/proc/", pids)
		}
	}
	if len(lines.idx) == 0 {
		return nil
	}
	ex := Explanation{
		Family: FamilyFDsUnreadable,
		Title:  "fd links under /proc could not be read: processes using GPUs or /dev/shm may be unseen",
		Lines:  lines.quoted(d), MoreLines: lines.more,
		Meaning: "Reading another process's /proc/PID/fd links is a ptrace-mode read: the kernel allows it to the " +
			"process's own user, and to root by CAP_SYS_PTRACE, unless something above them refuses it. Not as root, " +
			"other users' processes are refused: rerun gputriage with --sudo. As root, the refusal comes from an LSM " +
			"policy (AppArmor, SELinux, Landlock from a sandboxed caller, a BPF LSM program), from the kernel guarding a " +
			"sandbox's or virtual machine's own agent (often PID 1 there), or from a user namespace root does not own; " +
			"/proc mounted with hidepid hides PIDs instead. A process that uses a GPU or a /dev/shm file among them is not seen.",
		Next: []string{
			"ls -l /proc/PID/fd; cat /proc/PID/status   # on HOST, as root: who it is and whether root may read it",
			"dmesg | tail; journalctl -k | grep -i -e denied -e apparmor -e avc   # an LSM's refusal",
			"findmnt -no OPTIONS /proc   # hidepid=",
			"gputriage HOST   # as root (--sudo), from the host's init namespaces, not a container",
		},
	}
	if links >= 0 {
		ex.Numbers = append(ex.Numbers, Number{Name: "links", Value: float64(links), Unit: "count"})
	}
	for _, pid := range pids {
		ex.Numbers = append(ex.Numbers, Number{Name: "pid", Value: float64(pid), Unit: "pid"})
	}
	if len(pids) > 0 {
		s := make([]string, len(pids))
		for i, p := range pids {
			s[i] = strconv.Itoa(p)
		}
		if len(s) == 1 {
			ex.Meaning += " The refused process is PID " + s[0] + "."
		} else {
			ex.Meaning += " The refused processes are PIDs " + strings.Join(s, ", ") + "."
		}
	}
	return []found{{first: lines.first(), ex: ex}}
}

// pidAfter adds to pids (at most 16, each once) the PID that follows marker in l, if any.
func pidAfter(l, marker string, pids []int) []int {
	j := strings.Index(l, marker)
	if j < 0 || len(pids) >= 16 {
		return pids
	}
	if pid, _, ok := leadingInt(l[j+len(marker):]); ok && !slices.Contains(pids, pid) {
		pids = append(pids, pid)
	}
	return pids
}

// countBefore is the number (thousands separated by commas or not) in the word before the
// first at in l, or -1.
func countBefore(l, at string) int {
	f := strings.Fields(l[:strings.Index(l, at)])
	if len(f) == 0 {
		return -1
	}
	n, rest, ok := leadingInt(strings.ReplaceAll(f[len(f)-1], ",", ""))
	if !ok || rest != "" {
		return -1
	}
	return n
}
