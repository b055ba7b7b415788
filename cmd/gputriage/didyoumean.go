package main

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/internal/suggest"
	"github.com/gputriage/gputriage/sshconf"
	"github.com/gputriage/gputriage/sshexec"
)

// A word the user typed that is not a command or a flag, but nearly one (suggest.Nearest says
// what nearly is), gets "did you mean" instead of being taken for a host name or refused as
// unknown. For a command, the word must also be one a command could be (lower-case letters,
// digits and hyphens: never user@host, host:port, a range or a dotted name) and must not be a
// host the user's ssh_config (or -F FILE) or known_hosts files name: the names completion
// offers, and hashed known_hosts names (HashKnownHosts yes), which completion cannot list.

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
	cmd := suggest.Nearest(word, visibleCommands())
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
	if s := suggest.Nearest(name, longFlags(fs)); s != "" {
		return "unknown flag --" + name + ": did you mean --" + s + "?"
	}
	for _, other := range flagCommands() {
		if other == cmd {
			continue
		}
		if s := suggest.Nearest(name, longFlags(flagSet(other, newFlags(other)))); s != "" {
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
