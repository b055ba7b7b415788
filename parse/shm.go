package parse

import (
	"bytes"
	"cmp"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

const deletedSuffix = " (deleted)"

// ParseFDs reads a version 1 fds section: "PID FD TARGET" lines (TARGET may hold spaces and
// end in " (deleted)") and a last "denied N" line, the number of fd links that could not be
// read. denied is nil when that line is missing. A PID and FD listed twice is contested: both
// lines are left out and the pair returned in contested.
// parseDenied reads "N [PID...]" (at most 16 PIDs); nil when it is not that.
func parseDenied(v string) *FDsDenied {
	f := strings.Fields(v)
	if len(f) == 0 || len(f) > 17 {
		return nil
	}
	n, ok := atoiNonNeg(f[0])
	if !ok {
		return nil
	}
	d := &FDsDenied{Links: n}
	for _, w := range f[1:] {
		pid, ok := atoiNonNeg(w)
		if !ok || pid == 0 {
			return nil
		}
		d.PIDs = append(d.PIDs, pid)
	}
	return d
}

func ParseFDs(r io.Reader) (fds []OpenFD, denied *FDsDenied, contested []OpenFD, err error) {
	b, rerr := readInput(r)
	var errs errList
	errs.add(rerr)
	for i, l := range splitLines(b) {
		if l == "" {
			continue
		}
		if v, ok := strings.CutPrefix(l, "denied "); ok {
			n, ok := atoiNonNeg(v)
			if !ok {
				errs.addf("fds line %d: %s", i+1, q(l))
				continue
			}
			denied = &FDsDenied{Links: n}
			continue
		}
		pidText, rest, _ := strings.Cut(l, " ")
		fdText, target, _ := strings.Cut(rest, " ")
		pid, ok1 := atoiNonNeg(pidText)
		fd, ok2 := atoiNonNeg(fdText)
		if !ok1 || !ok2 || !strings.HasPrefix(target, "/") {
			errs.addf("fds line %d: want PID FD TARGET: %s", i+1, q(l))
			continue
		}
		t, deleted := strings.CutSuffix(target, deletedSuffix)
		fds = append(fds, OpenFD{PID: pid, FD: fd, Target: t, Deleted: deleted})
	}
	fds, contested = uniqueFDs(fds)
	return fds, denied, contested, errs.err()
}

// ParseFDsV2 reads a version 2 fds section: NUL-terminated "/proc/PID/fd\tFD\tTARGET"
// records (TARGET may hold any byte but NUL), then a "denied N [PID...]" line (the PIDs since
// the probe names them). Otherwise as ParseFDs.
func ParseFDsV2(r io.Reader) (fds []OpenFD, denied *FDsDenied, contested []OpenFD, err error) {
	b, rerr := readText(r)
	var errs errList
	errs.add(rerr)
	recs := strings.Split(b, "\x00")
	tail := strings.TrimSpace(recs[len(recs)-1])
	for i, rec := range recs[:len(recs)-1] {
		dir, rest, _ := strings.Cut(rec, "\t")
		fdText, target, ok := strings.Cut(rest, "\t")
		pidText, ok1 := strings.CutPrefix(dir, "/proc/")
		pidText, ok2 := strings.CutSuffix(pidText, "/fd")
		pid, ok3 := atoiNonNeg(pidText)
		fd, ok4 := atoiNonNeg(fdText)
		if !ok || !ok1 || !ok2 || !ok3 || !ok4 || !strings.HasPrefix(target, "/") {
			errs.addf("fds record %d: want /proc/PID/fd\\tFD\\tTARGET: %s", i+1, q(rec))
			continue
		}
		t, deleted := strings.CutSuffix(target, deletedSuffix)
		fds = append(fds, OpenFD{PID: pid, FD: fd, Target: strings.Clone(t), Deleted: deleted}) // not the section's text
	}
	if v, ok := strings.CutPrefix(tail, "denied "); ok {
		denied = parseDenied(v)
	}
	if denied == nil && tail != "" {
		errs.addf("fds: want a last line denied N [PID...]: %s", q(tail))
	}
	fds, contested = uniqueFDs(fds)
	return fds, denied, contested, errs.err()
}

// uniqueFDs drops every descriptor listed more than once (the kernel lists each PID and FD
// once) and returns one of each such pair in contested.
func uniqueFDs(fds []OpenFD) (unique, contested []OpenFD) {
	return onlyOnce(fds, func(f OpenFD) OpenFD { return OpenFD{PID: f.PID, FD: f.FD} })
}

// onlyOnce keeps, in order, the items whose key occurs once, and returns each key that occurs
// more often, once, in the order they first occur: contested data is trusted in no copy.
func onlyOnce[T any, K comparable](xs []T, key func(T) K) (once []T, contested []K) {
	n := make(map[K]int, len(xs))
	for _, x := range xs {
		n[key(x)]++
	}
	once = xs[:0]
	for _, x := range xs {
		switch k := key(x); n[k] {
		case 1:
			once = append(once, x)
		case 0:
		default:
			contested = append(contested, k)
			n[k] = 0
		}
	}
	return once, contested
}

// ParseMaps reads the maps section, grep -H output over /proc/PID/maps:
// "/proc/PID/maps:START-END PERMS OFFSET DEV INODE PATH". It returns, per process and
// /dev/shm file, the total size of the distinct address ranges mapped, sorted by PID and
// path. Mappings of other paths are skipped.
func ParseMaps(r io.Reader) ([]ShmMapping, error) {
	return parseMaps(r, false)
}

// ParseMapsV2 reads a version 2 maps section: as ParseMaps, and a "\\012" in a path, the
// kernel's escape for a newline in a file name, is read as that newline, so that the path
// matches the one the fds section holds. (The kernel leaves a backslash alone: a name that
// holds the four characters \\012 reads as one that holds a newline.)
func ParseMapsV2(r io.Reader) ([]ShmMapping, error) {
	return parseMaps(r, true)
}

func parseMaps(r io.Reader, unescape bool) ([]ShmMapping, error) {
	b, err := readText(r)
	var errs errList
	errs.add(err)
	// One line each: sorted by process, path and range, a process's mappings of one file are
	// adjacent and a range mapped twice counts once. Nothing is allocated per line but this.
	type mapping struct {
		pid        int
		path       string
		deleted    bool
		start, end uint64
		line       int
		dev, inode string
	}
	var ms []mapping
	var f []string
	for i, l := range splitText(b) {
		if l == "" {
			continue
		}
		rest, ok := strings.CutPrefix(l, "/proc/")
		pidText, rest, ok2 := strings.Cut(rest, "/maps:")
		pid, ok3 := atoiNonNeg(pidText)
		var path string
		f, path = fieldsThenRest(f[:0], rest, 5)
		if !ok || !ok2 || !ok3 || len(f) < 5 {
			errs.addf("maps line %d: %s", i+1, q(l))
			continue
		}
		startText, endText, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(startText, 16, 64)
		end, err2 := strconv.ParseUint(endText, 16, 64)
		if err1 != nil || err2 != nil || end < start {
			errs.addf("maps line %d: address range: %s", i+1, q(l))
			continue
		}
		if !strings.HasPrefix(path, "/dev/shm/") {
			continue // grep matched " /dev/shm/" inside some other path
		}
		p, deleted := strings.CutSuffix(path, deletedSuffix)
		if unescape {
			p = strings.ReplaceAll(p, `\012`, "\n")
		}
		ms = append(ms, mapping{pid, p, deleted, start, end, i, f[3], f[4]})
	}
	slices.SortFunc(ms, func(a, b mapping) int {
		return cmp.Or(cmp.Compare(a.pid, b.pid), strings.Compare(a.path, b.path), compareBool(a.deleted, b.deleted),
			cmp.Compare(a.start, b.start), cmp.Compare(a.end, b.end), cmp.Compare(a.line, b.line))
	})
	var out []ShmMapping
	first := 0 // line of the current file's first mapping
	for i, m := range ms {
		same := i > 0 && ms[i-1].pid == m.pid && ms[i-1].path == m.path && ms[i-1].deleted == m.deleted
		if !same {
			out = append(out, ShmMapping{PID: m.pid, Path: strings.Clone(m.path), Deleted: m.deleted})
			first = -1
		}
		o := &out[len(out)-1]
		if first < 0 || m.line < first {
			first, o.File = m.line, mapsFileID(m.dev, m.inode)
		}
		if same && ms[i-1].start == m.start && ms[i-1].end == m.end {
			continue // the same range, mapped again
		}
		size := int64(math.MaxInt64)
		if m.end-m.start < math.MaxInt64 {
			size = int64(m.end - m.start)
		}
		o.Bytes = addSat(o.Bytes, size)
	}
	return out, errs.err()
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// fieldsThenRest splits off n space-separated fields, appended to fields (a buffer to reuse),
// and returns them with the rest of the line, its leading spaces dropped: the path in a maps
// line may itself hold spaces.
func fieldsThenRest(fields []string, s string, n int) ([]string, string) {
	n += len(fields)
	for len(fields) < n {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return fields, ""
		}
		i := strings.IndexAny(s, " \t")
		if i < 0 {
			return append(fields, s), ""
		}
		fields = append(fields, s[:i])
		s = s[i:]
	}
	return fields, strings.TrimLeft(s, " \t")
}

// ParseFDStat reads a version 1 fdstat section: "BYTES /proc/PID/fd/FD" lines. stat's
// complaints about descriptors closed since the scan ("stat: cannot statx ...") are skipped.
// A descriptor listed twice is left out and returned in contested.
func ParseFDStat(r io.Reader) ([]FDSize, []FDSize, error) {
	return parseFDStat(r, false)
}

// ParseFDStatV2 reads a version 2 fdstat section: "NLINK BYTES /proc/PID/fd/FD" lines, NLINK
// the file's link count (0 when deleted). Otherwise as ParseFDStat.
func ParseFDStatV2(r io.Reader) ([]FDSize, []FDSize, error) {
	return parseFDStat(r, true)
}

func parseFDStat(r io.Reader, links bool) (sizes, contested []FDSize, err error) {
	b, rerr := readText(r)
	var errs errList
	errs.add(rerr)
	for i, l := range splitText(b) {
		if l == "" || strings.HasPrefix(l, "stat:") {
			continue
		}
		var nlink *int
		if links {
			linkText, rest, _ := strings.Cut(l, " ")
			v, ok := atoiNonNeg(linkText)
			if !ok {
				errs.addf("fdstat line %d: want NLINK BYTES /proc/PID/fd/FD: %s", i+1, q(l))
				continue
			}
			nlink, l = &v, rest
		}
		sizeText, path, _ := strings.Cut(l, " ")
		var file string
		if links && !strings.HasPrefix(path, "/proc/") {
			// Since the probe asks stat for them: "DEV INODE" (st_dev in hex) before the path.
			var ok bool
			if file, path, ok = fdstatFileID(path); !ok {
				errs.addf("fdstat line %d: want NLINK BYTES DEV INODE /proc/PID/fd/FD: %s", i+1, q(l))
				continue
			}
		}
		rest, ok := strings.CutPrefix(path, "/proc/")
		pidText, fdText, ok2 := strings.Cut(rest, "/fd/")
		size, ok3 := parseInt64NonNeg(sizeText)
		pid, ok4 := atoiNonNeg(pidText)
		fd, ok5 := atoiNonNeg(fdText)
		if !ok || !ok2 || !ok3 || !ok4 || !ok5 {
			errs.addf("fdstat line %d: want BYTES /proc/PID/fd/FD: %s", i+1, q(l))
			continue
		}
		sizes = append(sizes, FDSize{PID: pid, FD: fd, Bytes: size, Links: nlink, File: file})
	}
	sizes, contested = onlyOnce(sizes, func(z FDSize) FDSize { return FDSize{PID: z.PID, FD: z.FD} })
	return sizes, contested, errs.err()
}

// FileID names a file by its device (major and minor number) and inode: "MAJ:MIN:INODE",
// in decimal.
func FileID(major, minor, inode uint64) string {
	return strconv.FormatUint(major, 10) + ":" + strconv.FormatUint(minor, 10) + ":" + strconv.FormatUint(inode, 10)
}

// mapsFileID is the identity of a maps line's file from its DEV ("fd:01", hex) and INODE
// fields; "" when they are not numbers.
func mapsFileID(dev, inode string) string {
	majText, minText, ok := strings.Cut(dev, ":")
	major, err1 := strconv.ParseUint(majText, 16, 64)
	minor, err2 := strconv.ParseUint(minText, 16, 64)
	ino, err3 := strconv.ParseUint(inode, 10, 64)
	if !ok || err1 != nil || err2 != nil || err3 != nil {
		return ""
	}
	return FileID(major, minor, ino)
}

// fdstatFileID reads "DEV INODE PATH" of an fdstat line: stat's %D (st_dev in hex, as glibc
// encodes it) and %i. It returns the file's identity and the path.
func fdstatFileID(s string) (file, path string, ok bool) {
	devText, rest, ok1 := strings.Cut(s, " ")
	inoText, path, ok2 := strings.Cut(rest, " ")
	dev, err1 := strconv.ParseUint(devText, 16, 64)
	ino, err2 := strconv.ParseUint(inoText, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return "", "", false
	}
	return FileID(devMajor(dev), devMinor(dev), ino), path, true
}

// devMajor and devMinor are st_dev's major and minor numbers, as glibc encodes them.
func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff) }
func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^uint64(0xff) }

