package explain

import (
	"fmt"
	"strconv"
	"strings"
)

// NCCL's shared-memory transport puts its buffers in files under /dev/shm. When it cannot
// create one it says, depending on the version:
//
//	NCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes
//	NCCL WARN Error while creating shared memory segment /dev/shm/nccl-UbzKZ9 (size 9637888)
//	include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
//	include/shm.h:27 NCCL WARN Call to shm_open failed : Permission denied
//
// and the framework above reports "NCCL error ...: unhandled system error".

type ncclShm struct {
	lines      lineSet
	support    []int // "unhandled system error" lines, quoted only when a shm line is found
	noSpace    bool
	denied     bool
	otherCause string
	segment    string
	sizeBytes  int64
	pid, dev   *int // from NCCL's log prefix, "HOST:PID:TID [DEV]"
}

func explainNCCLShm(d *doc) []found {
	var n ncclShm
	hit := false
	for i, l := range d.lines {
		if !strings.Contains(l, "NCCL") && !strings.Contains(l, "nccl") {
			continue
		}
		if strings.Contains(l, "unhandled system error") {
			if len(n.support) < maxLines {
				n.support = append(n.support, i)
			}
			continue
		}
		if n.parse(l) {
			hit = true
			n.lines.add(i)
			if n.pid == nil && n.dev == nil {
				n.pid, n.dev = ncclPrefix(l)
			}
		}
	}
	if !hit {
		return nil
	}
	for _, i := range n.support {
		n.lines.add(i)
	}
	return []found{{first: n.lines.first(), ex: n.explanation(d)}}
}

// parse reads one line; it reports whether the line is one of NCCL's /dev/shm failures.
func (n *ncclShm) parse(l string) bool {
	if j := strings.Index(l, "failed to extend /dev/shm/"); j >= 0 {
		n.noSpace = true
		name, rest := token(l[j+len("failed to extend /dev/shm/"):])
		n.setSegment(name)
		if k := strings.Index(rest, " to "); k >= 0 {
			if v, _, ok := leadingFloat(rest[k+4:]); ok && n.sizeBytes == 0 {
				n.sizeBytes = int64(v)
			}
		}
		return true
	}
	if j := strings.Index(l, "Error while creating shared memory segment "); j >= 0 {
		name, rest := token(l[j+len("Error while creating shared memory segment "):])
		n.setSegment(strings.TrimPrefix(name, "/dev/shm/"))
		if v, ok := valueAfter(rest, "(size "); ok && n.sizeBytes == 0 {
			n.sizeBytes = int64(v)
		}
		return true
	}
	for _, call := range []string{"posix_fallocate failed", "shm_open failed", "ftruncate failed", "mmap failed"} {
		j := strings.Index(l, call)
		if j < 0 || !strings.Contains(l[:j], "Call to ") {
			continue
		}
		cause := strings.TrimSpace(strings.TrimLeft(l[j+len(call):], " :"))
		switch {
		case strings.HasPrefix(cause, "No space left on device"):
			n.noSpace = true
		case strings.HasPrefix(cause, "Permission denied"):
			n.denied = true
		case cause != "" && n.otherCause == "":
			n.otherCause = quote(clip(cause, 120))
		}
		return true
	}
	return false
}

func (n *ncclShm) setSegment(name string) {
	if n.segment == "" {
		n.segment = quote(clip(name, 120))
	}
}

// ncclPrefix reads the prefix NCCL puts on its log lines: "HOST:PID:TID [DEV] ", or the
// older "[DEV] ", where DEV is the CUDA device (the process's own numbering).
func ncclPrefix(l string) (pid, dev *int) {
	l = strings.TrimLeft(l, " ")
	k := strings.Index(clip(l, 256), "[")
	if k < 0 {
		return nil, nil
	}
	if d, rest, ok := leadingInt(l[k+1:]); ok && strings.HasPrefix(rest, "] ") {
		dev = &d
	} else {
		return nil, nil
	}
	head := strings.TrimSpace(l[:k])
	if f := strings.Split(head, ":"); len(head) > 0 && !strings.Contains(head, " ") && len(f) >= 3 {
		if p, rest, ok := leadingInt(f[len(f)-2]); ok && rest == "" {
			pid = &p
		}
	}
	return pid, dev
}

// token splits s at its first space.
func token(s string) (string, string) {
	if k := strings.IndexByte(s, ' '); k >= 0 {
		return s[:k], s[k:]
	}
	return s, ""
}

