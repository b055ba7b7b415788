package diagnose

import (
	"slices"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

// TestDeletedShmWorthAWord: a runtime's segment is one at any depth below /dev/shm (the
// torch_PID of issue 19 sat in a directory of its job's), unless it is named like weights;
// a deleted file of zero bytes keeps no RAM and is never worth a word, whatever its name.
func TestDeletedShmWorthAWord(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	p := &parse.Process{PID: 4242, Shm: []parse.ShmUse{
		{Path: "/dev/shm/job/torch_4242", Deleted: true, Open: true, Bytes: n(4096)},
		{Path: "/dev/shm/a/b/nccl-x7", Deleted: true, Mapped: true, Bytes: n(1 << 20)},
		{Path: "/dev/shm/torch_17", Deleted: true, Open: true, Bytes: n(4096)},
		{Path: "/dev/shm/job/empty", Deleted: true, Open: true, Bytes: n(0)},
		{Path: "/dev/shm/zero", Deleted: true, Mapped: true, Bytes: n(0)},
		{Path: "/dev/shm/grown", Deleted: true, Open: true, Bytes: n(0)},
		{Path: "/dev/shm/grown", Deleted: true, Mapped: true, Bytes: n(8192)},
		{Path: "/dev/shm/job/scratch", Deleted: true, Open: true, Bytes: n(1 << 20)},
		{Path: "/dev/shm/models/torch_model.safetensors", Deleted: true, Mapped: true, Bytes: n(1 << 30)},
		{Path: "/dev/shm/unknown-size", Deleted: true, Open: true},
	}}
	var got []string
	for _, u := range deletedShm(p) {
		got = append(got, u.Path)
	}
	want := []string{"/dev/shm/grown", "/dev/shm/job/scratch", "/dev/shm/models/torch_model.safetensors", "/dev/shm/unknown-size"}
	if !slices.Equal(got, want) {
		t.Errorf("deletedShm = %q, want %q", got, want)
	}
	for path, transient := range map[string]bool{
		"/dev/shm/torch_1": true, "/dev/shm/d/torch_1": true, "/dev/shm/d/e/sem.x": true,
		"/dev/shm/d/torch_1.pt": false, "/dev/shm/d/weights": false, "/tmp/torch_1": false,
	} {
		if isTransientShm(path) != transient {
			t.Errorf("isTransientShm(%q) = %v, want %v", path, !transient, transient)
		}
	}
}
