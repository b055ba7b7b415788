package diagnose

import (
	"slices"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

// TestShmKeepersByIdentity: two processes keep a deleted file of the same name. With the
// files' identities read and different, neither is named as keeping the other's file; read
// and equal, each names the other; unread (an older probe), each names the other and says the
// probe could not tell whether it is the same file (ByName, JSON's by_name).
func TestShmKeepersByIdentity(t *testing.T) {
	const path = "/dev/shm/w/model-00001-of-00001.safetensors"
	for _, c := range []struct {
		name         string
		fileA, fileB string
		named, hedge bool
	}{
		{"other files", "0:26:7", "0:26:8", false, false},
		{"the same file", "0:26:7", "0:26:7", true, false},
		{"identity unknown", "", "", true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			uid := 1000
			s := &parse.Snapshot{}
			for i, file := range []string{c.fileA, c.fileB} {
				s.Processes = append(s.Processes, parse.Process{PID: 100 + i, UID: &uid, Comm: "python3", Argv: []string{"python3"},
					Shm: []parse.ShmUse{{Path: path, Deleted: true, Mapped: true, Bytes: i64(4096), File: file}}})
			}
			r := Diagnose(s, refTime)
			n := 0
			for _, f := range r.Findings {
				if f.Code != CodeShmDeletedMapped || len(f.Shm) != 1 {
					continue
				}
				n++
				sf, other := f.Shm[0], map[int]string{100: "101", 101: "100"}[f.PIDs[0]]
				if got := slices.Contains(sf.PIDs, 100) && slices.Contains(sf.PIDs, 101); got != c.named {
					t.Errorf("PID %d's file kept by %v", f.PIDs[0], sf.PIDs)
				}
				if sf.ByName != c.hedge {
					t.Errorf("PID %d: ByName %v", f.PIDs[0], sf.ByName)
				}
				all := strings.Join(f.Evidence, "\n")
				if strings.Contains(all, "PID "+other) != c.named || strings.Contains(all, "could not tell whether the same file") != c.hedge {
					t.Errorf("PID %d's evidence:\n%s", f.PIDs[0], all)
				}
			}
			if n != 2 {
				t.Errorf("%d shm-deleted-mapped findings, want 2:\n%s", n, dump(r.Findings))
			}
		})
	}
}
