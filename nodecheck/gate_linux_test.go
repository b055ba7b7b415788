//go:build linux

package nodecheck

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestIdleShmWalkBounded: a user fills a directory of /dev/shm with empty files (no bytes:
// tmpfs bounds only their inodes) of long names. The gate's walk stops at its bound of entries
// and doubts, having read little more than the bound's worth of names: never the whole
// directory, which grows without bound (the walk reads /dev/shm as any directory; here one of
// the test's own, on the same kind of real file system).
func TestIdleShmWalkBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "many")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const files = 100000
	for i := range files {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%0200d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	var root syscall.Stat_t
	if err := syscall.Lstat(dir, &root); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := (&shmWalk{dev: root.Dev}).walk(dir, 1)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "entries under /dev/shm") {
		t.Errorf("walk: %v, want the bound of entries passed", err)
	}
	// 100,000 names of 200 bytes are 20 MB (the walk that read them whole allocated 36 MiB);
	// the bound's 16,384 of them, with their paths, some 11 MiB.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the walk allocated %d MiB", alloc>>20)
	if limit := uint64(16 << 20); alloc > limit {
		t.Errorf("the walk allocated %d MiB, want at most %d MiB: it read the whole directory", alloc>>20, limit>>20)
	}
}
