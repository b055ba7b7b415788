package parse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// sec64 builds a base64 section (fds) the way the probe's capsec64 prints it.
func sec64(name, body string, rc int) string {
	stream := fmt.Sprintf("%s\n@@gputriage %s rc=%d\n", body, testNonce, rc)
	return fmt.Sprintf("@@gputriage %s begin %s limit=1\n%s\n@@gputriage %s end %s\n",
		testNonce, name, base64.StdEncoding.EncodeToString([]byte(stream)), testNonce, name)
}

func captureV2(sections ...string) string {
	return CaptureHeader(testNonce) + strings.Join(sections, "") + "@@gputriage " + testNonce + " done\n"
}

// A v2 procs record of pid holding the given extra fields.
func procV2(pid int, comm string, extra ...string) string {
	f := []string{
		fmt.Sprintf("pid %d", pid),
		fmt.Sprintf("stat %d (%s) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\n", pid, comm),
		"status Uid:\t1000\t1000\t1000\t1000",
		"argv " + b64("python3\x00train.py\x00"),
		"cwd /home/a b\n\n",
	}
	f = append(f, extra...)
	return strings.Join(append(f, "end"), "\x00") + "\x00"
}

// Each value of a v2 capture is read exactly, whatever bytes it holds but NUL: a comm and a cwd
// holding newlines and forged lines stay the process's own, an fd target holding a forged ls
// line stays one target, a file merely named "... (deleted)" but linked is not deleted.
func TestParseV2Values(t *testing.T) {
	comm := "a)\npid 7\nb"
	cwdForge := "/x\npid 7\nstat 7 (forged) Z\nend\n"
	target := "/dev/shm/x\n/proc/7/fd:\nl 99 -> /dev/shm/y (deleted)"
	raw := captureV2(
		sec("host", 0, strings.Replace(hostRoot, "probe_version=1", "probe_version=2", 1), 0),
		sec64("fds", "/proc/100/fd\t3\t/dev/nvidiactl\x00/proc/100/fd\t9\t"+target+"\x00/proc/100/fd\t10\t/dev/shm/n (deleted)\x00/proc/100/fd\t11\t/dev/shm/gone (deleted)\x00denied 0", 0),
		sec("maps", 0, "/proc/100/maps:7f0000000000-7f0000002000 rw-s 00000000 00:1a 5 /dev/shm/x\\012y", 0),
		sec("fdstat", 0, "1 4096 /proc/100/fd/9\n1 10 /proc/100/fd/10\n0 7 /proc/100/fd/11", 0),
		sec("procs", 0, procV2(100, comm, "cwd "+cwdForge+"\n"), 0),
		sec("users", 0, "alice:x:1000", 0),
		sec("shm-ls", 0, "d\t60\t1.5\t0\t/dev/shm\x00f\t10\t1.5\t1000\t/dev/shm/n (deleted)\x00", 0),
	)
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	// procV2 gives cwd once and the extra cwd again: contested.
	if len(s.Processes) != 0 || !hasNote(s, NoteCaptureTampered, "PID 100") {
		t.Fatalf("a record with two cwd fields was used: %+v notes %+v", s.Processes, s.Notes)
	}

	raw = strings.Replace(raw, procV2(100, comm, "cwd "+cwdForge+"\n"), procV2(100, comm), 1)
	s, err = Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(s.Processes) != 1 {
		t.Fatalf("processes %+v", s.Processes)
	}
	p := s.Processes[0]
	if p.PID != 100 || p.Comm != comm || p.Cwd != "/home/a b\n" || p.User != "alice" || p.StartTime == nil || !reflect.DeepEqual(p.Argv, []string{"python3", "train.py"}) {
		t.Errorf("process %+v", p)
	}
	want := []ShmUse{
		{Path: "/dev/shm/gone", Deleted: true, Open: true, Bytes: ptr(int64(7))},
		{Path: "/dev/shm/n (deleted)", Open: true, Bytes: ptr(int64(10))},
		{Path: target, Open: true, Bytes: ptr(int64(4096))}, // linked: its name ends in " (deleted)"
		{Path: "/dev/shm/x\ny", Mapped: true, Bytes: ptr(int64(8192))},
	}
	if len(p.Shm) != len(want) {
		t.Fatalf("shm uses %+v", p.Shm)
	}
	for i, u := range p.Shm {
		w := want[i]
		if u.Path != w.Path || u.Deleted != w.Deleted || u.Open != w.Open || u.Mapped != w.Mapped || !eqPtr(u.Bytes, w.Bytes) {
			t.Errorf("use %d: %+v, want %+v", i, u, w)
		}
	}
	if len(s.Holders) != 1 || s.Holders[0].PID != 100 {
		t.Errorf("holders %+v", s.Holders)
	}
	if e := s.Shm.Entries; len(e) != 2 || !reflect.DeepEqual(e[1].Holders, []int{100}) {
		t.Errorf("the linked file named \"n (deleted)\" is held by PID 100: %+v", e)
	}
}

