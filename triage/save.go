package triage

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/gputriage/gputriage/report"
)

// saver writes what --save keeps as each host finishes: DIR/HOST.capture for a probed host,
// DIR/HOST.error for a failed one, and at the end DIR/hosts with the host order, so --replay
// DIR reproduces the sweep exactly. A nil saver saves nothing.
type saver struct {
	dir string
	mu  sync.Mutex
	err error // the first write that failed
}

func newSaver(dir string) (*saver, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &saver{dir: dir}, nil
}

// saver is c.Save's saver, its directory made; nil without --save.
func (c *Config) saver() (*saver, error) {
	if c.Save == "" {
		return nil, nil
	}
	sv, err := newSaver(c.Save)
	if err != nil {
		return nil, fmt.Errorf("--save: %w", err)
	}
	return sv, nil
}

// host writes one host's file; it is safe for concurrent use.
func (sv *saver) host(h report.Host) {
	if sv == nil {
		return
	}
	base := filepath.Join(sv.dir, fileSafe(h.Name))
	var err error
	if h.Err != nil {
		var b []byte
		b, err = json.Marshal(h.Err)
		if err == nil {
			err = os.WriteFile(base+errorExt, append(b, '\n'), 0o600)
		}
	} else {
		err = os.WriteFile(base+captureExt, h.Capture, 0o600)
	}
	if err != nil {
		sv.mu.Lock()
		sv.err = cmp.Or(sv.err, err)
		sv.mu.Unlock()
	}
}

// finish writes the host order and returns the first error of the sweep's writes.
func (sv *saver) finish(hosts []report.Host) error {
	if sv == nil {
		return nil
	}
	if sv.err != nil {
		return sv.err
	}
	var index strings.Builder
	for _, h := range hosts {
		index.WriteString(h.Name + "\n")
	}
	return os.WriteFile(filepath.Join(sv.dir, indexFile), []byte(index.String()), 0o600)
}

const (
	errorExt  = ".error"
	indexFile = "hosts"
)

// fileSafe maps a host label to a file name: labels never hold '/', but may start with '.'.
func fileSafe(label string) string {
	label = strings.NewReplacer("/", "_", "\\", "_", "\x00", "_").Replace(label)
	if strings.HasPrefix(label, ".") {
		label = "_" + label
	}
	return label
}

// replayDir reads a saved sweep: the hosts in DIR/hosts order when present (others after, by
// name), each from HOST.capture or HOST.error, keeping of each what c keeps.
func (c *Config) replayDir(dir string) ([]report.Host, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	kind := map[string]string{}
	var names []string
	for _, de := range entries {
		n := de.Name()
		for _, ext := range []string{captureExt, errorExt} {
			if !de.IsDir() && strings.HasSuffix(n, ext) {
				label := strings.TrimSuffix(n, ext)
				if _, dup := kind[label]; !dup {
					names = append(names, label)
				}
				kind[label] = ext
			}
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no *%s files in %s", captureExt, dir)
	}
	sort.Strings(names)
	order := names
	if b, err := os.ReadFile(filepath.Join(dir, indexFile)); err == nil {
		seen := map[string]bool{}
		order = nil
		for _, l := range strings.Split(string(b), "\n") {
			if _, ok := kind[fileSafe(l)]; ok && l != "" && !seen[fileSafe(l)] {
				seen[fileSafe(l)] = true
				order = append(order, l)
			}
		}
		for _, n := range names {
			if !seen[n] {
				order = append(order, n)
			}
		}
	}
	defer limitMemory(1, len(order))() // one host at a time
	hosts := make([]report.Host, 0, len(order))
	for _, label := range order {
		path := filepath.Join(dir, fileSafe(label))
		if kind[fileSafe(label)] == errorExt {
			b, err := os.ReadFile(path + errorExt)
			if err != nil {
				return nil, err
			}
			var he report.HostError
			if err := json.Unmarshal(b, &he); err != nil {
				return nil, fmt.Errorf("%s%s: %v", path, errorExt, err)
			}
			hosts = append(hosts, report.Host{Name: label, Err: &he})
			continue
		}
		raw, err := readCapture(path + captureExt)
		if err != nil {
			return nil, err
		}
		h := diagnoseCapture(label, raw)
		c.finish(&h)
		hosts = append(hosts, h)
	}
	return hosts, nil
}
