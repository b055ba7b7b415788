//go:build linux

package nodecheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Bounds of the gate's look at /proc and /dev/shm: past any of them it doubts (the probe
// then runs, with its own bounds), so that no node can make node-check's cheap path slow.
const (
	idleMaxPIDs       = 1 << 16
	idleMaxFDs        = 1 << 18
	idleMaxMapsBytes  = 256 << 20
	idleMaxShmEntries = 1 << 14
	idleMaxDeleted    = 16 // deleted /dev/shm files kept: any one is doubt
	idleMaxDevices    = 1 << 12
)

// idleNodeFacts reads, for IdleGate, every process's fds on /dev/nvidia* and on
// deleted /dev/shm files and its mappings of those (what the probe's fds and maps sections
// read), and /dev/shm's numbers and files (its shm-df and shm-ls). It must run as root: it
// has to see every process, as the probe does.
func idleNodeFacts(ctx context.Context, f *IdleFacts) {
	if os.Geteuid() != 0 {
		f.Unseen = append(f.Unseen, "not root: other users' processes cannot be seen")
		return
	}
	if err := scanProcs(ctx, f); err != nil {
		f.Unseen = append(f.Unseen, err.Error())
	}
	idleShm(f)
}

// procScan is the state of one scan of /proc.
type procScan struct {
	f          *IdleFacts
	fds, maps  int
	link, dent []byte
	mapsBuf    []byte
	// devices are the (PID, device) pairs seen: a driver helper holds each device many times.
	devices map[pidTarget]bool
	// holders are the processes holding devices, named once each.
	holders map[int]IdleDevice
}

type pidTarget struct {
	pid    int
	target string
}

// scanProcs looks at every process /proc lists: its fd links and its maps.
func scanProcs(ctx context.Context, f *IdleFacts) error {
	d, err := os.Open("/proc")
	if err != nil {
		return fmt.Errorf("reading /proc: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("reading /proc: %w", err)
	}
	sc := &procScan{f: f, link: make([]byte, 8192), dent: make([]byte, 16384), mapsBuf: make([]byte, 256<<10),
		devices: map[pidTarget]bool{}, holders: map[int]IdleDevice{}}
	n := 0
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		if n++; n > idleMaxPIDs {
			return fmt.Errorf("more than %d processes", idleMaxPIDs)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("/proc not scanned in time: %w", err)
		}
		if err := sc.fdLinks(pid); err != nil {
			return err
		}
		if err := sc.mapsOf(pid); err != nil {
			return err
		}
	}
	return nil
}

// gone reports an error that says the process exited while it was read: it then holds
// nothing, for the probe as for the gate.
func gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH)
}

// fdLinks reads the targets of a process's fds (the probe's find -lname on /proc/PID/fd).
func (sc *procScan) fdLinks(pid int) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	dfd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", dir, err)
	}
	defer syscall.Close(dfd)
	for {
		n, err := syscall.ReadDirent(dfd, sc.dent)
		if gone(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", dir, err)
		}
		if n <= 0 {
			return nil
		}
		var fds []string
		_, _, fds = syscall.ParseDirent(sc.dent[:n], -1, fds)
		for _, fd := range fds {
			if sc.fds++; sc.fds > idleMaxFDs {
				return fmt.Errorf("more than %d open files", idleMaxFDs)
			}
			if err := sc.fdLink(pid, dir+"/"+fd); err != nil {
				return err
			}
		}
	}
}

// fdLink judges one fd link: a /dev/nvidia* device, or a deleted /dev/shm file.
func (sc *procScan) fdLink(pid int, path string) error {
	n, err := syscall.Readlink(path, sc.link)
	if gone(err) {
		return nil
	}
	if err != nil || n >= len(sc.link) {
		return fmt.Errorf("reading %s: %v", path, err)
	}
	target := string(sc.link[:n])
	switch {
	case strings.HasPrefix(target, "/dev/nvidia"):
		key := pidTarget{pid, target}
		if sc.devices[key] {
			return nil
		}
		// Every holder must be judged: past the bound, one left out could be the culprit.
		if len(sc.f.Devices) >= idleMaxDevices {
			return fmt.Errorf("more than %d processes' device fds", idleMaxDevices)
		}
		sc.devices[key] = true
		d, named := sc.holders[pid]
		if !named {
			d = deviceUser(pid)
			sc.holders[pid] = d
		}
		d.Device = target
		sc.f.Devices = append(sc.f.Devices, d)
	case strings.HasPrefix(target, "/dev/shm/") && strings.HasSuffix(target, " (deleted)") && len(sc.f.DeletedShm) < idleMaxDeleted:
		sc.f.DeletedShm = append(sc.f.DeletedShm, IdleShmUse{PID: pid, Path: target})
	}
	return nil
}

