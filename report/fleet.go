package report

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/hostlist"
)

// The fleet view: what a report of more than one host adds to the per-host details. A summary
// folds the hosts of each problem and each cause of failure into hostlist form, the details
// show only the hosts Options.Only selects, hosts whose details are identical are shown once,
// and a finding identical on several hosts is explained once.

// codeGroup is one problem kind of the summary: the hosts with a finding of this code at this
// severity.
type codeGroup struct {
	code     string
	severity diagnose.Severity
	hosts    []string
}

// failureGroup is one cause of failure of the summary.
type failureGroup struct {
	phase, kind string
	hosts       []string
}

// fleetSummary is the top of a fleet report and JSON's summary object.
type fleetSummary struct {
	sweep
	// byCode lists the codes found at warning or worse, most severe first, then in the order
	// the hosts were given. A host appears once per group however many such findings it has.
	byCode []codeGroup
	// failures lists the causes of failure in the order the hosts were given.
	failures []failureGroup
}

func summarizeFleet(hosts []Host) fleetSummary {
	fs := fleetSummary{sweep: summarize(hosts)}
	type codeKey struct {
		code string
		sev  diagnose.Severity
	}
	codes := map[codeKey]int{}
	fails := map[[2]string]int{}
	for _, h := range hosts {
		if f := h.failure(); f != nil {
			k := [2]string{f.Phase, f.Kind}
			i, ok := fails[k]
			if !ok {
				i = len(fs.failures)
				fails[k] = i
				fs.failures = append(fs.failures, failureGroup{phase: f.Phase, kind: f.Kind})
			}
			fs.failures[i].hosts = appendNew(fs.failures[i].hosts, h.Name)
		}
		for _, f := range h.Result.Findings {
			if f.Severity < diagnose.Warning {
				continue
			}
			k := codeKey{f.Code, f.Severity}
			i, ok := codes[k]
			if !ok {
				i = len(fs.byCode)
				codes[k] = i
				fs.byCode = append(fs.byCode, codeGroup{code: f.Code, severity: f.Severity})
			}
			fs.byCode[i].hosts = appendNew(fs.byCode[i].hosts, h.Name)
		}
	}
	slices.SortStableFunc(fs.byCode, func(a, b codeGroup) int { return int(b.severity - a.severity) })
	return fs
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// failureLabel says a cause of failure in words: "host key changed", "timeout (handshake)".
// The phase is named unless the kind already implies it.
func failureLabel(phase, kind string) string {
	implied := map[string]string{
		"name-lookup":       "name lookup failed",
		"refused":           "connection refused",
		"unknown-host-key":  "unknown host key",
		"host-key-changed":  "host key changed",
		"revoked":           "host key revoked",
		"host-cert-invalid": "invalid host certificate",
		"auth-failed":       "authentication failed",
		"interrupted":       "interrupted",
		"no-data":           "no data",
	}
	if s, ok := implied[kind]; ok {
		return s
	}
	return strings.ReplaceAll(kind, "-", " ") + " (" + phase + ")"
}

// hasProblems reports whether a host failed, has a finding at warning or worse, or is a node
// its scheduler drained or downed with a reason: the hosts OnlyFindings shows.
func hasProblems(h Host) bool {
	return h.failure() != nil || countFindings(h.Result.Findings).problems() > 0 || h.Scheduler.line() != ""
}

// only resolves Options.Only for a report of n hosts.
func (o Options) only(n int) string {
	switch {
	case o.Only != "":
		return o.Only
	case n <= 1 || o.Verbose:
		return OnlyAll
	}
	return OnlyFindings
}

// selectHosts returns the hosts only selects, in the order sort asks for, and the others in
// the order given.
func selectHosts(hosts []Host, only, sort string) (shown, hidden []Host) {
	for _, h := range hosts {
		keep := true
		switch only {
		case OnlyFindings:
			keep = hasProblems(h)
		case OnlyFailed:
			keep = h.failure() != nil
		}
		if keep {
			shown = append(shown, h)
		} else {
			hidden = append(hidden, h)
		}
	}
	if sort == SortSeverity {
		slices.SortStableFunc(shown, func(a, b Host) int { return severityRank(b) - severityRank(a) })
	}
	return shown, hidden
}

// severityRank orders hosts for SortSeverity: critical, error and warning findings first,
// then failed hosts (as in the summary), then hosts with notes only, then clean ones.
func severityRank(h Host) int {
	r := 2 * int(h.Result.Worst()) // -2 without findings, 0 info, 2 warning, ...
	if h.failure() != nil {
		r = max(r, 2*int(diagnose.Warning)-1)
	}
	return r
}

// hostGroup is hosts whose details are identical but for their names and probe times, shown
// as one block under their folded names, like dshbak -c.
type hostGroup struct {
	hosts []Host // hosts[0] stands for all
}

func (g hostGroup) names() []string {
	n := make([]string, len(g.hosts))
	for i, h := range g.hosts {
		n[i] = h.Name
	}
	return n
}

func (g hostGroup) name() string {
	if len(g.hosts) == 1 {
		return g.hosts[0].Name
	}
	return hostlist.Fold(g.names())
}

// probeTimes is when the group's hosts were probed: one time, or "FIRST to LAST".
func (g hostGroup) probeTimes() string {
	var first, last *time.Time
	for _, h := range g.hosts {
		if h.Snapshot == nil || h.Snapshot.Host.Time == nil {
			continue
		}
		t := h.Snapshot.Host.Time
		if first == nil || t.Before(*first) {
			first = t
		}
		if last == nil || t.After(*last) {
			last = t
		}
	}
	switch {
	case first == nil:
		return ""
	case first.Equal(*last):
		return first.Format(time.RFC3339)
	}
	return first.Format(time.RFC3339) + " to " + last.Format(time.RFC3339)
}

// showHostname reports whether the facts name the host's own hostname: when it differs from
// the name the user gave, and, for a group, when it is not merely that name's FQDN (then
// every host of the group reports the same one).
func (g hostGroup) showHostname() bool {
	h := g.hosts[0]
	hn := h.Snapshot.Host.Hostname
	if hn == "" || hn == h.Name {
		return false
	}
	return len(g.hosts) == 1 || !expectedHostname(h.Name, hn)
}

// expectedHostname reports whether a host reporting hostname was reached as name: the same
// name, or one is the other's first label.
func expectedHostname(name, hostname string) bool {
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[i+1:]
	}
	name, hostname = strings.ToLower(name), strings.ToLower(hostname)
	return name == hostname || strings.HasPrefix(hostname, name+".") || strings.HasPrefix(name, hostname+".")
}

