package main

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/hostlist"
)

// hostOptions are the flags that name hosts besides the arguments: pdsh's -w and -x, and a
// file of hosts.
type hostOptions struct {
	file    string   // -f FILE
	with    []string // -w HOSTS, repeatable; "^FILE" reads FILE, as pdsh does
	exclude []string // -x HOSTS, repeatable
}

func (o *hostOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.file, "hosts-file", "f", "", "read hosts from `FILE`, one per line (# comments; - for stdin); the fanout is --fanout")
	fs.StringArrayVarP(&o.with, "hosts", "w", nil, "target `HOSTS`, like pdsh -w: ranges and comma lists, ^FILE for a file (repeatable)")
	fs.StringArrayVarP(&o.exclude, "exclude", "x", nil, "leave out `HOSTS`, like pdsh -x: ranges and comma lists (repeatable)")
}

// given reports whether any host was named by flag.
func (o *hostOptions) given() bool { return o.file != "" || len(o.with) > 0 }

// targets reads the host arguments, -w and -f, expands host lists keeping order and dropping
// duplicates, then drops what -x names.
func (o *hostOptions) targets(args []string, stdin io.Reader) ([]hostlist.Target, error) {
	all := append([]string(nil), args...)
	var files [][2]string // flag, file
	for _, w := range o.with {
		if f, ok := strings.CutPrefix(w, "^"); ok {
			files = append(files, [2]string{"-w ^", f})
			continue
		}
		all = append(all, w)
	}
	if o.file != "" {
		files = append(files, [2]string{"-f ", o.file})
	}
	for _, f := range files {
		words, err := readHostsFile(f[0], f[1], stdin)
		if err != nil {
			return nil, err
		}
		all = append(all, words...)
	}
	ts, err := hostlist.ExpandAll(all)
	if err != nil {
		return nil, usagef("%v", err)
	}
	if len(o.exclude) == 0 {
		return ts, nil
	}
	ex, err := hostlist.ExpandAll(o.exclude)
	if err != nil {
		return nil, usagef("-x: %v", err)
	}
	drop := map[string]bool{}
	for _, x := range ex {
		drop[x.String()] = true
	}
	kept := ts[:0]
	for _, t := range ts {
		// -x gpu03 leaves out gpu03 whatever user or port it was named with; -x u@gpu03 only
		// that exact target.
		if !drop[t.Host] && !drop[t.String()] {
			kept = append(kept, t)
		}
	}
	return kept, nil
}

// readHostsFile returns the host words of a hosts file ("-": stdin), named by flag in
// messages.
func readHostsFile(flag, name string, stdin io.Reader) ([]string, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			if _, nerr := strconv.Atoi(name); nerr == nil && flag == "-f " {
				// pdsh's -f is its fanout: say where that is here.
				return nil, usagef("-f %s: -f reads hosts from a file, and there is no file %q; for %s hosts at once use --fanout %s", name, name, name, name)
			}
			return nil, usagef("%s%v", flag, err)
		}
		defer f.Close()
		r = f
	}
	var words []string
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		words = append(words, strings.Fields(line)...)
	}
	if err := sc.Err(); err != nil {
		return nil, usagef("%s%s: %v", flag, name, err)
	}
	return words, nil
}
