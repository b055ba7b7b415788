package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/probe"
)

// cliTerm runs gputriage in-process with stdout a terminal of the given width.
func cliTerm(t *testing.T, width int, args ...string) (stdout string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	term := func(w io.Writer) (bool, int) { return w == &out, width }
	code = run(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" }, term)
	return out.String(), code
}

// flagNames are the long flags a --help lists.
func flagNames(help string) map[string]bool {
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(?:  -\S, |      )--([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		names[m[1]] = true
	}
	return names
}

// TestSubcommandHelp: the usage lists every subcommand, and each subcommand's --help lists
// only the flags it takes; a flag of another command is refused, naming it.
func TestSubcommandHelp(t *testing.T) {
	main, code := cliTerm(t, 0, "--help")
	if code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	for _, c := range commands() {
		if !c.hidden && !strings.Contains(main, "gputriage "+c.usage) {
			t.Errorf("--help does not list %q", c.name)
		}
		if c.hidden && strings.Contains(main, c.name) {
			t.Errorf("--help lists the hidden %q", c.name)
		}
	}
	if help, _ := cliTerm(t, 0, "help"); help != main {
		t.Error("gputriage help differs from --help")
	}
	all := flagNames(main)
	for _, f := range []string{"format", "replay", "tp", "hosts", "exclude", "option", "debug-ssh", "quiet", "fanout", "hosts-file"} {
		if !all[f] {
			t.Errorf("--help lacks --%s", f)
		}
	}
	for _, cmd := range []string{"collect", "explain"} {
		help, code := cliTerm(t, 0, cmd, "--help")
		if alt, _ := cliTerm(t, 0, "help", cmd); code != exitOK || alt != help {
			t.Errorf("%s --help: exit %d, or gputriage help %s differs", cmd, code, cmd)
		}
		got := flagNames(help)
		for n := range all {
			if got[n] {
				continue
			}
			_, errOut, code := cli(t, nil, cmd, "--"+n+"=x", "a")
			if code != exitUsage || !strings.Contains(errOut, "--"+n+": not a flag of gputriage "+cmd) {
				t.Errorf("%s --%s: exit %d, stderr %q", cmd, n, code, errOut)
			}
		}
		for _, n := range []string{"timeout", "config", "jump", "option", "debug-ssh"} {
			if !got[n] {
				t.Errorf("%s --help lacks --%s", cmd, n)
			}
		}
	}
	for _, topic := range append(helpTopicNames(), "help") {
		if out, code := cliTerm(t, 0, "help", topic); code != exitOK || out == "" {
			t.Errorf("help %s: exit %d, %q", topic, code, out)
		}
	}
	if _, errOut, code := cli(t, nil, "help", "nope"); code != exitUsage || !strings.Contains(errOut, "exit-status") {
		t.Errorf("help nope: exit %d, %q", code, errOut)
	}
}

// TestCommandFlags: each command's --help lists the flags it takes, in this order, and no
// other; each flag another command takes is refused by name, long or short, as not one of its.
func TestCommandFlags(t *testing.T) {
	ssh := "config login port identity jump option kubeconfig context k8s-selector agent-namespace "
	sweep := ssh + "fanout debug-ssh connect-timeout accept-new ask-passphrase sudo "
	hosts := "hosts-file hosts exclude "
	slurm := "slurm-job slurm-partition slurm-nodes slurm-state slurm-via "
	ready := "tp engine gpu-memory-utilization need context-overhead"
	want := map[string]string{
		"": "format color replay local timeout verbose quiet only sort redact show-secrets output version help " +
			hosts + slurm + sweep + "dry-run save " + ready,
		"collect":    "local timeout quiet version help " + hosts + slurm + sweep + "dry-run save",
		"fix":        "yes plan-out apply replay kill-after wait include timeout help " + hosts + slurm + sweep,
		"watch":      "interval until format color timeout help " + hosts + ssh + "connect-timeout accept-new ask-passphrase sudo " + ready,
		"explain":    "file host format color timeout verbose show-secrets version help " + sweep,
		"node-check": "drain resume drain-unconstrained node timeout full-probe verbose help",
	}
	long := map[string]bool{}
	short := map[string]string{}
	for _, cmd := range flagCommands() {
		help, code := cliTerm(t, 0, strings.Fields(cmd+" --help")...)
		var got []string
		for _, m := range regexp.MustCompile(`(?m)^(?:  -(\S), |      )--([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
			got = append(got, m[2])
			long[m[2]] = true
			if m[1] != "" {
				short[m[1]] = m[2]
			}
		}
		if code != exitOK || strings.Join(got, " ") != strings.TrimSpace(want[cmd]) {
			t.Errorf("gputriage %s --help: exit %d, flags\n%s\nwant\n%s", cmd, code, strings.Join(got, " "), want[cmd])
		}
	}
	for _, cmd := range flagCommands()[1:] {
		takes := map[string]bool{}
		for _, n := range strings.Fields(want[cmd]) {
			takes[n] = true
		}
		refused := func(arg, name string) {
			t.Helper()
			_, errOut, code := cli(t, nil, cmd, arg, "a")
			if wantErr := cmd + ": --" + name + ": not a flag of gputriage " + cmd; code != exitUsage || !strings.Contains(errOut, wantErr) {
				t.Errorf("%s %s: exit %d, stderr %q, want %q", cmd, arg, code, errOut, wantErr)
			}
		}
		for n := range long {
			if !takes[n] {
				refused("--"+n+"=x", n)
			}
		}
		for c, n := range short {
			if !takes[n] {
				refused("-"+c, n)
			}
		}
	}
	if _, errOut, code := cli(t, nil, "fix", "--no-such-flag"); code != exitUsage || !strings.Contains(errOut, "fix: unknown flag: --no-such-flag") {
		t.Errorf("fix --no-such-flag: exit %d, stderr %q", code, errOut)
	}
}

// TestHelpWraps: --help fits 80 columns when stdout is not a terminal, and a terminal's
// width when it is one, narrow ones included.
func TestHelpWraps(t *testing.T) {
	for _, width := range []int{0, 60, 100, 200} {
		for _, cmd := range [][]string{{"--help"}, {"collect", "--help"}, {"explain", "--help"}, {"node-check", "--help"}} {
			out, _ := cliTerm(t, width, cmd...)
			limit := width
			if width == 0 {
				limit = 80
			}
			flags := out[strings.Index(out, "\nFlags:\n"):]
			flags = flags[:strings.Index(flags, "\n\n")]
			for _, l := range strings.Split(out, "\n") {
				if len(l) > max(limit, 80) || (strings.Contains(flags, l) && len(l) > limit) {
					t.Errorf("width %d, %v: %d columns: %q", width, cmd, len(l), l)
				}
			}
			if width == 200 && strings.Count(flags, "\n") > strings.Count(mustHelp(t, 0, cmd), "\n") {
				t.Errorf("%v: a wide terminal got more lines than 80 columns", cmd)
			}
		}
	}
}

func mustHelp(t *testing.T, width int, args []string) string {
	out, _ := cliTerm(t, width, args...)
	return out[strings.Index(out, "\nFlags:\n"):]
}

// TestVersion: version names the module, the Go version, and the embedded probe's version and
// capture format; --version says the same.
func TestVersion(t *testing.T) {
	out, _, code := cli(t, nil, "version")
	alt, _, _ := cli(t, nil, "--version")
	if code != exitOK || out != alt {
		t.Fatalf("exit %d; version %q, --version %q", code, out, alt)
	}
	probe := regexp.MustCompile(`probe_version=(\w+)`).FindStringSubmatch(probe.Script)
	for _, want := range []string{"github.com/gputriage/gputriage", runtime.Version(),
		"probe:     version " + probe[1] + ", capture format v2, sha256 "} {
		if !strings.Contains(out, want) {
			t.Errorf("version lacks %q:\n%s", want, out)
		}
	}
	if _, _, code := cli(t, nil, "version", "extra"); code != exitUsage {
		t.Errorf("version extra: exit %d", code)
	}
}

// TestVersionStamped builds gputriage with VCS stamping (the machines here turn it off in
// GOFLAGS, and Go does not stamp from a git worktree) from a copy of this working tree
// committed in a repository of its own, and checks that version names that commit and its
// time.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("!!! SKIPPING the stamped build: no git: %v", err)
	}
	root := repoRoot(t)
	files, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Skipf("!!! SKIPPING the stamped build: not a git checkout: %v", err)
	}
	src := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue // deleted in the working tree
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-C", src, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=2026-11-30T12:34:56Z", "GIT_AUTHOR_DATE=2026-11-30T12:34:56Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "stamp")
	head := git("rev-parse", "HEAD")
	bin := filepath.Join(t.TempDir(), "gputriage")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/gputriage")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"revision:  " + head + "\n", "time:      2026-11-30T12:34:56Z\n", "v0.0.0-20261130123456-" + head[:12]} {
		if !strings.Contains(string(out), want) {
			t.Errorf("stamped version lacks %q:\n%s", want, out)
		}
	}
}

// dryRunHosts runs --dry-run --format json and returns the hosts it would reach.
func dryRunHosts(t *testing.T, stdin string, args ...string) (hosts []string, users []string, ports []int, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	notTerm := func(io.Writer) (bool, int) { return false, 0 }
	code = run(context.Background(), append([]string{"--dry-run", "--format", "json"}, args...), strings.NewReader(stdin),
		&out, &errb, func(string) string { return "" }, notTerm)
	if code != exitOK {
		return nil, nil, nil, errb.String(), code
	}
	var doc struct {
		Hosts []struct {
			Host, User string
			Port       int
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, h := range doc.Hosts {
		hosts, users, ports = append(hosts, h.Host), append(users, h.User), append(ports, h.Port)
	}
	return hosts, users, ports, errb.String(), code
}

// TestHostSelection: pdsh's -w (ranges, comma lists, ^FILE) and -x, -f FILE, and pdsh's -f N
// refused with a message that names --fanout.
func TestHostSelection(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "hosts")
	if err := os.WriteFile(file, []byte("gpu20 # spare\nu@gpu21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"-w range", []string{"-w", "gpu[01-03]"}, "gpu01 gpu02 gpu03"},
		{"-w twice, args first", []string{"-w", "gpu02,gpu01", "-w", "gpu09", "gpu05"}, "gpu05 gpu02 gpu01 gpu09"},
		{"-x", []string{"-w", "gpu[01-05]", "-x", "gpu02", "-x", "gpu[04-05]"}, "gpu01 gpu03"},
		{"-x a host named with a user", []string{"-x", "gpu21", "-f", file}, "gpu20"},
		{"-x only the exact user@host", []string{"-x", "u@gpu20", "-w", "^" + file}, "gpu20 u@gpu21"},
		{"-w ^FILE", []string{"-w", "^" + file, "gpu01"}, "gpu01 gpu20 u@gpu21"},
		{"-f - (stdin)", []string{"-f", "-"}, "gpu30 gpu31"},
		{"a host named like a subcommand", []string{"--", "version", "help"}, "version help"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hosts, _, _, errOut, code := dryRunHosts(t, "gpu30\ngpu31\n", append([]string{"-F", "none"}, tc.args...)...)
			if code != exitOK || strings.Join(hosts, " ") != tc.want {
				t.Errorf("exit %d (%s): hosts %q, want %q", code, errOut, hosts, tc.want)
			}
		})
	}
	for _, args := range [][]string{{"-f", "32", "gpu[01-16]"}, {"gpu[01-16]", "-f32"}} {
		_, errOut, code := cli(t, nil, append([]string{"-F", "none"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "--fanout 32") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-w", "gpu01", "-x", "gpu01"}, "-x left none"},
		{[]string{"--replay", "x", "-x", "gpu01"}, "-x goes with host names"},
		{[]string{"-w", "^/nonexistent/hosts"}, "-w ^open /nonexistent/hosts"},
	} {
		_, errOut, code := cli(t, nil, append([]string{"-F", "none"}, tc.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q", tc.args, code, errOut)
		}
	}
}

// TestOptionFlag: -o Key=Value is applied like ssh's: over the config file, first value wins,
// and Host is refused.
func TestOptionFlag(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(cfg, []byte("Host gpu01\n  User cfguser\n  Port 2222\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, users, ports, errOut, code := dryRunHosts(t, "", "-F", cfg, "-o", "User=ouser", "-o", "Port 2200", "-o", "User=later", "gpu01")
	if code != exitOK || users[0] != "ouser" || ports[0] != 2200 {
		t.Errorf("exit %d (%s): user %q port %v", code, errOut, users, ports)
	}
	_, _, _, errOut, code = dryRunHosts(t, "", "-F", cfg, "-o", "Host=gpu02", "gpu01")
	if code != exitUsage || !strings.Contains(errOut, "Host directive not supported as a command-line option") {
		t.Errorf("-o Host: exit %d, %q", code, errOut)
	}
}

// TestQuiet: -q prints one line per host with problems (none for a clean host), -qq nothing;
// the exit status is the report's; --output still gets the report.
func TestQuiet(t *testing.T) {
	root := repoRoot(t)
	fx := filepath.Join(root, "fixtures")
	out, _, code := cli(t, nil, "-q", "--replay", filepath.Join(fx, "ct200.capture"))
	if code != exitFindings || out != "ct200: error leftover-process, error memory-imbalance, warning shm-deleted-mapped\n" {
		t.Errorf("-q ct200: exit %d, %q", code, out)
	}
	if out, _, code := cli(t, nil, "-q", "--replay", filepath.Join(fx, "clean.capture")); code != exitOK || out != "" {
		t.Errorf("-q clean: exit %d, %q", code, out)
	}
	dir := t.TempDir()
	for _, n := range []string{"clean", "ct200", "busy"} {
		b := mustRead(t, filepath.Join(fx, n+".capture"))
		if err := os.WriteFile(filepath.Join(dir, n+".capture"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "gpu09.error"), []byte(`{"Phase":"connect","Kind":"refused","Message":"connection refused"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = cli(t, nil, "-q", "--replay", dir, "--tp", "8")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitHostsFailed || len(lines) != 3 || lines[0] != "busy: cannot take --tp 8" ||
		lines[1] != "ct200: error leftover-process, error memory-imbalance, warning shm-deleted-mapped, cannot take --tp 8" ||
		lines[2] != "gpu09: failed (connect: refused) connection refused" {
		t.Errorf("-q fleet: exit %d\n%s", code, out)
	}
	report := filepath.Join(t.TempDir(), "r.md")
	out, _, code = cli(t, nil, "-qq", "--replay", dir, "--format", "markdown", "--output", report)
	if b, err := os.ReadFile(report); code != exitHostsFailed || out != "" || err != nil || !bytes.Contains(b, []byte("ct200")) {
		t.Errorf("-qq --output: exit %d, stdout %q, report %v", code, out, err)
	}
	if _, errOut, code := cli(t, nil, "-q", "--redact", "--replay", dir); code != exitUsage || !strings.Contains(errOut, "--output") {
		t.Errorf("-q --redact: exit %d, %q", code, errOut)
	}
}

// TestExamplesQuoteRanges: every gputriage command shown in the README, docs/ and --help
// quotes its host ranges, which zsh would refuse and bash could expand as globs.
func TestExamplesQuoteRanges(t *testing.T) {
	root := repoRoot(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	help, _, _ := cli(t, nil, "--help")
	texts := map[string]string{"--help": help}
	for _, p := range append(docs, filepath.Join(root, "README.md")) {
		texts[p] = string(mustRead(t, p))
	}
	unquoted := regexp.MustCompile(`(^|\s)[^\s'"]*\[[0-9][0-9,-]*\]`)
	for name, text := range texts {
		for _, line := range strings.Split(text, "\n") {
			cmd := strings.TrimSpace(line)
			if strings.HasPrefix(cmd, "gputriage ") && unquoted.MatchString(cmd) {
				t.Errorf("%s: an unquoted host range: %s", name, cmd)
			}
		}
	}
}

// TestQuietMasksFailures: -q names a failed host with its failure's message, which can carry
// the host's own words (its output, a ProxyCommand's stderr): credentials in it are masked as
// in every report, unless --show-secrets.
func TestQuietMasksFailures(t *testing.T) {
	const token = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
	dir := t.TempDir()
	msg := `{"Phase":"probe","Kind":"exit","Message":"HF_TOKEN=` + token + ` python3 serve.py: not found"}`
	if err := os.WriteFile(filepath.Join(dir, "gpu01.error"), []byte(msg), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code := cli(t, nil, "-q", "--replay", dir)
	if code != exitHostsFailed || strings.Contains(out, token) || !strings.HasPrefix(out, "gpu01: failed (probe: exit) HF_TOKEN=") {
		t.Errorf("-q: exit %d, %q", code, out)
	}
	out, _, _ = cli(t, nil, "-q", "--show-secrets", "--replay", dir)
	if !strings.Contains(out, token) {
		t.Errorf("-q --show-secrets: %q", out)
	}
}