// DevID is a device's part of a FileID, "MAJ:MIN:", from stat's %D (st_dev in hex); ok is
// false when the text is not one.
func DevID(hex string) (string, bool) {
	dev, err := strconv.ParseUint(hex, 16, 64)
	if err != nil || hex == "" || len(hex) > 16 {
		return "", false
	}
	return strconv.FormatUint(devMajor(dev), 10) + ":" + strconv.FormatUint(devMinor(dev), 10) + ":", true
}

// ParseShmListing reads a version 1 shm-ls section: NUL-terminated
// "TYPE\tBYTES\tMTIME\tUID\tPATH" records from find -printf (PATH may hold tabs and
// newlines). find's own complaints, which arrive newline-terminated between records, are
// skipped. TreeBytes is filled: a directory's is the bytes of the regular files listed below
// it, a file's its own size. Holders are left to the caller, who knows the processes. A path
// listed twice is left out and returned in contested.
func ParseShmListing(r io.Reader) ([]ShmEntry, []string, error) {
	return parseShmListing(r, false)
}

// ParseShmListingV2 reads a version 2 shm-ls section: as ParseShmListing, but find's
// complaints are not in it (they could land inside a record), so every record must parse.
func ParseShmListingV2(r io.Reader) ([]ShmEntry, []string, error) {
	return parseShmListing(r, true)
}

