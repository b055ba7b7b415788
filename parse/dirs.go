package parse

import (
	"bytes"
	"io"
	"strconv"
	"strings"
)

// maxDirs bounds the directories kept for one path; the probe sends at most 32.
const maxDirs = 32

// addDir adds a "dir UID GID MODE DEV PATH" field's directory to dirs, for process pid: the
// probe's /proc/PID/root prefix is dropped from PATH. A malformed field, one past maxDirs or
// one of another process's root is skipped.
func addDir(dirs []DirInfo, pid int, val string) []DirInfo {
	f := strings.SplitN(val, " ", 5)
	if len(f) != 5 || len(dirs) >= maxDirs {
		return dirs
	}
	uid, ok1 := atoiNonNeg(f[0])
	gid, ok2 := atoiNonNeg(f[1])
	mode, err1 := strconv.ParseUint(f[2], 16, 32)
	dev, err2 := strconv.ParseUint(f[3], 10, 64)
	root := "/proc/" + strconv.Itoa(pid) + "/root"
	p, ok3 := strings.CutPrefix(f[4], root)
	if !ok1 || !ok2 || err1 != nil || err2 != nil || !ok3 || !strings.HasPrefix(p, "/") {
		return dirs
	}
	return append(dirs, DirInfo{Path: p, UID: uid, GID: gid, Mode: uint32(mode), Dev: dev})
}

// ParseShmDirs reads the shm-dirs section: NUL-terminated fields "file PID PATH", then
// "owner UID" and "dir ..." fields (addDir) of that file. Fields it does not know are skipped.
func ParseShmDirs(r io.Reader) ([]ShmDirs, error) {
	b, err := readInput(r)
	var out []ShmDirs
	for f := range bytes.SplitSeq(b, []byte{0}) {
		key, val, _ := strings.Cut(string(f), " ")
		n := len(out) - 1
		switch {
		case key == "file":
			pid, path, _ := strings.Cut(val, " ")
			if id, ok := atoiNonNeg(pid); ok && strings.HasPrefix(path, "/dev/shm/") {
				out = append(out, ShmDirs{PID: id, Path: path})
			}
		case n < 0:
		case key == "owner" && out[n].Owner == nil:
			if uid, ok := atoiNonNeg(val); ok {
				out[n].Owner = &uid
			}
		case key == "dir":
			out[n].Dirs = addDir(out[n].Dirs, out[n].PID, val)
		}
	}
	return out, err
}

// shmDirs reads the shm-dirs section into Snapshot.ShmDirs.
func (p *snapParser) shmDirs() {
	r, sec := p.body("shm-dirs", 0)
	if sec == nil {
		return
	}
	p.s.ShmDirsProbed = true
	dirs, err := ParseShmDirs(r)
	p.fail(sec, err)
	p.s.ShmDirs = dirs
}
