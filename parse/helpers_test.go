package parse

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// corpusDir returns the shared corpus of real-world outputs, ../shared/corpus from the
// module root, skipping the test when it is absent.
func corpusDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("module root not found")
		}
		dir = parent
	}
	c := filepath.Join(dir, "..", "shared", "corpus")
	if _, err := os.Stat(c); err != nil {
		t.Skipf("corpus absent: %v", err)
	}
	return c
}

// corpusFiles returns the corpus files matching pattern, skipping when there are none.
func corpusFiles(t testing.TB, pattern string) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(corpusDir(t), pattern))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Skipf("no corpus files match %s", pattern)
	}
	files := map[string][]byte{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		files[filepath.Base(p)] = b
	}
	return files
}

func i64(v int64) *int64 { return &v }
func intp(v int) *int    { return &v }

func eqPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func showPtr[T any](p *T) any {
	if p == nil {
		return "nil"
	}
	return *p
}

func itoa(n int) string { return fmt.Sprint(n) }

func anyString(v any) string { return fmt.Sprint(v) }
