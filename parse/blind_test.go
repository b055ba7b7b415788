package parse

import (
	"slices"
	"strings"
	"testing"
)

// A GPU holder whose description the probe's own time bound stopped ends in a field "cut",
// wherever the cut fell (here inside argv's base64): it is left out of the processes, as undescribed,
// and named in ProcsCut and a note; the records around it are read whole, and nothing reads as
// tampered.
func TestParseProcsCut(t *testing.T) {
	whole := procV2(100, "python3")
	cut := strings.Join([]string{"pid 200", "stat 200 (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1000 0 0\n", "argv cHl0a"}, "\x00") + "\x00cut\x00"
	after := procV2(300, "python3")
	raw := captureV2(
		sec("host", 0, strings.Replace(hostRoot, "probe_version=1", "probe_version=2", 1), 0),
		sec("procs", 0, whole+cut+after, 0),
	)
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var pids []int
	for _, p := range s.Processes {
		pids = append(pids, p.PID)
	}
	if !slices.Equal(pids, []int{100, 300}) || !slices.Equal(s.ProcsCut, []int{200}) {
		t.Errorf("processes %v, cut %v; want [100 300] and [200]", pids, s.ProcsCut)
	}
	if !hasNote(s, NoteSectionTimeout, "PID 200") || hasNote(s, NoteCaptureTampered, "") {
		t.Errorf("notes %+v", s.Notes)
	}
}

// A GPU holder with more fds than the probe reads of it (exit status 3 of the fds section) is
// noted as a cut, and the section is not complete: the holders of /dev/shm files are unknown.
func TestParseFDsCapped(t *testing.T) {
	raw := captureV2(
		sec("host", 0, strings.Replace(hostRoot, "probe_version=1", "probe_version=2", 1), 0),
		sec64("fds", "/proc/100/fd\t3\t/dev/nvidia0\x00denied 0", 3),
	)
	s, err := Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	complete := true
	for _, sec := range s.Sections {
		if sec.Name == "fds" {
			complete = sec.Complete()
		}
	}
	if !hasNote(s, NoteSectionTruncated, "more than 1024 descriptors") || complete || len(s.Holders) != 1 {
		t.Errorf("notes %+v, complete %v, holders %+v", s.Notes, complete, s.Holders)
	}
}
