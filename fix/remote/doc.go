// Package remote carries out `gputriage fix` on hosts: it builds the plan from a sweep of the
// hosts (or reads a reviewed plan file, refusing one another user could have written), asks
// the operator to confirm, probes each host again just before acting and keeps only what that
// probe still names (fix.Recheck), runs fix's apply script over one SSH session per host
// through triage.Config.Exec, offers SIGKILL for what still runs, watches each stopped
// target's memory come back (package watch, over a triage.Pool), and prints and records every
// result in the audit log. With Runner.Replay it builds and prints the same plan from saved
// captures (triage.Replay in place of the sweep) and stops there: no host, no prompt, no signal.
//
// It owns the I/O of fix; package fix owns the pure parts (the plan, its JSON, the script, its
// results, the audit records) and imports neither triage nor this package. The command line
// (flags, their checks, which hosts) stays in cmd/gputriage, which hands a Runner the sweep
// (Runner.Probe) and how hosts are reached (Runner.Config).
package remote
