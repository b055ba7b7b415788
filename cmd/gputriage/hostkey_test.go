package main

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/internal/sshdtest"
	"github.com/gputriage/gputriage/internal/testenv"
)

// Host key verdicts, as both OpenSSH's ssh and gputriage reach them.
const (
	vAccepted = "accepted"            // connected; no file written
	vUnknown  = "refused as unknown"  // no known key, and nothing recorded
	vChanged  = "refused as changed"  // known_hosts holds another key for the host
	vRevoked  = "refused as revoked"  // the key is marked @revoked
	vRecorded = "accepted, recorded " // + which file and host field ("hashed" for a hashed one)
)

// hostKeyCase is one known_hosts situation, run against the same real sshd with the installed
// ssh and with gputriage, reading the same ssh_config and the same known_hosts files.
type hostKeyCase struct {
	name string
	host string // the host argument; default "localhost"
	// conf holds ssh_config lines that come before the shared defaults (first value wins);
	// {{user}}, {{global}} and {{dir}} name this case's user and global files and its directory.
	conf string
	// user and global are the known_hosts files' contents; "" leaves the file absent.
	user, global string
	flag         bool   // --accept-new (ssh: -o StrictHostKeyChecking=accept-new) instead of the config's
	strict       string // StrictHostKeyChecking in the config; default accept-new
	want         string // the verdict of both
	// ours, when set, is gputriage's verdict where it deliberately differs from ssh's (want):
	// stricter, or recording in another form; why says why.
	ours, why string
	stderr    []string // what gputriage must say on stderr
}