func (n *ncclShm) explanation(d *doc) Explanation {
	ex := Explanation{
		Family:    FamilyNCCLShm,
		Title:     "NCCL could not create its shared-memory segment in /dev/shm",
		Lines:     n.lines.quoted(d),
		MoreLines: n.lines.more,
	}
	seg := "a shared-memory segment"
	if n.segment != "" {
		seg = "segment " + n.segment
	}
	if n.sizeBytes > 0 {
		seg += fmt.Sprintf(" (%s bytes, %s)", group(n.sizeBytes), size(float64(n.sizeBytes)/(1<<30)))
		ex.Numbers = append(ex.Numbers, Number{Name: "segment_size", Value: float64(n.sizeBytes), Unit: "bytes"})
	}
	if n.pid != nil {
		ex.Numbers = append(ex.Numbers, Number{Name: "pid", Value: float64(*n.pid), Unit: "pid"})
		seg += fmt.Sprintf(" for process %d", *n.pid)
	}
	if n.dev != nil {
		ex.Device = n.dev
		seg += fmt.Sprintf(" on its CUDA device %d", *n.dev)
	}
	lead := "NCCL passes data between the GPUs of one host through buffers in files under /dev/shm, and it could not create " + seg + ". "
	switch {
	case n.denied:
		ex.Variant = "permission-denied"
		ex.Meaning = lead + "The system said: permission denied. /dev/shm must be writable by every user (mode 1777, " +
			"drwxrwxrwt); a container runtime, sandbox or security policy (SELinux, AppArmor, seccomp) can also refuse it."
		ex.Next = []string{
			"ls -ld /dev/shm   # on HOST, inside the job's container: expect drwxrwxrwt",
			"df -h /dev/shm",
			"gputriage HOST",
		}
	default:
		ex.Variant = "no-space"
		if !n.noSpace && n.otherCause != "" {
			ex.Variant = "other"
			lead += "The system said: " + n.otherCause + ". "
		}
		ex.Meaning = lead + "/dev/shm is full or too small: a container gets 64 MiB there unless it was started with " +
			"--shm-size or --ipc=host, and on a host it fills up with the files of jobs that were killed before they " +
			"could clean up (NCCL's are named nccl-*)."
		ex.Next = []string{
			"df -h /dev/shm   # on HOST, inside the job's container if it runs in one",
			"ls -l /dev/shm   # stale nccl-* files of jobs that are gone",
			"gputriage HOST   # lists /dev/shm files and the processes that still map them",
			"# start the container with docker run --shm-size=1g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory at /dev/shm",
		}
	}
	ex.Notes = append(ex.Notes, "Remove a stale nccl-* file only when no running process maps it: gputriage shows which "+
		"ones are still in use. NCCL_SHM_DISABLE=1 avoids /dev/shm at a cost in speed; it hides the problem rather than fixing it.")
	return ex
}

// PyTorch's DataLoader workers hand batches to the main process through /dev/shm:
//
//	ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient
//	    shared memory (shm).
//	RuntimeError: DataLoader worker (pid 2479) is killed by signal: Bus error. It is possible
//	    that dataloader's workers are out of shared memory. Please try to raise your shared
//	    memory limit.
func explainDataLoader(d *doc) []found {
	var lines lineSet
	var pids []int
	for i, l := range d.lines {
		ok := strings.Contains(l, "Unexpected bus error encountered in worker") ||
			strings.Contains(l, "insufficient shared memory (shm)") ||
			(strings.Contains(l, "DataLoader worker") && strings.Contains(l, "Bus error")) ||
			strings.Contains(l, "dataloader's workers are out of shared memory")
		if !ok {
			continue
		}
		lines.add(i)
		pids = pidAfter(l, "DataLoader worker (pid ", pids)
	}
	if len(lines.idx) == 0 {
		return nil
	}
	ex := Explanation{
		Family:    FamilyDataLoaderBusError,
		Title:     "A PyTorch DataLoader worker died of a bus error: /dev/shm is full or too small",
		Lines:     lines.quoted(d),
		MoreLines: lines.more,
		Meaning: "DataLoader workers hand every batch to the training process through shared memory in /dev/shm. " +
			"When /dev/shm is full, writing to it kills the worker with SIGBUS (a bus error). A container gets 64 MiB " +
			"there unless it was started with --shm-size or --ipc=host; on a host, files that killed jobs left behind fill it.",
		Next: []string{
			"df -h /dev/shm   # on HOST, inside the job's container if it runs in one",
			"gputriage HOST   # lists /dev/shm files and the processes that still map them",
			"# start the container with docker run --shm-size=8g (or --ipc=host); on Kubernetes mount an emptyDir with medium: Memory at /dev/shm",
		},
		Notes: []string{"Fewer DataLoader workers (num_workers) or smaller batches need less /dev/shm; num_workers=0 " +
			"avoids it entirely but loads data in the training process, which is slower."},
	}
	for _, pid := range pids {
		ex.Numbers = append(ex.Numbers, Number{Name: "worker_pid", Value: float64(pid), Unit: "pid"})
	}
	if len(pids) > 0 {
		var s []string
		for _, p := range pids {
			s = append(s, strconv.Itoa(p))
		}
		if len(s) == 1 {
			ex.Meaning += " The worker that died had PID " + s[0] + "."
		} else {
			ex.Meaning += " The workers that died had PIDs " + strings.Join(s, ", ") + "."
		}
	}
	return []found{{first: lines.first(), ex: ex}}
}
