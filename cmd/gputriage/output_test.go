package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOutputFlags(t *testing.T) {
	fx := filepath.Join(repoRoot(t), "fixtures")
	for _, tt := range []struct {
		args []string
		err  string
	}{
		{[]string{"--only", "some"}, "--only must be failed, findings or all"},
		{[]string{"--sort", "name"}, "--sort must be host or severity"},
		{[]string{"--output", filepath.Join(t.TempDir(), "nodir", "r.md")}, "does not exist"},
		{[]string{"--output", t.TempDir()}, "is a directory"},
	} {
		out, errOut, code := cli(t, nil, append([]string{"--replay", fx}, tt.args...)...)
		if code != exitUsage || !strings.Contains(errOut, tt.err) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %d bytes", tt.args, code, errOut, len(out))
		}
	}

	// A fleet (the fixtures directory): the summary, then only hosts with problems.
	all, _, _ := cli(t, nil, "--replay", fx, "--only", "all", "--format", "json")
	var doc struct {
		Summary struct{ Hosts, OK int }
		Hosts   []struct{ Host, Hostname string }
	}
	if err := json.Unmarshal([]byte(all), &doc); err != nil {
		t.Fatal(err)
	}
	text, _, code := cli(t, nil, "--replay", fx, "--sort", "severity")
	if code != exitFindings || !strings.HasPrefix(text, "summary: ") || !strings.Contains(text, "not shown (--only findings)") {
		t.Errorf("fleet text (exit %d):\n%s", code, text)
	}
	if doc.Summary.Hosts != len(doc.Hosts) || doc.Summary.OK == 0 {
		t.Errorf("summary %+v of %d hosts", doc.Summary, len(doc.Hosts))
	}

	// --output writes the whole report to the file, mode 0644, and nothing to stdout; it
	// replaces an older report.
	path := filepath.Join(t.TempDir(), "ticket.md")
	if err := os.WriteFile(path, []byte("old report, longer than nothing"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := cli(t, nil, "--replay", fx, "--format", "markdown", "--redact", "--output", path)
	if out != "" || errOut != "" || code != exitFindings {
		t.Errorf("--output: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	if !strings.HasPrefix(md, "# gputriage: ") || !strings.Contains(md, "Redacted: ") || strings.Contains(md, "<summary>raw capture") {
		t.Errorf("--output markdown:\n%s", md)
	}
	// The fixtures' names are words ("clean" is also prose, "ghost" part of a finding code);
	// their probe-reported hostnames are names only.
	for _, h := range doc.Hosts {
		if h.Hostname == "" || strings.Contains(md, h.Hostname) {
			t.Errorf("--redact left hostname %q in the report", h.Hostname)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*.tmp")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