// What the probe prints once but came twice is not used, whichever copy is true, and says so.
func TestParseV2Contested(t *testing.T) {
	host := strings.Replace(hostRoot, "probe_version=1", "probe_version=2", 1)
	tests := []struct {
		name     string
		sections []string
		note     string
		check    func(*Snapshot) bool
	}{
		{"section twice", []string{sec("procs", 0, procV2(5, "a"), 0), sec("procs", 0, procV2(5, "a"), 0)},
			"section procs appears more than once", func(s *Snapshot) bool { return len(s.Processes) == 0 }},
		{"pid twice", []string{sec("procs", 0, procV2(5, "a")+procV2(6, "b")+procV2(5, "forged"), 0)},
			"PID 5", func(s *Snapshot) bool { return len(s.Processes) == 1 && s.Processes[0].PID == 6 }},
		{"status key twice", []string{sec("procs", 0, procV2(5, "a", "status Uid:\t0\t0\t0\t0"), 0)},
			"PID 5", func(s *Snapshot) bool { return len(s.Processes) == 0 }},
		{"fd twice", []string{sec64("fds", "/proc/5/fd\t3\t/dev/nvidia0\x00/proc/5/fd\t3\t/dev/nvidia1\x00/proc/5/fd\t4\t/dev/nvidiactl\x00denied 0", 0)},
			"PID 5 fd 3", func(s *Snapshot) bool { return len(s.Holders) == 1 && s.Holders[0].FD == 4 }},
		{"fdstat twice", []string{sec("fdstat", 0, "1 5 /proc/5/fd/3\n1 6 /proc/5/fd/3", 0)},
			"PID 5 fd 3", func(s *Snapshot) bool { return true }},
		{"shm path twice", []string{sec("shm-ls", 0, "d\t60\t1.5\t0\t/dev/shm\x00f\t1\t1.5\t0\t/dev/shm/a\x00f\t9\t1.5\t0\t/dev/shm/a\x00", 0)},
			"/dev/shm/a", func(s *Snapshot) bool { return len(s.Shm.Entries) == 1 }},
		{"uid twice", []string{sec("procs", 0, procV2(5, "a"), 0), sec("users", 0, "alice:x:1000\nroot:x:1000", 0)},
			"uid 1000", func(s *Snapshot) bool { return len(s.Processes) == 1 && s.Processes[0].User == "" }},
		{"unit twice, differing", []string{sec("units", 0, "Id=a.service\nActiveState=active\n\nId=a.service\nActiveState=failed", 0)},
			"a.service", func(s *Snapshot) bool { return len(s.Units) == 0 }},
		{"host key twice", []string{sec("host", 0, host+"uid=1000\n", 0)},
			"uid", func(s *Snapshot) bool { return s.Host.UID == nil && s.Host.Hostname == "gpu02" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secs := tt.sections
			if !strings.Contains(strings.Join(secs, ""), " begin host ") {
				secs = append([]string{sec("host", 0, host, 0)}, secs...)
			}
			s, _ := Parse([]byte(captureV2(secs...)))
			if !hasNote(s, NoteCaptureTampered, tt.note) || !tt.check(s) {
				t.Errorf("notes %+v\nprocesses %+v holders %+v units %+v shm %+v", s.Notes, s.Processes, s.Holders, s.Units, s.Shm.Entries)
			}
		})
	}
	// Two aliases of one unit print the same block twice: not contested.
	s, _ := Parse([]byte(captureV2(sec("host", 0, host, 0), sec("units", 0, "Id=a.service\nActiveState=active\n\nId=a.service\nActiveState=active", 0))))
	if hasNote(s, NoteCaptureTampered, "") || len(s.Units) != 1 {
		t.Errorf("equal blocks: notes %+v units %+v", s.Notes, s.Units)
	}
}

// The user-units section fills units of users' managers, and says which were not asked.
func TestParseUserUnits(t *testing.T) {
	out := "Id=foo.service\nLoadState=loaded\nActiveState=active\nSubState=running\nMainPID=42\nResult=success\n"
	body := fmt.Sprintf("1000 0 %s\n1001 -\n1002 1 %s", b64(out), b64("Failed to connect to bus: No medium found\n"))
	s, err := Parse([]byte(captureV2(sec("host", 0, hostRoot, 0), sec("units", 0, "Id=foo.service\nActiveState=failed", 0), sec("user-units", 0, body, 0))))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Units) != 2 || s.Units[0].UserManagerUID != nil || s.Units[0].ActiveState != "failed" ||
		!eqPtr(s.Units[1].UserManagerUID, intp(1000)) || s.Units[1].ActiveState != "active" || !eqPtr(s.Units[1].MainPID, intp(42)) {
		t.Errorf("units %+v", s.Units)
	}
	if !hasNote(s, NoteUserUnits, "uid 1001") || !hasNote(s, NoteUserUnits, "uid 1002 (exit status 1: Failed to connect to bus") {
		t.Errorf("notes %+v", s.Notes)
	}
}