// deviceUser names a process holding a device as the probe does: its comm, and the first
// argument of its command line, cut where the probe cuts it.
func deviceUser(pid int) IdleDevice {
	d := IdleDevice{PID: pid}
	p := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(p + "/comm")
	if err != nil {
		return d
	}
	d.Comm, d.Known = strings.TrimSuffix(string(comm), "\n"), true
	if f, err := os.Open(p + "/cmdline"); err == nil {
		b, _ := io.ReadAll(io.LimitReader(f, 65536))
		f.Close()
		if arg0, _, _ := bytes.Cut(b, []byte{0}); len(b) > 0 {
			d.Argv = []string{string(arg0)}
		}
	}
	return d
}

// mapsOf reads a process's maps for deleted /dev/shm files (the probe's grep ' /dev/shm/').
// The kernel writes a newline in a path as \012: every line is one mapping.
func (sc *procScan) mapsOf(pid int) error {
	path := "/proc/" + strconv.Itoa(pid) + "/maps"
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if gone(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	defer syscall.Close(fd)
	var partial []byte // a line cut by the buffer's end
	for {
		n, err := syscall.Read(fd, sc.mapsBuf)
		if gone(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if n <= 0 {
			return sc.mapsLine(pid, partial)
		}
		if sc.maps += n; sc.maps > idleMaxMapsBytes {
			return fmt.Errorf("more than %d MiB of /proc/PID/maps", idleMaxMapsBytes>>20)
		}
		chunk := append(partial, sc.mapsBuf[:n]...)
		for {
			line, rest, ok := bytes.Cut(chunk, []byte{'\n'})
			if !ok {
				partial = append([]byte(nil), chunk...)
				break
			}
			if err := sc.mapsLine(pid, line); err != nil {
				return err
			}
			chunk = rest
		}
	}
}

var shmInMaps = []byte(" /dev/shm/")

// mapsLine keeps a mapping of a deleted /dev/shm file.
func (sc *procScan) mapsLine(pid int, line []byte) error {
	i := bytes.Index(line, shmInMaps)
	if i < 0 || !bytes.HasSuffix(line, []byte(" (deleted)")) || len(sc.f.DeletedShm) >= idleMaxDeleted {
		return nil
	}
	sc.f.DeletedShm = append(sc.f.DeletedShm, IdleShmUse{PID: pid, Path: string(line[i+1:])})
	return nil
}

// idleShm reads /dev/shm's numbers as df -kP does (statfs, in whole KiB rounded up) and sums
// the sizes of its regular files as the probe's find lists them: one file system, 8 deep.
func idleShm(f *IdleFacts) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Frsize > 0 {
		kib := func(blocks uint64) *int64 {
			n := int64((blocks*uint64(st.Frsize) + 1023) / 1024 * 1024)
			return &n
		}
		f.ShmSizeBytes, f.ShmUsedBytes, f.ShmAvailBytes = kib(st.Blocks), kib(st.Blocks-st.Bfree), kib(st.Bavail)
	}
	var root syscall.Stat_t
	if err := syscall.Lstat("/dev/shm", &root); err != nil {
		return
	}
	w := shmWalk{dev: root.Dev}
	if err := w.walk("/dev/shm", 1); err != nil {
		f.Unseen = append(f.Unseen, err.Error())
		return
	}
	f.ShmFileBytes, f.ShmListed = w.bytes, true
}

// shmWalk sums the sizes of the regular files below a directory.
type shmWalk struct {
	dev     uint64
	entries int
	bytes   int64
}

// walk reads dir in batches: a user can fill a directory with millions of empty files (tmpfs
// bounds only their inodes), and the bound on entries must hold before they are all read.
func (w *shmWalk) walk(dir string, depth int) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	defer d.Close()
	for {
		names, err := d.Readdirnames(256)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing %s: %w", dir, err)
		}
		if err := w.entriesOf(dir, names, depth); err != nil {
			return err
		}
	}
}

// entriesOf sums one batch of dir's entries, and walks its subdirectories.
func (w *shmWalk) entriesOf(dir string, names []string, depth int) error {
	for _, name := range names {
		if w.entries++; w.entries > idleMaxShmEntries {
			return fmt.Errorf("more than %d entries under /dev/shm", idleMaxShmEntries)
		}
		p := dir + "/" + name
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			if gone(err) {
				continue
			}
			return fmt.Errorf("listing %s: %w", p, err)
		}
		switch st.Mode & syscall.S_IFMT {
		case syscall.S_IFREG:
			w.bytes += st.Size
		case syscall.S_IFDIR:
			if uint64(st.Dev) == w.dev && depth < 8 {
				if err := w.walk(p, depth+1); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
