package triage

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/hostlist"
	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/sshexec"
)

// TestResolveK8sTargets: k8s/NODE is a host of the sweep labelled as typed, beside SSH hosts,
// each once, reached through the agent (with --sudo too: the agent is root, its plain sh runs
// the probe); a user, a port or a name no node can have is the command line's fault.
func TestResolveK8sTargets(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\ncurrent-context: lab\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\n"+
		"users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: lab\n  context: {cluster: c, user: u}\n"), 0o600)
	c := &Config{Kube: kube.Config{Kubeconfig: kc}, Sudo: true, Getenv: func(string) string { return "" }, Stderr: &bytes.Buffer{}}
	ts, err := hostlist.ExpandAll([]string{"k8s/gpu[1-2]", "localhost", "k8s/gpu1"})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := c.Resolve(ts)
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, h := range hs {
		labels = append(labels, h.Label)
	}
	if strings.Join(labels, " ") != "k8s/gpu1 k8s/gpu2 localhost" || hs[0].Node != "gpu1" || hs[2].Node != "" {
		t.Fatalf("resolved %q", labels)
	}
	via, ok := c.target(hs[0]).Via.(kube.NodeVia)
	if !ok || via.Node != "gpu1" || via.Command != "sh -s" || !via.Block {
		t.Errorf("k8s/gpu1 is reached by %#v", c.target(hs[0]).Via)
	}
	if c.target(hs[2]).Via != nil {
		t.Error("an SSH host is reached through the API")
	}
	var out bytes.Buffer
	if err := DryRun(&out, hs[:1], "text"); err != nil || !strings.Contains(out.String(), "pods/exec into the gputriage agent pod on node gpu1") {
		t.Errorf("--dry-run: %v\n%s", err, out.String())
	}
	for _, bad := range []string{"root@k8s/gpu1", "k8s/gpu1:22", "k8s/GPU1"} {
		ts, _ := hostlist.Expand(bad)
		if _, err := c.Resolve(ts); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

// TestProbeScript: the probe's input for kubectl debug ends in an exit line, after the script
// the sweep sends, under a nonce of its own.
func TestProbeScript(t *testing.T) {
	s := string(ProbeScript(sshexec.DefaultTimeout))
	if !strings.HasPrefix(s, "set -- ") || !strings.HasSuffix(s, "\nexit 0\n") || string(ProbeScript(sshexec.DefaultTimeout)) == s {
		t.Errorf("probe script: %.40q ... %q", s, s[len(s)-20:])
	}
}