// A record marked "parent" is a process described only as another's parent; a record that
// says so twice is contested like any field given twice, and a v1 capture has no such mark.
func TestParseV2Parent(t *testing.T) {
	parent := strings.Replace(procV2(5, "python3"), "pid 5\x00", "pid 5\x00parent\x00", 1)
	procs, contested, err := ParseProcsV2(strings.NewReader(parent+procV2(6, "python3")), nil, 100)
	if err != nil || len(contested) != 0 || len(procs) != 2 || !procs[0].ParentOnly || procs[1].ParentOnly {
		t.Fatalf("procs %+v contested %v err %v", procs, contested, err)
	}
	twice := strings.Replace(parent, "parent\x00", "parent\x00parent\x00", 1)
	procs, contested, _ = ParseProcsV2(strings.NewReader(twice+procV2(6, "python3")), nil, 100)
	if len(procs) != 1 || procs[0].PID != 6 || !reflect.DeepEqual(contested, []int{5}) {
		t.Errorf("parent given twice: procs %+v contested %v", procs, contested)
	}
}

func FuzzProcsV2(f *testing.F) {
	f.Add([]byte(procV2(5, "a)\nb") + procV2(6, "c")))
	f.Add([]byte("pid 7\x00parent\x00gone\x00end\x00pid 8\x00parent\x00" + procV2(9, "d")))
	f.Add([]byte("pid 0\x00parent 0"))
	f.Add([]byte("pid 1\x00stat 1 (\x00argv !!\x00end"))
	f.Fuzz(func(t *testing.T, b []byte) {
		procs, contested, err := ParseProcsV2(bytes.NewReader(b), nil, 100)
		checkErr(t, err)
		seen := map[int]bool{}
		field := slices.ContainsFunc(bytes.Split(b, []byte{0}), func(f []byte) bool {
			key, _, _ := bytes.Cut(f, []byte(" "))
			return string(key) == "parent"
		})
		for _, p := range procs {
			if p.PID < 0 || seen[p.PID] {
				t.Fatalf("process %+v (twice: %v)", p, seen[p.PID])
			}
			if p.ParentOnly && !field {
				t.Fatalf("process %+v marked parent without a parent field", p)
			}
			seen[p.PID] = true
		}
		for _, pid := range contested {
			if seen[pid] {
				t.Fatalf("contested PID %d used", pid)
			}
		}
	})
}

func FuzzFDsV2(f *testing.F) {
	f.Add([]byte("/proc/1/fd\t3\t/dev/nvidia0\x00/proc/1/fd\t4\t/dev/shm/a\nb (deleted)\x00denied 2\n"))
	f.Add([]byte("/proc/1/fd\t3\t/dev/nvidia0\x00denied 293 1 7\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fds, denied, _, err := ParseFDsV2(bytes.NewReader(b))
		checkErr(t, err)
		for _, fd := range fds {
			if fd.PID < 0 || fd.FD < 0 || !strings.HasPrefix(fd.Target, "/") {
				t.Fatalf("fd %+v", fd)
			}
		}
		if denied != nil && (denied.Links < 0 || len(denied.PIDs) > 16) {
			t.Fatalf("denied %+v", *denied)
		}
	})
}

func FuzzUserUnits(f *testing.F) {
	f.Add("1000 0 " + b64("Id=a.service\nMainPID=3\n") + "\n1001 -\nx y\n")
	f.Fuzz(func(t *testing.T, text string) {
		all, _, err := ParseUserUnits(strings.NewReader(text))
		checkErr(t, err)
		for _, uu := range all {
			for _, u := range uu.Units {
				if u.UserManagerUID == nil || *u.UserManagerUID != uu.UID || u.Name == "" {
					t.Fatalf("unit %+v of uid %d", u, uu.UID)
				}
			}
		}
	})
}

func FuzzSplitCaptureV2(f *testing.F) {
	f.Add([]byte(captureV2(sec64("fds", "/proc/1/fd\t3\t/dev/nvidia0\x00denied 0", 0), sec("procs", 0, procV2(1, "x"), 0))))
	f.Add([]byte(CaptureHeader(testNonce) + "@@gputriage " + testNonce + " begin fds\n!!!!\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := SplitCapture(raw)
		checkErr(t, err)
		if len(c.Sections) > maxSections {
			t.Fatalf("%d sections", len(c.Sections))
		}
		for _, s := range c.Sections {
			if len(s.Body) > SectionLimit(s.Name)+64 || s.Limit != SectionLimit(s.Name) {
				t.Fatalf("section %s: %d bytes, limit %d", s.Name, len(s.Body), s.Limit)
			}
		}
	})
}