func parseShmListing(r io.Reader, strict bool) ([]ShmEntry, []string, error) {
	b, err := readText(r)
	var errs errList
	errs.add(err)
	var out []ShmEntry
	recs := strings.Split(b, "\x00")
	for i, rec := range recs {
		// find's messages ("find: '/dev/shm/x': Permission denied\n") precede the next record.
		for !strict && !isShmRecordStart(rec) {
			j := strings.IndexByte(rec, '\n')
			if j < 0 {
				break
			}
			rec = rec[j+1:]
		}
		if len(strings.TrimSpace(rec)) == 0 {
			continue
		}
		if i == len(recs)-1 {
			errs.addf("shm-ls record %d: not NUL-terminated: %s", i+1, q(rec))
			continue
		}
		e, ok := parseShmRecord(rec)
		if !ok {
			errs.addf("shm-ls record %d: want TYPE\\tBYTES\\tMTIME\\tUID\\tPATH under /dev/shm, at most %d deep: %s", i+1, maxShmDepth, q(rec))
			continue
		}
		out = append(out, e)
	}
	out, contested := uniqueShmPaths(out)
	shmTreeBytes(out)
	return out, contested, errs.err()
}

// maxShmDepth bounds how many components a /dev/shm path may have below /dev/shm: the probe's
// find stops at 8. Walking a path's parents then costs at most this many lookups.
const maxShmDepth = 8

