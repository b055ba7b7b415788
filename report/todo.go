package report

import (
	"slices"
	"strings"

	"github.com/gputriage/gputriage/diagnose"
)

// "What to do" for one host: the actions of all its findings, the same action (Kind and
// Target) suggested by several findings merged into one item that lists them, ordered by what
// the items give back, then the checks of all findings once.

// todoItem is one numbered item of "what to do".
type todoItem struct {
	kind   diagnose.ActionKind // "" for a finding's Fix lines without typed actions
	target string
	pids   []int
	named  []diagnose.Process // what the findings say of pids
	frees  diagnose.Impact
	steps  []diagnose.Command
	codes  []string // the findings it is suggested for, in finding order
	// partly are the codes among codes that it does not resolve alone: another action of
	// the finding is needed too, or healthy work keeps the finding's GPUs short.
	partly []string
	sev    diagnose.Severity
}

// todo is a host's "what to do".
type todo struct {
	items  []todoItem
	checks []diagnose.Command
}

// hostTodo gathers the actions and checks of fs.
func hostTodo(fs []diagnose.Finding) todo {
	var t todo
	index := map[string]int{}
	add := func(key string, a diagnose.Action, f diagnose.Finding) {
		i, ok := index[key]
		if !ok {
			i = len(t.items)
			index[key] = i
			t.items = append(t.items, todoItem{kind: a.Kind, target: a.Target, sev: f.Severity,
				frees: diagnose.Impact{GPUMiB: map[int]int64{}}})
		}
		it := &t.items[i]
		it.merge(a)
		for _, n := range f.Named {
			if slices.Contains(a.PIDs, n.PID) && !slices.ContainsFunc(it.named, func(m diagnose.Process) bool { return m.PID == n.PID }) {
				it.named = append(it.named, n)
			}
		}
		if !slices.Contains(it.codes, f.Code) {
			it.codes = append(it.codes, f.Code)
		}
		if !resolvesAlone(f, a) && !slices.Contains(it.partly, f.Code) {
			it.partly = append(it.partly, f.Code)
		}
		it.sev = max(it.sev, f.Severity)
	}
	for _, f := range fs {
		for _, a := range f.Actions {
			add(string(a.Kind)+"\x00"+a.Target, a, f)
		}
		if len(f.Actions) == 0 && len(f.Checks) == 0 && len(f.Fix) > 0 {
			// No typed facts (a finding diagnose has not converted): its Fix lines are one
			// action, merged with another finding's that starts with the same command.
			a := diagnose.Action{}
			for _, l := range f.Fix {
				a.Steps = append(a.Steps, splitComment(l))
			}
			add("\x00fix\x00"+a.Steps[0].Line, a, f)
		}
		for _, c := range f.Checks {
			if !slices.ContainsFunc(t.checks, func(x diagnose.Command) bool { return x.Line == c.Line }) {
				t.checks = append(t.checks, c)
			}
		}
	}
	slices.SortStableFunc(t.items, func(a, b todoItem) int {
		switch {
		case a.frees.TotalGPUMiB() != b.frees.TotalGPUMiB():
			return cmpDesc(a.frees.TotalGPUMiB(), b.frees.TotalGPUMiB())
		case a.frees.ShmBytes != b.frees.ShmBytes:
			return cmpDesc(a.frees.ShmBytes, b.frees.ShmBytes)
		}
		return int(b.sev - a.sev)
	})
	return t
}

