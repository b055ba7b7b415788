package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// lastRun is the one line of a Prometheus export that changes from run to run.
var lastRun = regexp.MustCompile(`(?m)^gputriage_last_run_timestamp_seconds \d+\.\d{3}\n`)

// TestOutputAtomic: --output FILE replaces the file whole, in every format, so a reader
// polling it (node_exporter's textfile collector every scrape, a script tailing a report)
// only ever sees a complete report: each write gives the file a new inode (a temporary file
// in the same directory, renamed over it, mode 0644), and no other file a collector would read
// (*.prom) appears beside it meanwhile.
func TestOutputAtomic(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures")
	for _, format := range []string{"text", "markdown", "json", "prometheus"} {
		t.Run(format, func(t *testing.T) {
			args := []string{"--replay", fx, "--format", format, "--only", "all", "--color", "never"}
			want, _, _ := cli(t, nil, args...)
			whole := func(b []byte) bool {
				if format == "prometheus" {
					return len(lastRun.FindAll(b, -1)) == 1 && string(lastRun.ReplaceAll(b, nil)) == lastRun.ReplaceAllString(want, "")
				}
				return string(b) == want
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "gputriage.prom")
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}

			r := &pollReader{path: path, whole: whole}
			r.start()
			prev := inode(t, path)
			for i := 0; i < 15; i++ {
				if out, errOut, code := cli(t, nil, append(args, "--output", path)...); out != "" || code == exitUsage || code == exitInternal {
					t.Fatalf("--output: exit %d, stdout %q, stderr %s", code, out, errOut)
				}
				ino := inode(t, path)
				if ino == prev {
					t.Errorf("write %d rewrote the file in place (inode %d): a reader can see it half written", i+1, ino)
				}
				prev = ino
			}
			reads, bad, stray := r.stop()
			if bad != "" {
				t.Errorf("a reader saw a partial report after %d whole ones: %s", reads, bad)
			}
			if stray != "" {
				t.Errorf("another *.prom file appeared beside the report: %s", stray)
			}
			if reads == 0 {
				t.Error("the reader never read the file")
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != 0o644 {
				t.Errorf("mode %v (%v), want 0644", st.Mode().Perm(), err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
			if b, _ := os.ReadFile(path); !whole(b) || !bytes.HasSuffix(b, []byte("\n")) {
				t.Errorf("the last report is not whole")
			}
		})
	}
}

// pollReader reads a file over and over, as a collector does, until stopped or until it
// sees it incomplete.
type pollReader struct {
	path  string
	whole func([]byte) bool
	done  chan struct{}
	wg    sync.WaitGroup
	reads int
	bad   string // what the first incomplete read saw
	stray string // the *.prom files seen when there was more than one
}

func (r *pollReader) start() {
	r.done = make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			select {
			case <-r.done:
				return
			default:
			}
			b, err := os.ReadFile(r.path)
			if err != nil || !r.whole(b) {
				r.bad = fmt.Sprintf("%d bytes (%v): %.200q", len(b), err, b)
				return
			}
			r.reads++
			if names, _ := filepath.Glob(filepath.Join(filepath.Dir(r.path), "*.prom")); len(names) != 1 {
				r.stray = strings.Join(names, " ")
			}
		}
	}()
}

// stop ends the polling and says what it saw.
func (r *pollReader) stop() (reads int, bad, stray string) {
	close(r.done)
	r.wg.Wait()
	return r.reads, r.bad, r.stray
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no inode numbers on this system")
	}
	return uint64(sys.Ino)
}
