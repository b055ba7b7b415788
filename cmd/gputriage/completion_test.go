package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/testenv"
)

// shellOrSkip finds a shell the completion scripts are checked with; CI installs them all.
func shellOrSkip(t *testing.T, name string) string {
	t.Helper()
	return testenv.Need(t, name+" completion", "apt-get install "+name, name)
}

// completionHome is a HOME whose ssh config (with an Include) and known_hosts name hosts,
// patterns, hashed and revoked entries and names no shell word should carry.
func completionHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	files := map[string]string{
		".ssh/config": "Host gpu01 gpu02 *.corp !bad gpu0?\n  HostName 10.0.0.1\nInclude conf.d/*\nHost=eq-host\n" +
			"Match host foo\nHost \"quoted\" it's\n",
		".ssh/conf.d/a": "Host included01 # a comment\n",
		".ssh/known_hosts": "known01,10.0.0.5 ssh-ed25519 AAAA\n[known02]:2222 ssh-ed25519 AAAA\n" +
			"|1|abc=|def= ssh-ed25519 AAAA\n@revoked revoked01 ssh-ed25519 AAAA\n@cert-authority *.corp ssh-ed25519 AAAA\n" +
			"# known03 ssh-ed25519 AAAA\nevil$(reboot) ssh-ed25519 AAAA\n\x1b[2Jesc ssh-ed25519 AAAA\ngpu01 ssh-rsa AAAA\n",
	}
	for name, body := range files {
		p := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

const completionHosts = "10.0.0.5 eq-host gpu01 gpu02 included01 known01 known02"

// TestCompleteHosts: the host list the scripts complete from.
func TestCompleteHosts(t *testing.T) {
	defer func(s []string) { systemKnownHosts = s }(systemKnownHosts)
	systemKnownHosts = nil
	out, _, code := cli(t, map[string]string{"HOME": completionHome(t)}, "__complete-hosts")
	if got := strings.Join(strings.Fields(out), " "); code != exitOK || got != completionHosts {
		t.Errorf("exit %d: hosts %q, want %q", code, got, completionHosts)
	}
}

// buildGputriage builds the binary the completion scripts call, as "gputriage" in a
// directory of its own.
func buildGputriage(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "gputriage")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeScript(t *testing.T, shell string) string {
	t.Helper()
	out, _, code := cli(t, nil, "completion", shell)
	if code != exitOK || out == "" {
		t.Fatalf("completion %s: exit %d", shell, code)
	}
	p := filepath.Join(t.TempDir(), "gputriage."+shell)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCompletionSyntax: every script parses in its shell (bash -n, zsh -n, fish -n).
func TestCompletionSyntax(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		t.Run(shell, func(t *testing.T) {
			sh := shellOrSkip(t, shell)
			script := writeScript(t, shell)
			if out, err := exec.Command(sh, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", shell, err, out)
			}
			if shell != "zsh" {
				return
			}
			// Sourced from .zshrc after compinit, it registers itself for gputriage.
			cmd := exec.Command(sh, "-f", "-c", "autoload -U compinit; compinit -u -d "+shellQuote(filepath.Join(t.TempDir(), "zcomp"))+
				"; source "+shellQuote(script)+"; print -r -- $_comps[gputriage]")
			cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
			if out, err := cmd.CombinedOutput(); err != nil || string(out) != "_gputriage\n" {
				t.Errorf("zsh: sourcing the script: %v, %q", err, out)
			}
		})
	}
	if _, _, code := cli(t, nil, "completion", "tcsh"); code != exitUsage {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

// TestBashCompletion runs the bash script as bash's completion would, word by word.
func TestBashCompletion(t *testing.T) {
	bash := shellOrSkip(t, "bash")
	bin, script, home := buildGputriage(t), writeScript(t, "bash"), completionHome(t)
	cases := []struct {
		words []string // after the command name; the last is the word being completed
		want  string
	}{
		{[]string{""}, "10.0.0.5 collect completion eq-host explain fix gpu01 gpu02 help included01 known01 known02 node-check version watch"},
		{[]string{"--fo"}, "--format"},
		{[]string{"--format", ""}, "json markdown prometheus text"},
		{[]string{"--only", "f"}, "failed findings"},
		{[]string{"--color", "=", "a"}, "always auto"},
		{[]string{"--sort", ""}, "host severity"},
		{[]string{"--engine", ""}, "sglang vllm"},
		{[]string{"-w", "gpu"}, "gpu01 gpu02"},
		{[]string{"-x", "k"}, "known01 known02"},
		{[]string{"gpu01", "k"}, "known01 known02"},
		{[]string{"gpu01", "co"}, ""},
		{[]string{"-l", ""}, ""},
		{[]string{"collect", "--fo"}, ""},
		{[]string{"collect", "--sa"}, "--save"},
		{[]string{"explain", "--ho"}, "--host"},
		{[]string{"explain", "--host", "i"}, "included01"},
		{[]string{"node-check", "--d"}, "--drain --drain-unconstrained"},
		{[]string{"node-check", "k"}, ""},
		{[]string{"watch", "--un"}, "--until"},
		{[]string{"watch", "--until", ""}, "clean free ready"},
		{[]string{"watch", "--until", "free", "k"}, "known01 known02"},
		{[]string{"completion", ""}, "bash fish zsh"},
		{[]string{"help", "e"}, "exit-status explain"},
		{[]string{"-q", "--debug"}, "--debug-ssh"},
	}
	var prog strings.Builder
	prog.WriteString("source " + script + "\ncomp() { COMP_WORDS=(\"$@\"); COMP_CWORD=$((${#COMP_WORDS[@]}-1)); COMPREPLY=(); _gputriage; " +
		"printf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '; echo; }\n")
	for _, c := range cases {
		prog.WriteString("comp " + shellQuote(bin))
		for _, w := range c.words {
			prog.WriteString(" " + shellQuote(w))
		}
		prog.WriteString("\n")
	}
	cmd := exec.Command(bash, "--norc", "-c", prog.String())
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	for i, c := range cases {
		if i >= len(lines) || strings.TrimSpace(lines[i]) != c.want {
			t.Errorf("gputriage %q<Tab>: got %q, want %q", strings.Join(c.words, " "), at(lines, i), c.want)
		}
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return strings.TrimSpace(lines[i])
	}
	return "(nothing)"
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// TestFishCompletion asks fish itself (complete -C) what it would offer.
func TestFishCompletion(t *testing.T) {
	fish := shellOrSkip(t, "fish")
	bin, script, home := buildGputriage(t), writeScript(t, "fish"), completionHome(t)
	cases := []struct{ line, want string }{
		{"gputriage --format ", "json markdown prometheus text"},
		{"gputriage --only ", "all failed findings"},
		{"gputriage -w gpu", "gpu01 gpu02"},
		{"gputriage gpu01 known", "known01 known02"},
		{"gputriage completion ", "bash fish zsh"},
		{"gputriage collect --fo", ""},
		{"gputriage node-check --re", "--resume"},
		{"gputriage --debug", "--debug-ssh"},
	}
	for _, c := range cases {
		cmd := exec.Command(fish, "--no-config", "-c", "source "+shellQuote(script)+"; complete -C "+shellQuote(c.line))
		cmd.Env = []string{"HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH")}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%q<Tab>: fish offers %q, want %q", c.line, got, c.want)
		}
	}
}
