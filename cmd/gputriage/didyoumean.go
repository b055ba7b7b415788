package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/sshexec"
)

// A word the user typed that is not a command or a flag, but nearly one, gets "did you mean"
// instead of being taken for a host name or refused as unknown.
//
// "Nearly" is at most 1 edit from a name of up to 5 letters (fix, help, watch, tp) and at
// most 2 from a longer one (explain, collect, replay), an edit being a letter inserted,
// deleted, changed, or two neighbours swapped; the word must have 3 letters or more and start
// with the name's first letter, as typos mostly do. So fxi, explian, colect and --replya are
// caught, while gpu1 (4 edits from help), batch (watch), path or a two-letter host is not.
// For a command, the word must also be one a command could be (lower-case letters, digits and
// hyphens: never user@host, host:port, a range or a dotted name) and must not be a host the
// user's ssh_config (or -F FILE) or known_hosts files name: the names completion offers, and
// hashed known_hosts names (HashKnownHosts yes), which completion cannot list.

// mistypedCommand refuses triage's command line when its first host name is a subcommand
// mistyped, saying which and how to reach a host of that name (after --, a word is always a
// host). It reads the ssh files only for such a word.
func mistypedCommand(args []string, e *env) error {
	o := new(options)
	fs := flagSet("", o)
	fs.ParseErrorsAllowlist.UnknownFlagsHandling = pflag.IgnoreUnknownFlag
	if fs.Parse(args) != nil || fs.NArg() == 0 || fs.ArgsLenAtDash() == 0 {
		return nil
	}
	word := fs.Arg(0)
	if strings.Trim(word, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		return nil
	}
	var names []string
	for _, c := range commands() {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	cmd := nearest(word, names)
	if cmd == "" || knownHost(word, o.ssh.configFile, e) {
		return nil
	}
	return usagef("%q is not a command: did you mean %s? (to reach a host named %s: gputriage -- %s)", word, cmd, word, word)
}

// knownHost reports whether the user's ssh files name host: a Host of the ssh config (-F
// FILE, else ~/.ssh/config and what it includes) or a known_hosts entry, hashed ones too.
func knownHost(host, configFile string, e *env) bool {
	home := userHome(e)
	config := configFile
	if config == "" && home != "" {
		config = filepath.Join(home, ".ssh", "config")
	}
	if slices.Contains(sshconf.HostNamesIn(config, home, systemKnownHosts), host) {
		return true
	}
	files := systemKnownHosts
	if home != "" {
		files = append([]string{filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, ".ssh", "known_hosts2")}, files...)
	}
	return sshexec.KnownHostsName(files, host)
}

// flagSuggestion is the did-you-mean for err when it is an unknown long flag near one of fs's
// (cmd's) flags, or else of another command's, naming that command; "" when none is near.
func flagSuggestion(cmd string, fs *pflag.FlagSet, err error) string {
	var unknown *pflag.NotExistError
	if !errors.As(err, &unknown) || unknown.GetSpecifiedShortnames() != "" {
		return ""
	}
	name := unknown.GetSpecifiedName()
	if s := nearest(name, longFlags(fs)); s != "" {
		return "unknown flag --" + name + ": did you mean --" + s + "?"
	}
	for _, other := range flagCommands() {
		if other == cmd {
			continue
		}
		if s := nearest(name, longFlags(flagSet(other, newFlags(other)))); s != "" {
			return "unknown flag --" + name + ": did you mean --" + s + "? (" + commandOf(other, cmd) + ")"
		}
	}
	return ""
}

// commandOf says whose flag a suggestion for cmd's command line is: other's.
func commandOf(other, cmd string) string {
	switch {
	case other == "":
		return "a flag of gputriage without a command, not of gputriage " + cmd
	case cmd == "":
		return "a flag of gputriage " + other
	}
	return "a flag of gputriage " + other + ", not of gputriage " + cmd
}

// longFlags are the long names of fs's visible flags, in its order.
func longFlags(fs *pflag.FlagSet) []string {
	var names []string
	fs.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	return names
}

// nearest is the first of names nearest word and near enough (see above); "" when word is
// one of names, shorter than 3 letters, or near none.
func nearest(word string, names []string) string {
	if len(word) < 3 || slices.Contains(names, word) {
		return ""
	}
	best, bestD := "", 3
	for _, n := range names {
		limit := 2
		if len(n) <= 5 {
			limit = 1
		}
		if n[0] != word[0] {
			continue
		}
		if d := editDistance(word, n); d <= limit && d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the optimal string alignment (Damerau-Levenshtein) distance between a and
// b: letters inserted, deleted or changed, and neighbours swapped, each one edit.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
