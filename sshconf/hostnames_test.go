package sshconf

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestHostNames: Host names without patterns from the config and what it includes, then the
// plain names of known_hosts ([host]:port as host; hashed and @revoked lines skipped), each
// once, sorted; a name a shell would need quoted is left out.
func TestHostNames(t *testing.T) {
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	files := map[string]string{
		"config":      "Host gpu01 gpu-* 'quoted'\nHost=eq-host # comment\nInclude conf.d/*\n",
		"conf.d/a":    "Host included01 gpu01\n",
		"known_hosts": "known01,10.0.0.5 ssh-ed25519 AAAA\n[known02]:2222 ssh-ed25519 AAAA\n|1|abc=|def= ssh-ed25519 AAAA\n@revoked gone01 ssh-ed25519 AAAA\n",
	}
	for name, text := range files {
		p := filepath.Join(ssh, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	system := filepath.Join(home, "ssh_known_hosts")
	if err := os.WriteFile(system, []byte("sys01 ssh-ed25519 AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := HostNames(home, []string{system, filepath.Join(home, "absent")})
	want := []string{"10.0.0.5", "eq-host", "gpu01", "included01", "known01", "known02", "sys01"}
	if !slices.Equal(got, want) {
		t.Errorf("HostNames = %q, want %q", got, want)
	}
}

// TestHostNamesIn: with a config of its own (ssh -F), its Host names and what it includes
// stand for ~/.ssh/config's; known_hosts still count.
func TestHostNamesIn(t *testing.T) {
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(filepath.Join(ssh, "conf.d"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"config":      "Host home01\n",
		"other":       "Host other01\nInclude conf.d/*\n",
		"conf.d/a":    "Host included01\n",
		"known_hosts": "known01 ssh-ed25519 AAAA\n",
	} {
		if err := os.WriteFile(filepath.Join(ssh, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := HostNamesIn(filepath.Join(ssh, "other"), home, nil)
	want := []string{"included01", "known01", "other01"}
	if !slices.Equal(got, want) {
		t.Errorf("HostNamesIn = %q, want %q", got, want)
	}
}
