package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

// completionCmd is `gputriage completion SHELL`.
func completionCmd(_ context.Context, args []string, e *env) (int, error) {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stdout, strings.TrimLeft(completionHelp, "\n"))
		return exitOK, nil
	}
	if len(args) != 1 {
		return exitUsage, usagef("completion needs one shell: bash, zsh or fish")
	}
	var script string
	switch args[0] {
	case "bash":
		script = bashCompletion()
	case "zsh":
		script = zshCompletion()
	case "fish":
		script = fishCompletion()
	default:
		return exitUsage, usagef("completion: no script for %q; shells: bash, zsh, fish", args[0])
	}
	fmt.Fprint(e.stdout, script)
	return exitOK, nil
}

// valueKinds says how a flag's value is completed; a flag that takes a value and is not
// listed gets no completion (a number, a duration, a user name).
var valueKinds = map[string]string{
	"format": "words:text markdown json prometheus", "color": "words:auto always never", "only": "words:failed findings all",
	"sort": "words:host severity", "engine": "words:sglang vllm", "until": "words:free clean ready",
	"option": "words:User= Port= HostName= IdentityFile= IdentitiesOnly= ProxyJump= ConnectTimeout= " +
		"StrictHostKeyChecking= UserKnownHostsFile= HostKeyAlias=",
	"hosts-file": "file", "config": "file", "identity": "file", "output": "file", "replay": "file", "file": "file",
	"plan-out": "file", "apply": "file",
	"save": "dir", "hosts": "host", "exclude": "host", "host": "host", "jump": "host",
	"slurm-state": "words:drain drained draining down idle allocated mixed fail maint reserved reboot",
	"slurm-nodes": "host", "slurm-via": "host",
}

// compFlag is one flag as the completion scripts see it.
type compFlag struct {
	long, short, usage string
	value              bool   // takes a value
	kind               string // from valueKinds: "", "file", "dir", "host" or "words:..."
}

func completionFlags(cmd string) []compFlag {
	var out []compFlag
	flagSet(cmd, newFlags(cmd)).VisitAll(func(f *pflag.Flag) {
		_, usage := flagVar(f)
		if i := strings.IndexAny(usage, ":;("); i > 0 {
			usage = usage[:i] // the first clause is enough beside a completion
		}
		out = append(out, compFlag{long: f.Name, short: f.Shorthand, usage: strings.TrimSpace(usage),
			value: f.NoOptDefVal == "", kind: valueKinds[f.Name]})
	})
	return out
}

// visibleCommands are the subcommand names a user completes.
func visibleCommands() []string {
	var names []string
	for _, c := range commands() {
		if !c.hidden {
			names = append(names, c.name)
		}
	}
	return names
}

// valueCase is one shell case arm per kind of value: the flags (as -x and --long) that take
// such a value.
func valueCases() (kinds []string, flags map[string][]string) {
	flags = map[string][]string{}
	seen := map[string]bool{}
	for _, cmd := range flagCommands() {
		for _, f := range completionFlags(cmd) {
			if !f.value || seen[f.long] {
				continue
			}
			seen[f.long] = true
			if flags[f.kind] == nil {
				kinds = append(kinds, f.kind)
			}
			flags[f.kind] = append(flags[f.kind], "--"+f.long)
			if f.short != "" {
				flags[f.kind] = append(flags[f.kind], "-"+f.short)
			}
		}
	}
	sort.Strings(kinds)
	return kinds, flags
}

func flagWords(cmd string) string {
	var w []string
	for _, f := range completionFlags(cmd) {
		w = append(w, "--"+f.long)
		if f.short != "" {
			w = append(w, "-"+f.short)
		}
	}
	return strings.Join(w, " ")
}
