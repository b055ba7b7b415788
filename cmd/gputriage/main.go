// Command gputriage tells you, from a laptop, why GPU memory on one or many remote hosts is
// not where you expect it, who holds it, and what to do about it.
//
// This package is the only one that reads flags and the environment, prints, or exits.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"golang.org/x/term"

	"github.com/gputriage/gputriage/report"
)

// Exit statuses, documented in --help and the README.
const (
	exitOK          = 0   // no finding at warning or worse
	exitFindings    = 1   // findings at warning or worse
	exitUsage       = 2   // usage or configuration error
	exitHostsFailed = 3   // one or more hosts could not be triaged
	exitInternal    = 4   // internal error
	exitInterrupted = 130 // interrupted (Ctrl-C); what was collected is still reported
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv, isTerminal)
	stop()
	os.Exit(code)
}

// isTerminal reports whether w is a terminal, and its width (0 when unknown).
func isTerminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return true, 0
	}
	return true, width
}

// env is what run needs from the process: streams, environment and terminal detection, passed
// in so tests can drive the whole CLI in-process.
type env struct {
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	getenv     func(string) string
	isTerminal func(io.Writer) (bool, int)
}

// usageError is a bad flag or argument: exit status 2, one clear line, no stack.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer,
	getenv func(string) string, isTerm func(io.Writer) (bool, int)) (code int) {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, isTerminal: isTerm}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "gputriage: internal error: %v\nPlease report this with the command you ran.\n", r)
			if getenv("GPUTRIAGE_DEBUG") != "" {
				fmt.Fprintf(stderr, "%s", debug.Stack())
			}
			code = exitInternal
		}
	}()
	var err error
	helpCmd := "gputriage --help"
	if c, ok := commandFor(args); ok {
		code, err = c.run(ctx, args[1:], e)
		if c.name == "collect" || c.name == "explain" || c.name == "node-check" || c.name == "fix" || c.name == "watch" {
			helpCmd = "gputriage " + c.name + " --help"
		}
	} else {
		code, err = dispatch(ctx, "", args, e)
	}
	if err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "gputriage: %s\nRun '%s' for usage.\n", report.Sanitize(ue.msg), helpCmd)
			return exitUsage
		}
		fmt.Fprintf(stderr, "gputriage: %v\n", err)
		if code == exitOK {
			code = exitInternal
		}
	}
	return code
}

// commandFor finds the subcommand args start with. A host named like a subcommand is
// triaged with `gputriage -- NAME`; one nearly named like one, too (mistypedCommand).
func commandFor(args []string) (command, bool) {
	if len(args) == 0 {
		return command{}, false
	}
	return findCommand(args[0])
}
