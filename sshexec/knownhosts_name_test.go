package sshexec

import (
	"os"
	"path/filepath"
	"testing"

	xknownhosts "golang.org/x/crypto/ssh/knownhosts"
)

// TestKnownHostsName: a name is known plainly, hashed (as HashKnownHosts writes it) or by a
// pattern; not when only @revoked, on another port, or absent.
func TestKnownHostsName(t *testing.T) {
	dir := t.TempDir()
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
	content := "plain01,10.0.0.1 " + key + xknownhosts.HashHostname("hashed01") + " " + key +
		"@revoked gone01 " + key + "[port01]:2222 " + key + "pat-* " + key
	file := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "absent"), file}
	for host, want := range map[string]bool{"plain01": true, "HASHED01": true, "hashed01": true, "pat-x": true,
		"gone01": false, "port01": false, "other": false} {
		if got := KnownHostsName(files, host); got != want {
			t.Errorf("KnownHostsName(%q) = %v, want %v", host, got, want)
		}
	}
}