// uniqueShmPaths drops every path listed more than once (find lists each once) and returns
// those paths.
func uniqueShmPaths(entries []ShmEntry) ([]ShmEntry, []string) {
	return onlyOnce(entries, func(e ShmEntry) string { return e.Path })
}

func isShmRecordStart(rec string) bool {
	return len(rec) >= 2 && rec[1] == '\t'
}

func parseShmRecord(rec string) (ShmEntry, bool) {
	var f [5]string
	n := 0
	for ; n < 4; n++ {
		var ok bool
		if f[n], rec, ok = strings.Cut(rec, "\t"); !ok {
			break
		}
	}
	f[n] = rec
	if n != 4 || len(f[0]) != 1 || !strings.HasPrefix(f[4], "/") || strings.Count(f[4], "/") > maxShmDepth+2 {
		return ShmEntry{}, false
	}
	size, ok1 := parseInt64NonNeg(f[1])
	uid, ok2 := atoiNonNeg(f[3])
	mtime, ok3 := parseUnixTime(f[2])
	if !ok1 || !ok2 || !ok3 {
		return ShmEntry{}, false
	}
	return ShmEntry{Path: strings.Clone(f[4]), Type: f[0][0], Bytes: size, MTime: mtime, UID: uid}, true
}

// parseUnixTime reads find's %T@: seconds with an optional fraction, "1796031662.9366493600".
func parseUnixTime(s string) (time.Time, bool) {
	secText, frac, _ := strings.Cut(s, ".")
	sec, ok := parseInt64NonNeg(secText)
	if !ok || sec > 1<<40 {
		return time.Time{}, false
	}
	var nsec int64
	if frac != "" {
		if len(frac) > 9 {
			frac = frac[:9]
		}
		n, ok := parseInt64NonNeg(frac)
		if !ok {
			return time.Time{}, false
		}
		for i := len(frac); i < 9; i++ {
			n *= 10
		}
		nsec = n
	}
	return time.Unix(sec, nsec).UTC(), true
}

