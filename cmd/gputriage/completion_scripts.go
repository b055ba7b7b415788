package main

import (
	_ "embed"
	"fmt"
	"strings"
)

// The scripts' fixed parts, as written in completion/ (the Fprintf ones take the flag words).
var (
	//go:embed completion/bash-head.bash
	bashHead string
	//go:embed completion/bash-tail.bash
	bashTail string
	//go:embed completion/zsh-head.zsh
	zshHead string
	//go:embed completion/zsh-tail.zsh
	zshTail string
	//go:embed completion/fish-head.fish
	fishHead string
)

// The scripts are generated from the flag definitions (completionFlags), so they never list
// a flag gputriage lacks. Host names come from `gputriage __complete-hosts` at each Tab.

func bashCompletion() string {
	var b strings.Builder
	b.WriteString(bashHead)
	kinds, flags := valueCases()
	for _, k := range kinds {
		fmt.Fprintf(&b, "\t%s)\n\t\t", strings.Join(flags[k], "|"))
		switch {
		case k == "":
			b.WriteString("COMPREPLY=() # a value of the user's own")
		case k == "file":
			b.WriteString(`COMPREPLY=($(compgen -f -- "$cur"))`)
		case k == "dir":
			b.WriteString(`COMPREPLY=($(compgen -d -- "$cur"))`)
		case k == "host":
			b.WriteString(`COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete-hosts 2>/dev/null)" -- "$cur"))`)
		case strings.HasPrefix(k, "words:"):
			fmt.Fprintf(&b, `COMPREPLY=($(compgen -W %q -- "$cur"))`, strings.TrimPrefix(k, "words:"))
		}
		b.WriteString("\n\t\treturn ;;\n")
	}
	fmt.Fprintf(&b, bashTail, flagWords("collect"), flagWords("explain"), flagWords("node-check"), flagWords("fix"), flagWords("watch"), flagWords(""), helpWords(), strings.Join(visibleCommands(), " "))
	return b.String()
}

// helpWords are what `gputriage help` takes.
func helpWords() string {
	return "collect explain node-check fix watch " + strings.Join(helpTopicNames(), " ")
}

func zshCompletion() string {
	var b strings.Builder
	b.WriteString(zshHead)
	kinds, flags := valueCases()
	for _, k := range kinds {
		fmt.Fprintf(&b, "\t(%s)\n\t\t", strings.Join(flags[k], "|"))
		switch {
		case k == "":
			b.WriteString("_message value")
		case k == "file":
			b.WriteString("_files")
		case k == "dir":
			b.WriteString("_files -/")
		case k == "host":
			b.WriteString(`compadd -- ${(f)"$(${words[1]} __complete-hosts 2>/dev/null)"}`)
		case strings.HasPrefix(k, "words:"):
			fmt.Fprintf(&b, "compadd -- %s", strings.TrimPrefix(k, "words:"))
		}
		b.WriteString("\n\t\treturn ;;\n")
	}
	fmt.Fprintf(&b, zshTail, flagWords("collect"), flagWords("explain"), flagWords("node-check"), flagWords("fix"), flagWords("watch"), flagWords(""), helpWords(), strings.Join(visibleCommands(), " "))
	return b.String()
}

func fishCompletion() string {
	var b strings.Builder
	subs := strings.Join(visibleCommands(), " ")
	fmt.Fprintf(&b, fishHead, subs, subs, helpWords())
	for _, cmd := range flagCommands() {
		cond := fmt.Sprintf("'__gputriage_cmd_is %s'", cmd)
		if cmd == "" {
			cond = `"__gputriage_cmd_is ''"`
		}
		for _, f := range completionFlags(cmd) {
			fmt.Fprintf(&b, "complete -c gputriage -n %s -l %s", cond, f.long)
			if f.short != "" {
				fmt.Fprintf(&b, " -s %s", f.short)
			}
			switch {
			case !f.value:
			case f.kind == "file" || f.kind == "dir":
				b.WriteString(" -r -F")
			case f.kind == "host":
				b.WriteString(" -x -a '(__gputriage_hosts)'")
			case strings.HasPrefix(f.kind, "words:"):
				fmt.Fprintf(&b, " -x -a '%s'", strings.TrimPrefix(f.kind, "words:"))
			default:
				b.WriteString(" -x")
			}
			fmt.Fprintf(&b, " -d %s\n", fishQuote(f.usage))
		}
	}
	return b.String()
}

// fishQuote single-quotes s for fish, where only \ and ' are special inside single quotes.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