// hostSignature is everything the details show of a host except its name and its probe's
// time, so hosts with equal signatures can share one block. It is built from the JSON form,
// which holds every field any format shows, less those that differ from host to host without
// meaning anything (uptime, /dev/shm usage, which no details show).
func hostSignature(h Host) string {
	j := jsonHostOf(h)
	j.Host, j.ProbeTime, j.UptimeSeconds, j.Shm = "", nil, nil, nil
	if j.Hostname != nil && expectedHostname(h.Name, *j.Hostname) {
		j.Hostname = nil
	}
	b, _ := json.Marshal(j)
	return string(b)
}

// findingSignature is the identity of a finding for sharing across hosts: every field the
// report shows (code, severity, kind, title, explanation, evidence, files, GPUs, PIDs, fix
// commands) must be equal. diagnose never puts a host's name in a finding, so the same
// problem with the same numbers reads the same on every host: 40 hosts with the same driver
// mismatch share one finding, while two leftovers that hold different memory are two.
func findingSignature(f diagnose.Finding) string {
	b, _ := json.Marshal(jsonFindingOf(f))
	return string(b)
}

// details is the part of a report after the summary: the blocks to show and the findings
// they share.
type details struct {
	groups []hostGroup
	hidden []Host
	only   string
	// shared maps a finding's signature to the hosts (of the shown ones) that have it and the
	// group that explains it in full: the first one that has it.
	shared map[string]*sharedFinding
}

type sharedFinding struct {
	hosts []string
	first int // index into groups
}

func newDetails(hosts []Host, o Options) *details {
	d := &details{only: o.only(len(hosts)), shared: map[string]*sharedFinding{}}
	shown, hidden := selectHosts(hosts, d.only, o.Sort)
	d.hidden = hidden
	index := map[string]int{}
	for _, h := range shown {
		sig := hostSignature(h)
		if i, ok := index[sig]; ok {
			d.groups[i].hosts = append(d.groups[i].hosts, h)
			continue
		}
		index[sig] = len(d.groups)
		d.groups = append(d.groups, hostGroup{hosts: []Host{h}})
	}
	for gi, g := range d.groups {
		for _, h := range g.hosts {
			for _, f := range h.Result.Findings {
				sig := findingSignature(f)
				s := d.shared[sig]
				if s == nil {
					s = &sharedFinding{first: gi}
					d.shared[sig] = s
				}
				s.hosts = appendNew(s.hosts, h.Name)
			}
		}
	}
	return d
}

// findingRef says how group gi shows finding f: in full (ref false), and then on which other
// hosts as well (also, or ""), or as a reference to the group above that explains it (ref
// true, first naming that group).
func (d *details) findingRef(gi int, f diagnose.Finding) (also string, ref bool, first string) {
	if d == nil {
		return "", false, ""
	}
	s := d.shared[findingSignature(f)]
	if s == nil {
		return "", false, ""
	}
	if s.first != gi {
		return "", true, d.groups[s.first].name()
	}
	if len(s.hosts) > len(d.groups[gi].hosts) {
		return hostlist.Fold(s.hosts), false, ""
	}
	return "", false, ""
}

// allExplainedAbove reports whether every finding of group gi with something to do is
// explained above for another group, and names the first such group: its "what to do" is
// then that group's.
func (d *details) allExplainedAbove(gi int, fs []diagnose.Finding) (string, bool) {
	first := ""
	for _, f := range fs {
		if len(f.Actions) == 0 && len(f.Fix) == 0 && len(f.Checks) == 0 {
			continue
		}
		_, ref, by := d.findingRef(gi, f)
		if !ref || (first != "" && by != first) {
			return "", false
		}
		first = by
	}
	return first, first != ""
}

// hiddenNote says which hosts the details leave out, so nothing is dropped silently; "" when
// none are.
func (d *details) hiddenNote() string {
	if len(d.hidden) == 0 {
		return ""
	}
	names := make([]string, len(d.hidden))
	for i, h := range d.hidden {
		names[i] = h.Name
	}
	why := "without problems"
	if d.only == OnlyFailed {
		why = "that did not fail"
	}
	return plural(len(d.hidden), "host") + " " + why + ": " + hostlist.Fold(names)
}