func cmpDesc(a, b int64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// merge adds what a gives back and its steps to the item: the most each finding says it
// frees, per GPU and of /dev/shm, and each command once.
func (it *todoItem) merge(a diagnose.Action) {
	for _, p := range a.PIDs {
		if !slices.Contains(it.pids, p) {
			it.pids = append(it.pids, p)
		}
	}
	for g, v := range a.Frees.GPUMiB {
		it.frees.GPUMiB[g] = max(it.frees.GPUMiB[g], v)
	}
	it.frees.ShmBytes = max(it.frees.ShmBytes, a.Frees.ShmBytes)
	for _, s := range a.Steps {
		if !slices.ContainsFunc(it.steps, func(x diagnose.Command) bool { return x.Line == s.Line }) {
			it.steps = append(it.steps, s)
		}
	}
}

// lead is the item's first line: what it does, what it frees, which findings it resolves.
func (it todoItem) lead(procs []diagnose.GPUProcess) string {
	s := diagnose.ActionLead(it.kind, it.target, processWho(it.pids, procs, it.named), it.codes)
	switch it.kind {
	case "":
		return s
	case diagnose.ActionInspect, diagnose.ActionNarrowLaunch:
		// Looking, or working around, resolves nothing by itself.
		return s + " (" + strings.Join(it.codes, ", ") + ")"
	}
	var tail []string
	if f := diagnose.ImpactWords(it.frees); f != "" {
		tail = append(tail, f)
	}
	tail = append(tail, diagnose.ResolvesWords(it.codes, it.partly))
	return s + ": " + strings.Join(tail, "; ")
}

// resolvesAlone reports whether doing a resolves f by itself: a is the only action of f that
// gives something back (looking and launching elsewhere do not), and for memory-imbalance
// the GPUs are balanced once the leftovers are stopped (healthy work on a short GPU keeps it
// short).
func resolvesAlone(f diagnose.Finding, a diagnose.Action) bool {
	if f.Imbalance != nil && !f.Imbalance.BalancedAfter {
		return false
	}
	for _, b := range f.Actions {
		if b.Kind == diagnose.ActionInspect || b.Kind == diagnose.ActionNarrowLaunch {
			continue
		}
		if b.Kind != a.Kind || b.Target != a.Target {
			return false
		}
	}
	return true
}

// stepBlocks splits the steps into blocks of commands: a command with a note is a block of
// its own headed by the note (prose, said before the command it is about), and the commands
// between them are grouped under no note ("").
func stepBlocks(steps []diagnose.Command) (notes []string, blocks [][]string) {
	for i, s := range steps {
		if i == 0 || s.Note != "" || steps[i-1].Note != "" {
			notes = append(notes, s.Note)
			blocks = append(blocks, nil)
		}
		blocks[len(blocks)-1] = append(blocks[len(blocks)-1], s.Line)
	}
	return notes, blocks
}

// splitComment parses a Fix line into its command and the trailing shell comment, which is
// said as prose rather than copied: "nvidia-smi --gpu-reset -i 2  # only once ..." is the
// command "nvidia-smi --gpu-reset -i 2" with that note. A # starts a comment, as in sh, only
// outside quotes and after a blank.
func splitComment(line string) diagnose.Command {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '\\':
			i++
		case c == '\'' || c == '"':
			quote = c
		case c == '#' && i > 0 && (line[i-1] == ' ' || line[i-1] == '\t'):
			return diagnose.Command{Line: strings.TrimRight(line[:i], " \t"),
				Note: strings.TrimSpace(line[i+1:])}
		}
	}
	return diagnose.Command{Line: line}
}

// commandLines are the commands' lines, as a block prints them.
func commandLines(cs []diagnose.Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Line
	}
	return out
}

// processWho describes the one process an item ends, for its lead: its program and user, as
// the GPU processes list them, else as its findings name it (a process that holds no GPU);
// nil for none, several, or one the report does not know.
func processWho(pids []int, procs []diagnose.GPUProcess, named []diagnose.Process) []string {
	if len(pids) != 1 {
		return nil
	}
	p, ok := processByPID(procs, pids[0])
	if !ok {
		return namedWho(pids[0], named)
	}
	who := []string{programText(p)}
	if p.User != "" {
		who = append(who, p.User)
	}
	return who
}

// namedWho is processWho of a process that holds no GPU: its command and user as a finding
// names it.
func namedWho(pid int, named []diagnose.Process) []string {
	i := slices.IndexFunc(named, func(n diagnose.Process) bool { return n.PID == pid })
	if i < 0 || named[i].Command == "" {
		return nil
	}
	who := []string{named[i].Command}
	if named[i].UserName != "" {
		who = append(who, named[i].UserName)
	}
	return who
}
