package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// dymHome is a HOME whose ~/.ssh holds the given files.
func dymHome(t *testing.T, files map[string]string) string {
	t.Helper()
	home := t.TempDir()
	for name, body := range files {
		p := filepath.Join(home, ".ssh", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

// TestDidYouMeanCommand: a subcommand mistyped as the first word is refused with the command
// meant and how to reach a host of that name, exit 2, before any host is resolved; after --,
// or when the user's ssh files name it, the word is a host.
func TestDidYouMeanCommand(t *testing.T) {
	defer func(s []string) { systemKnownHosts = s }(systemKnownHosts)
	systemKnownHosts = nil
	env := map[string]string{"HOME": dymHome(t, nil)}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fxi", "gpu01"}, `gputriage: "fxi" is not a command: did you mean fix? (to reach a host named fxi: gputriage -- fxi)`},
		{[]string{"explian", "CUDA error: out of memory"}, `gputriage: "explian" is not a command: did you mean explain? (to reach a host named explian: gputriage -- explian)`},
		{[]string{"colect", "--save", t.TempDir(), "gpu01"}, `did you mean collect?`},
		{[]string{"--sudo", "hepl"}, `did you mean help?`},
		{[]string{"fxi", "--yse", "gpu01"}, `did you mean fix?`}, // the command, not its flag
	} {
		out, errOut, code := cli(t, env, tc.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("gputriage %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}

	// Hosts: after --, named by ssh_config (or -F FILE), by known_hosts, or not near a command.
	named := dymHome(t, map[string]string{"config": "Host fxi\n  HostName 10.9.9.9\n", "other": "Host colect\n"})
	known := dymHome(t, map[string]string{"known_hosts": "[explian]:2222,10.1.1.1 ssh-ed25519 AAAA\n"})
	hashed := dymHome(t, map[string]string{"known_hosts": xknownhosts.HashHostname("hepl") +
		" ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"})
	for _, tc := range []struct {
		home string
		args []string
		host string
	}{
		{env["HOME"], []string{"--", "fxi"}, "fxi"},
		{env["HOME"], []string{"gpu01", "--", "fxi"}, "gpu01"},
		{named, []string{"fxi"}, "fxi"},
		{named, []string{"-F", filepath.Join(named, ".ssh", "other"), "colect"}, "colect"},
		{known, []string{"explian"}, "explian"},
		{hashed, []string{"hepl"}, "hepl"},
		{env["HOME"], []string{"gpu1"}, "gpu1"},
		{env["HOME"], []string{"batch"}, "batch"},
		{env["HOME"], []string{"ab"}, "ab"},
		{env["HOME"], []string{"root@fxi"}, "root@fxi"},
		{env["HOME"], []string{"fxi.corp"}, "fxi.corp"},
	} {
		out, errOut, code := cli(t, map[string]string{"HOME": tc.home}, append([]string{"--dry-run"}, tc.args...)...)
		if code != exitOK || !strings.HasPrefix(out, tc.host+"\n") || strings.Contains(errOut, "did you mean") {
			t.Errorf("gputriage --dry-run %q: exit %d, stdout %q, stderr %q; want host %s", tc.args, code, out, errOut, tc.host)
		}
	}
}

// TestDidYouMeanFlag: an unknown flag near one of the command's is refused naming it; near
// another command's, naming that command too; a flag of another command keeps its message.
func TestDidYouMeanFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--replya", "x"}, "gputriage: unknown flag --replya: did you mean --replay?\n"},
		{[]string{"--replya=x"}, "gputriage: unknown flag --replya: did you mean --replay?\n"},
		{[]string{"fix", "--yse", "gpu01"}, "gputriage: fix: unknown flag --yse: did you mean --yes?\n"},
		{[]string{"watch", "--untl", "x", "gpu01"}, "gputriage: watch: unknown flag --untl: did you mean --until?\n"},
		{[]string{"--yse", "gpu01"}, "gputriage: unknown flag --yse: did you mean --yes? (a flag of gputriage fix)\n"},
		{[]string{"fix", "--replya", "x"}, "gputriage: fix: unknown flag --replya: did you mean --replay?\n"},
		{[]string{"fix", "--lcoal", "gpu01"}, "gputriage: fix: unknown flag --lcoal: did you mean --local? (a flag of gputriage without a command, not of gputriage fix)\n"},
		{[]string{"fix", "--local", "gpu01"}, "gputriage: fix: --local: not a flag of gputriage fix\n"},
		{[]string{"--zzzzzz", "gpu01"}, "gputriage: unknown flag: --zzzzzz\n"},
	} {
		out, errOut, code := cli(t, nil, tc.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(errOut, tc.want) {
			t.Errorf("gputriage %q: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
