package diagnose

import (
	"testing"

	"github.com/gputriage/gputriage/parse"
)

func TestOthersMay(t *testing.T) {
	dir := func(p string, uid, gid int, mode uint32, dev uint64) parse.DirInfo {
		return parse.DirInfo{Path: p, UID: uid, GID: gid, Mode: 0o040000 | mode, Dev: dev}
	}
	shm := dir("/dev/shm", 0, 0, 0o1777, 2)
	dev := dir("/dev", 0, 0, 0o755, 1)
	root := dir("/", 0, 0, 0o755, 1)
	alice, bob := 1000, 1001
	cases := []struct {
		name  string
		dirs  []parse.DirInfo
		owner *int
		whole bool
		want  OthersCode // "" when only the owner and root could
	}{
		{"file in a shared 0777 directory", []parse.DirInfo{dir("/dev/shm/shared", alice, alice, 0o777, 2), shm, dev, root}, &alice, false, OthersWorldWritable},
		{"own file directly in sticky /dev/shm", []parse.DirInfo{shm, dev, root}, &alice, false, ""},
		{"another user's file in sticky /dev/shm", []parse.DirInfo{shm, dev, root}, &bob, false, OthersStickyEntry},
		{"unknown owner in sticky /dev/shm", []parse.DirInfo{shm, dev, root}, nil, false, OthersStickyEntry},
		{"own 0755 directory", []parse.DirInfo{dir("/dev/shm/run", alice, alice, 0o755, 2), shm, dev, root}, &alice, false, ""},
		{"another user's 0755 directory", []parse.DirInfo{dir("/dev/shm/run", bob, bob, 0o755, 2), shm, dev, root}, &alice, false, OthersOwnDir},
		{"own private group 0775", []parse.DirInfo{dir("/dev/shm/run", alice, alice, 0o775, 2), shm, dev, root}, &alice, false, ""},
		{"shared group 0775", []parse.DirInfo{dir("/dev/shm/run", alice, 100, 0o775, 2), shm, dev, root}, &alice, false, OthersGroupWritable},
		{"symlink", []parse.DirInfo{{Path: "/dev/shm/run", UID: alice, Mode: 0o120777, Dev: 2}, shm}, &alice, false, OthersSymlink},
		{"nothing read", nil, &alice, true, OthersUnread},
		{"model in a world-writable cache", []parse.DirInfo{dir("/srv/hf", 0, 0, 0o777, 1), dir("/srv", 0, 0, 0o755, 1), root}, nil, true, OthersWorldWritable},
		{"model in own cache", []parse.DirInfo{dir("/home/alice/.cache", alice, alice, 0o755, 1), dir("/home/alice", alice, alice, 0o750, 1), dir("/home", 0, 0, 0o755, 1), root}, nil, true, ""},
		{"own cache inside a world-writable directory", []parse.DirInfo{dir("/srv/hf/alice", alice, alice, 0o755, 1), dir("/srv/hf", 0, 0, 0o777, 1), dir("/srv", 0, 0, 0o755, 1), root}, nil, true, OthersWorldWritable},
		{"own cache inside sticky /tmp", []parse.DirInfo{dir("/tmp/alice", alice, alice, 0o755, 1), dir("/tmp", 0, 0, 0o1777, 1), root}, nil, true, ""},
		{"missing entry of sticky /tmp", []parse.DirInfo{dir("/tmp", 0, 0, 0o1777, 1), root}, nil, true, OthersStickyEntry},
		{"a mount point ends the walk", []parse.DirInfo{dir("/data", 0, 0, 0o755, 5), dir("/", 0, 0, 0o777, 1)}, nil, true, ""},
		{"a directory above not read", []parse.DirInfo{dir("/a/b", alice, alice, 0o755, 1), root}, nil, true, OthersUnread},
		{"the top not read", []parse.DirInfo{dir("/a", alice, alice, 0o755, 1)}, nil, true, OthersUnread},
	}
	for _, c := range cases {
		got := othersMay(alice, c.dirs, c.owner, c.whole)
		switch {
		case c.want == "" && got != nil:
			t.Errorf("%s: %+v, want none", c.name, *got)
		case c.want != "" && (got == nil || got.Code != c.want):
			t.Errorf("%s: %+v, want %s", c.name, got, c.want)
		}
	}
}