// TestHostKeysAsStrictAsOpenSSH proves, case by case, that gputriage reaches the verdict the
// installed OpenSSH client reaches on the same known_hosts: never accepting a key ssh would call
// changed or unknown, and recording exactly what ssh records, where ssh records it.
func TestHostKeysAsStrictAsOpenSSH(t *testing.T) {
	sshdtest.SSHDPath(t)
	sshBin := testenv.Need(t, "OpenSSH client", "apt-get install openssh-client", "ssh")
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	srv := sshdtest.Start(t, sshdtest.Config{Name: "keyhost", Addr: "127.0.0.1", Port: 2283, AuthorizedKeys: []string{pub}, SMI: cleanSMI(1)})
	right := srv.HostKeyPub
	_, otherLine := sshdtest.UserKey(t, t.TempDir(), "ed25519")
	other := strings.Join(strings.Fields(otherLine)[:2], " ")
	long := "# " + strings.Repeat("x", 200<<10) + "\n" // a comment line of 200 KiB
	var names strings.Builder
	for i := 0; i < 12000; i++ { // a valid entry line of about 200 KiB
		fmt.Fprintf(&names, "node%05d.cluster.example,", i)
	}

	cases := []hostKeyCase{
		{name: "upper-case entry with another key", user: "[LOCALHOST]:2283 " + other + "\n", want: vChanged},
		{name: "upper-case entry with another key, --accept-new", user: "[LOCALHOST]:2283 " + other + "\n", flag: true, strict: "yes", want: vChanged},
		{name: "upper-case entry with the key", user: "[LocalHost]:2283 " + right + "\n", strict: "yes", want: vAccepted},
		{name: "mixed-case host argument, entry with another key", host: "LocalHost", user: "[localhost]:2283 " + other + "\n", want: vChanged},
		{name: "mixed-case host argument, upper-case entry with the key", host: "LocalHost", user: "[LOCALHOST]:2283 " + right + "\n", strict: "yes", want: vAccepted},
		{name: "mixed-case HostKeyAlias, entry with another key", conf: "HostKeyAlias GPU-Key.Example\n", user: "gpu-key.example " + other + "\n", want: vChanged},
		{name: "mixed-case HostKeyAlias, upper-case entry with another key", conf: "HostKeyAlias Gpu-Key.example\n", user: "GPU-KEY.EXAMPLE " + other + "\n", want: vChanged},
		{name: "mixed-case HostKeyAlias is recorded lower-case", conf: "HostKeyAlias GPU-Key.Example\n", want: vRecorded + "user gpu-key.example"},
		{name: "long line before an entry with another key", user: long + "[localhost]:2283 " + other + "\n", want: vChanged},
		{name: "long line before an entry with the key", user: long + "[localhost]:2283 " + right + "\n", strict: "yes", want: vAccepted},
		{name: "long valid entry naming the host with another key", user: names.String() + "[localhost]:2283 " + other + "\n", want: vChanged},
		{name: "hashed entry with another key", user: hashed("[localhost]:2283") + " " + other + "\n", want: vChanged},
		{name: "hashed entry with the key", user: long + hashed("[localhost]:2283") + " " + right + "\n", strict: "yes", want: vAccepted},
		{name: "hashed upper-case name matches nothing", user: hashed("[LOCALHOST]:2283") + " " + other + "\n", want: vRecorded + "user [localhost]:2283",
			ours: vRecorded + "user hashed [localhost]:2283", why: "gputriage hashes new names in a file that holds hashed ones; ssh only with HashKnownHosts yes"},
		{name: "entry without port with the key", user: "localhost " + right + "\n", strict: "yes", want: vAccepted},
		{name: "entry without port with another key", user: "localhost " + other + "\n", want: vRecorded + "user [localhost]:2283"},
		{name: "wildcard without port with another key", user: "local* " + other + "\n", want: vRecorded + "user [localhost]:2283"},
		{name: "wildcard with the key", user: "[l?c*]:22* " + right + "\n", strict: "yes", want: vAccepted},
		{name: "negated pattern", user: "*,![localhost]:2283 " + other + "\n", want: vRecorded + "user [localhost]:2283"},
		{name: "revoked key", user: "[localhost]:2283 " + right + "\n@revoked * " + right + "\n", want: vRevoked},
		{name: "UserKnownHostsFile none with accept-new", conf: "UserKnownHostsFile none\n", global: "# nothing\n", want: vUnknown},
		{name: "UserKnownHostsFile none, GlobalKnownHostsFile none", conf: "UserKnownHostsFile none\nGlobalKnownHostsFile none\n", want: vUnknown},
		{name: "UserKnownHostsFile none, global entry with the key", conf: "UserKnownHostsFile none\n", global: "[localhost]:2283 " + right + "\n", strict: "yes", want: vAccepted},
		{name: "global entry with another key", global: "[LOCALHOST]:2283 " + other + "\n", want: vChanged},
		{name: "global entry with the key", user: "# empty\n", global: "[localhost]:2283 " + right + "\n", strict: "yes", want: vAccepted},
		{name: "unknown host recorded in the user file", global: "# nothing\n", want: vRecorded + "user [localhost]:2283"},
		{name: "unreadable user file, the key in the second one", conf: "UserKnownHostsFile {{dir}}/kh.d {{user}}\n", user: "[localhost]:2283 " + right + "\n", strict: "yes", want: vAccepted,
			stderr: []string{"kh.d", "not read fully"}},
		{name: "unreadable user file with accept-new", conf: "UserKnownHostsFile {{dir}}/kh.d\n", want: vAccepted,
			ours: vUnknown, why: "ssh reads nothing, fails to record and connects; gputriage cannot rule out a changed key",
			stderr: []string{"kh.d", "is a directory", "accept-new is off for this run"}},
		{name: "unreadable global file with accept-new", conf: "GlobalKnownHostsFile {{dir}}/kh.d\n", want: vRecorded + "user [localhost]:2283",
			ours: vUnknown, why: "the global file may hold another key for the host",
			stderr: []string{"kh.d", "accept-new is off for this run"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newKeyCase(t, tc, key)
			got := c.openSSH(t, sshBin)
			if got != tc.want {
				t.Fatalf("ssh: %s, want %s", got, tc.want)
			}
			want := tc.want
			if tc.ours != "" {
				want = tc.ours
			}
			got, stderr := c.gputriage(t)
			if got != want {
				t.Fatalf("gputriage: %s, want %s (ssh: %s)\nstderr:\n%s", got, want, tc.want, stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
		})
	}
}

// hashed is host hashed as ssh-keygen -H writes it.
func hashed(host string) string {
	salt := make([]byte, sha1.Size)
	_, _ = rand.Read(salt)
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// unhash returns name when field is name hashed, "?" otherwise.
func unhash(field, name string) string {
	f := strings.Split(field, "|")
	if len(f) != 4 {
		return "?"
	}
	salt, err := base64.StdEncoding.DecodeString(f[2])
	if err != nil {
		return "?"
	}
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(name))
	if base64.StdEncoding.EncodeToString(mac.Sum(nil)) != f[3] {
		return "?"
	}
	return name
}

type keyCase struct {
	hostKeyCase
	dir, config, user, global string
}

func newKeyCase(t *testing.T, tc hostKeyCase, identity string) *keyCase {
	c := &keyCase{hostKeyCase: tc, dir: t.TempDir()}
	c.user, c.global = filepath.Join(c.dir, "user_known_hosts"), filepath.Join(c.dir, "global_known_hosts")
	if err := os.Mkdir(filepath.Join(c.dir, "kh.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	if c.host == "" {
		c.host = "localhost"
	}
	if c.strict == "" {
		c.strict = "accept-new"
	}
	r := strings.NewReplacer("{{user}}", c.user, "{{global}}", c.global, "{{dir}}", c.dir)
	conf := "Host *\n" + r.Replace(tc.conf) + fmt.Sprintf("Port 2283\nUser root\nIdentityFile %s\nIdentitiesOnly yes\n"+
		"UserKnownHostsFile %s\nGlobalKnownHostsFile %s\nStrictHostKeyChecking %s\n", identity, c.user, c.global, c.strict)
	c.config = filepath.Join(c.dir, "ssh_config")
	if err := os.WriteFile(c.config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

// reset writes the known_hosts files afresh, so that each client starts from the same state.
func (c *keyCase) reset(t *testing.T) {
	t.Helper()
	for path, content := range map[string]string{c.user: c.hostKeyCase.user, c.global: c.hostKeyCase.global} {
		_ = os.Remove(path)
		if content != "" {
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// recorded says which file gained which host field since reset, or "" when none changed.
func (c *keyCase) recorded(t *testing.T) string {
	t.Helper()
	var out []string
	for _, f := range []struct{ label, path, before string }{{"user", c.user, c.hostKeyCase.user}, {"global", c.global, c.hostKeyCase.global}} {
		now, _ := os.ReadFile(f.path)
		if string(now) == f.before {
			continue
		}
		added, ok := strings.CutPrefix(string(now), f.before)
		host := strings.Fields(added + " ?")[0]
		if !ok {
			host = "(rewritten)"
		} else if strings.HasPrefix(host, "|1|") {
			host = "hashed " + unhash(host, "[localhost]:2283")
		}
		out = append(out, f.label+" "+host)
	}
	return strings.Join(out, ", ")
}

func (c *keyCase) openSSH(t *testing.T, ssh string) string {
	t.Helper()
	c.reset(t)
	args := []string{"-F", c.config, "-o", "BatchMode=yes"}
	if c.flag {
		args = append(args, "-o", "StrictHostKeyChecking=accept-new")
	}
	cmd := exec.Command(ssh, append(args, c.host, "true")...)
	cmd.Env = []string{"HOME=" + c.dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.CombinedOutput()
	s := string(out)
	switch {
	case err == nil:
		if r := c.recorded(t); r != "" {
			return vRecorded + r
		}
		return vAccepted
	case strings.Contains(s, "REVOKED HOST KEY"):
		return vRevoked
	case strings.Contains(s, "REMOTE HOST IDENTIFICATION HAS CHANGED") || strings.Contains(s, "has changed and you have requested strict checking"):
		return vChanged
	case strings.Contains(s, "Host key verification failed"):
		if r := c.recorded(t); r != "" {
			t.Fatalf("ssh refused the key but recorded %s", r)
		}
		return vUnknown
	}
	t.Fatalf("ssh failed for another reason: %v\n%s", err, s)
	return ""
}

func (c *keyCase) gputriage(t *testing.T) (verdict, stderr string) {
	t.Helper()
	c.reset(t)
	args := []string{"-F", c.config, "--timeout", "30s", "--format", "json"}
	if c.flag {
		args = append(args, "--accept-new")
	}
	out, stderr, _ := cli(t, nil, append(args, c.host)...)
	var doc jsonDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Hosts) != 1 {
		t.Fatalf("gputriage output: %v\n%s\nstderr:\n%s", err, out, stderr)
	}
	h := doc.Hosts[0]
	rec := c.recorded(t)
	switch {
	case h.OK && rec != "":
		return vRecorded + rec, stderr
	case h.OK:
		return vAccepted, stderr
	case rec != "":
		t.Fatalf("gputriage refused the key but recorded %s", rec)
	case h.Error.Kind == "revoked":
		return vRevoked, stderr
	case h.Error.Kind == "host-key-changed":
		return vChanged, stderr
	case h.Error.Kind == "unknown-host-key":
		return vUnknown, stderr + h.Error.Message
	}
	t.Fatalf("gputriage failed for another reason: %s/%s: %s", h.Error.Phase, h.Error.Kind, h.Error.Message)
	return "", ""
}
