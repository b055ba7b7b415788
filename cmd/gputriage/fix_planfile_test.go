//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/fix"
)

// A plan file another user could have written (group- or world-writable, or another user's)
// is refused before any host is contacted: exit 2, saying why.
func TestFixApplyRefusesPlanOthersCanWrite(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "ssh_config")
	// Were the plan applied, fix would connect here: a port nothing listens on.
	if err := os.WriteFile(config, []byte("Host gpu-plan\n  HostName 127.0.0.1\n  Port 1\n  StrictHostKeyChecking yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := fix.Plan{Version: fix.Version, ID: "0011223344556677", Hosts: []fix.HostPlan{{Host: "gpu-plan", BootID: strings.Repeat("ab", 16),
		Targets: []fix.Target{{Kind: fix.KindKill, PID: 4242, StartTicks: 1, ArgvSHA256: strings.Repeat("1", 64), Program: "python3"}}}}}
	var b bytes.Buffer
	if err := fix.Write(&b, p); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mode os.FileMode
		uid  int // -1: the test's own
		want string
	}{
		{"group-writable", 0o620, -1, "writable by group or others (mode 0620)"},
		{"world-writable", 0o666, -1, "writable by group or others (mode 0666)"},
		{"another user's", 0o600, 65534, "owned by uid 65534, not by you"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.uid >= 0 && os.Getuid() != 0 {
				t.Skip("needs root to give the file to another user")
			}
			plan := filepath.Join(dir, c.name+".json")
			if err := os.WriteFile(plan, b.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(plan, c.mode); err != nil {
				t.Fatal(err)
			}
			if c.uid >= 0 {
				if err := os.Chown(plan, c.uid, c.uid); err != nil {
					t.Fatal(err)
				}
			}
			out, errOut, code := cli(t, map[string]string{"XDG_STATE_HOME": dir}, "fix", "-F", config, "--yes", "--apply", plan)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s", code, exitUsage, c.want, out, errOut)
			}
		})
	}
}
