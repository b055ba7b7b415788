package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gputriage/gputriage/probe"
	"github.com/gputriage/gputriage/triage"
)

// versionCmd is `gputriage version` (and --version): what a bug report needs to name the
// build exactly.
func versionCmd(_ context.Context, args []string, e *env) (int, error) {
	if len(args) > 0 {
		if args[0] == "-h" || args[0] == "--help" {
			fmt.Fprint(e.stdout, versionHelp)
			return exitOK, nil
		}
		return exitUsage, usagef("version takes no arguments, got %q", args[0])
	}
	fmt.Fprint(e.stdout, versionText(readBuildInfo()))
	return exitOK, nil
}

// buildFacts is what the binary knows about its own build.
type buildFacts struct {
	module, version, revision, time, goVersion string
	modified                                   bool
}

// revision and modified are stamped by scripts/release.sh (-ldflags "-X main.revision=...
// -X main.modified=true|false"), which builds without go's own VCS stamping.
var revision, modified string

func readBuildInfo() buildFacts {
	f := buildFacts{module: "github.com/gputriage/gputriage", version: buildVersion(), goVersion: runtime.Version(),
		revision: revision, modified: modified == "true"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return f
	}
	f.module, f.goVersion = bi.Main.Path, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			f.revision = s.Value
		case "vcs.time":
			f.time = s.Value
		case "vcs.modified":
			f.modified = s.Value == "true"
		}
	}
	return f
}

func versionText(f buildFacts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "gputriage %s\n", f.version)
	fmt.Fprintf(&b, "  module:    %s %s\n", f.module, f.version)
	switch {
	case f.revision == "":
		b.WriteString("  revision:  unknown (built without VCS stamping: go build -buildvcs=true)\n")
	case f.modified:
		fmt.Fprintf(&b, "  revision:  %s (with uncommitted changes)\n", f.revision)
	default:
		fmt.Fprintf(&b, "  revision:  %s\n", f.revision)
	}
	if f.time != "" {
		fmt.Fprintf(&b, "  time:      %s\n", f.time)
	}
	fmt.Fprintf(&b, "  go:        %s %s/%s\n", f.goVersion, runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "  probe:     %s\n", probe.Describe(probe.Script))
	return b.String()
}

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// probeScriptCmd prints what the probe reads on stdin (a new nonce, nvidia-smi's bound for the
// default --timeout, the script, a final exit line), for a shell gputriage does not reach
// itself: kubectl debug's node pod (docs/kubernetes.md). Its output is replayed with --replay.
func probeScriptCmd(_ context.Context, args []string, e *env) (int, error) {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprint(e.stdout, "Usage: gputriage probe-script | sh -s > HOST.capture; gputriage --replay HOST.capture\n\n"+
			"Prints the probe's input, for a shell gputriage cannot reach (kubectl debug node/NODE).\n")
		return exitOK, nil
	} else if len(args) > 0 {
		return exitUsage, usagef("probe-script takes no arguments, got %q", args[0])
	}
	_, err := e.stdout.Write(triage.ProbeScript(60 * time.Second))
	return exitOK, err
}
