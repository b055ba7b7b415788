package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// scripts/release.sh, run as the README says, builds static binaries (gputriage and the
// Kubernetes agent's) whose `version` prints the version and revision they were stamped with,
// and a SHA256SUMS that `sha256sum -c` accepts.
// It builds for this machine only (CI's .ci/run builds all four targets and checks them too).
func TestReleaseBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release binary (-short)")
	}
	if runtime.GOOS != "linux" {
		t.Skip("the release binary checked is the linux one")
	}
	root := repoRoot(t)
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := t.TempDir()
	const ver = "v9.9.9-releasetest"
	cmd := exec.Command(filepath.Join(root, "scripts", "release.sh"), dir, "linux/"+runtime.GOARCH)
	cmd.Env = append(os.Environ(), "VERSION="+ver)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, out)
	}
	for _, name := range []string{"gputriage", "gputriage-agent"} {
		checkReleaseBinary(t, dir, name+"-linux-"+runtime.GOARCH, name+" "+ver+"\n", "revision:  "+strings.TrimSpace(string(rev)))
	}
	// The agent image (contrib/k8s/Dockerfile) copies the agent binary the release makes.
	docker, err := os.ReadFile(filepath.Join(root, "contrib", "k8s", "Dockerfile"))
	if err != nil || !strings.Contains(string(docker), "COPY dist/gputriage-agent-linux-${ARCH} /usr/local/bin/gputriage-agent\n") {
		t.Errorf("contrib/k8s/Dockerfile does not copy the release's gputriage-agent (%v)", err)
	}
}

// checkReleaseBinary: dir's binary name prints each of want for `version`, SHA256SUMS holds
// it, and it is static.
func checkReleaseBinary(t *testing.T, dir, name string, want ...string) {
	t.Helper()
	bin := filepath.Join(dir, name)
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("%s version lacks %q:\n%s", name, w, out)
		}
	}
	sums := exec.Command("sha256sum", "-c", "SHA256SUMS")
	sums.Dir = dir
	if out, err := sums.CombinedOutput(); err != nil || !strings.Contains(string(out), name+": OK") {
		t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (it names an ELF interpreter)", name)
		}
	}
}

// The README says how to install before its sample report, and installs gputriage where the
// Prometheus unit, its cron line and the Slurm health check run it.
func TestReleaseReadmeInstallsWhereItRuns(t *testing.T) {
	root := repoRoot(t)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	readme := read("README.md")
	install, sample := strings.Index(readme, "\n## Install\n"), strings.Index(readme, "\n```text\n")
	if install < 0 || sample < 0 || install > sample {
		t.Errorf("README: Install (at %d) does not come before the sample report (at %d)", install, sample)
	}
	run := regexp.MustCompile(`(?m)(?:^ExecStart=|root flock -n \S+ |^exec )(/\S+/gputriage) `)
	n := 0
	for _, name := range []string{"contrib/prometheus/gputriage-textfile.service", "contrib/prometheus/gputriage.cron", "docs/prometheus.md", "docs/slurm.md"} {
		for _, m := range run.FindAllStringSubmatch(read(name), -1) {
			n++
			if !strings.Contains(readme, "install -m755 dist/gputriage-linux-amd64 "+m[1]+" ") {
				t.Errorf("%s runs %s, which the README does not install", name, m[1])
			}
		}
	}
	if n < 4 {
		t.Errorf("found only %d places that run gputriage", n)
	}
}
