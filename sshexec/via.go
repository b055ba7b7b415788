package sshexec

import "context"

// Via reaches a target some other way than SSH: a Kubernetes node through the API server
// (package kube). Run and Pool hand a target whose Via is set to it, with the sweep's Options
// (command, stdin, output bounds, Head, the per-host Timeout), so that one fanout, one
// progress and one Done serve every target however it is reached. RunTarget returns the
// target's Result as an SSH host's would be: Err's phases and kinds are this package's, a
// timeout keeps what was read, and Ctrl-C (ctx) ends it promptly.
type Via interface {
	RunTarget(ctx context.Context, t Target, o Options) Result
}

// WithDefaults is o with each zero bound set to its default, as Run applies them.
func (o Options) WithDefaults() Options { return o.withDefaults() }

// Classify is the kind of a network error (KindRefused, KindTimeout...), "" when it is none
// of the known ones, for a Via to classify its failures as Run does.
func Classify(err error) string { return classify(err) }

// StderrHead is the start of a command's stderr, quoted, as a failure's message quotes it.
func StderrHead(b []byte) string { return stderrHead(b) }

// EscapeControl makes remote text printable on a terminal.
func EscapeControl(s string) string { return escapeControl(s) }
