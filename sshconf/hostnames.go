package sshconf

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Bounds on what host completion reads: it runs at every Tab, so it must stay quick whatever
// the files hold.
const (
	completeMaxFileBytes = 4 << 20
	completeMaxFiles     = 64
	completeMaxDepth     = 16
)

// HostNames are the names a shell completes hosts from: the Host names without wildcards of
// home's ~/.ssh/config and the files it includes, then the names of ~/.ssh/known_hosts and of
// the known_hosts files in system that are not hashed, once each, sorted. Only plain words a
// shell takes unquoted are named. It runs at every Tab: each file is read up to 4 MiB, at most
// 64 files, Includes at most 16 deep.
func HostNames(home string, system []string) []string {
	return HostNamesIn(filepath.Join(home, ".ssh", "config"), home, system)
}

// HostNamesIn is HostNames with config read instead of home's ~/.ssh/config, as ssh -F
// config does.
func HostNamesIn(config, home string, system []string) []string {
	hc := hostCollector{home: home, seen: map[string]bool{}}
	hc.config(config, 0)
	for _, f := range append([]string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2")},
		system...) {
		hc.knownHosts(f)
	}
	sort.Strings(hc.names)
	return hc.names
}

type hostCollector struct {
	home  string
	files int
	seen  map[string]bool
	names []string
}

func (hc *hostCollector) add(name string) {
	// Only names a shell can complete as one plain word: no patterns, no quoting.
	if name == "" || strings.ContainsAny(name, "*?!,[]#'\"\\$`;&|<>(){} \t") || !isPrintableASCII(name) || hc.seen[name] {
		return
	}
	hc.seen[name] = true
	hc.names = append(hc.names, name)
}

func isPrintableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// read returns a file's contents, bounded in size and in number of files.
func (hc *hostCollector) read(path string) []byte {
	if hc.files++; hc.files > completeMaxFiles {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, completeMaxFileBytes))
	return b
}

// config collects Host names from an ssh_config file and, like ssh, from the files its
// Include lines name (relative to ~/.ssh).
func (hc *hostCollector) config(path string, depth int) {
	if depth > completeMaxDepth {
		return
	}
	sc := bufio.NewScanner(bytes.NewReader(hc.read(path)))
	sc.Buffer(nil, completeMaxFileBytes)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		i := strings.IndexAny(line, " \t=")
		if i < 0 {
			continue
		}
		keyword := line[:i]
		var args []string
		for _, a := range strings.Fields(strings.TrimLeft(line[i:], " \t=")) {
			if strings.HasPrefix(a, "#") {
				break
			}
			args = append(args, a)
		}
		switch strings.ToLower(keyword) {
		case "host":
			for _, a := range args {
				hc.add(a)
			}
		case "include":
			for _, a := range args {
				hc.include(a, depth)
			}
		}
	}
}

func (hc *hostCollector) include(pattern string, depth int) {
	if strings.HasPrefix(pattern, "~/") {
		pattern = filepath.Join(hc.home, pattern[2:])
	} else if !filepath.IsAbs(pattern) {
		pattern = filepath.Join(hc.home, ".ssh", pattern)
	}
	matches, _ := filepath.Glob(pattern)
	for _, m := range matches {
		hc.config(m, depth+1)
	}
}

// knownHosts collects the names of a known_hosts file: [host]:port as host, hashed names
// (|1|...) and @revoked lines skipped.
func (hc *hostCollector) knownHosts(path string) {
	sc := bufio.NewScanner(bytes.NewReader(hc.read(path)))
	sc.Buffer(nil, completeMaxFileBytes)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 0 && strings.HasPrefix(fields[0], "@") {
			if fields[0] == "@revoked" {
				continue
			}
			fields = fields[1:]
		}
		if len(fields) < 2 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		for _, n := range strings.Split(fields[0], ",") {
			if strings.HasPrefix(n, "|") {
				continue
			}
			if strings.HasPrefix(n, "[") {
				if i := strings.Index(n, "]:"); i > 0 {
					n = n[1:i]
				}
			}
			hc.add(n)
		}
	}
}