// shmTreeBytes fills TreeBytes: each regular file's size is added to itself and to every
// listed directory above it.
func shmTreeBytes(entries []ShmEntry) {
	dirs := map[string]int{}
	for i := range entries {
		entries[i].TreeBytes = 0
		if entries[i].Type == 'd' {
			if _, dup := dirs[entries[i].Path]; !dup {
				dirs[entries[i].Path] = i
			}
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Type != 'f' {
			continue
		}
		e.TreeBytes = e.Bytes
		for p, up := e.Path, 0; up <= maxShmDepth+2; up++ {
			j := strings.LastIndexByte(p, '/')
			if j <= 0 {
				break
			}
			p = p[:j]
			if d, ok := dirs[p]; ok {
				entries[d].TreeBytes = addSat(entries[d].TreeBytes, e.Bytes)
			}
		}
	}
}

// ParseDF reads POSIX df -P output for one file system and returns a Shm with only the sizes
// set. The block size comes from the header ("1024-blocks"); the mount point may hold spaces.
func ParseDF(r io.Reader) (Shm, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	var s Shm
	block := int64(1024)
	found := false
	for i, l := range splitLines(b) {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == "Filesystem" {
			if n, ok := strings.CutSuffix(f[1], "-blocks"); ok {
				if v, ok := parseInt64NonNeg(n); ok && v > 0 {
					block = v
				}
			}
			continue
		}
		// The capacity column ("12%") follows the three numbers; the file system name before
		// them and the mount point after may hold spaces.
		c := -1
		for j := 4; j < len(f); j++ {
			if v, ok := strings.CutSuffix(f[j], "%"); ok {
				if _, ok := atoiNonNeg(v); ok || v == "-" {
					c = j
					break
				}
			}
		}
		if c < 0 {
			if strings.TrimSpace(l) != "" && !strings.Contains(l, "df:") {
				errs.addf("df line %d: %s", i+1, q(l))
			}
			continue
		}
		total, ok1 := parseInt64NonNeg(f[c-3])
		used, ok2 := parseInt64NonNeg(f[c-2])
		avail, ok3 := parseInt64NonNeg(f[c-1])
		if !ok1 || !ok2 || !ok3 {
			errs.addf("df line %d: %s", i+1, q(l))
			continue
		}
		s.SizeBytes, s.UsedBytes, s.AvailBytes = mulSat(total, block), mulSat(used, block), mulSat(avail, block)
		found = true
	}
	if !found && len(errs.errs) == 0 && len(bytes.TrimSpace(b)) > 0 {
		errs.addf("df: no file system line: %s", q(string(b)))
	}
	return s, errs.err()
}

// mulSat multiplies two non-negative numbers, saturating instead of overflowing.
func mulSat(a, b int64) *int64 {
	if b != 0 && a > math.MaxInt64/b {
		return ptr(int64(math.MaxInt64))
	}
	return ptr(a * b)
}
