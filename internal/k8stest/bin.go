package k8stest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// Suite names the lab's suite in skip messages (testenv.SkipSuite) and scripts/test's summary.
const Suite = "Kubernetes lab"

// Install is what provides the lab's servers: the build script of the tools module, which
// builds kube-apiserver, kine and kwok into a cache shared by every checkout on this machine.
// GPUTRIAGE_TEST_ABSENT=tools/k8s/build.sh simulates a machine that cannot build them.
const Install = "tools/k8s/build.sh"

// BinEnv names the environment variable that points the lab at a directory holding
// kube-apiserver, kine and kwok already built (tools/k8s/build.sh DIR); unset, the lab runs
// the build script, which reuses its cache.
const BinEnv = "GPUTRIAGE_K8S_BIN"

var programs = []string{"kube-apiserver", "kine", "kwok"}

// built caches, for the whole test binary, the directory the build script printed or why it
// gave none.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// Binaries returns the directory holding kube-apiserver, kine and kwok: $GPUTRIAGE_K8S_BIN, or
// the build script's cache, built now if it is not yet (a cold build takes many minutes; go's
// build cache keeps its progress if the test's deadline cuts it short). When none can be had
// the suite is skipped (testenv.SkipSuite) naming tools/k8s/build.sh, and fails under CI.
func Binaries(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t, Suite)
	if testenv.Absent(Install) {
		testenv.SkipSuite(t, Suite, Install, testenv.AbsentEnv+" lists it")
	}
	if dir := os.Getenv(BinEnv); dir != "" {
		if err := complete(dir); err != nil {
			testenv.SkipSuite(t, Suite, Install, fmt.Sprintf("$%s: %v", BinEnv, err))
		}
		return dir
	}
	built.once.Do(func() { built.dir, built.err = build(t) })
	if built.err != nil {
		testenv.SkipSuite(t, Suite, Install, built.err.Error())
	}
	return built.dir
}

// complete says why dir lacks one of the lab's programs, if it does.
func complete(dir string) error {
	for _, p := range programs {
		if fi, err := os.Stat(filepath.Join(dir, p)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("no %s in %s", p, dir)
		}
	}
	return nil
}

// build runs the build script (cached: quick once built) within the test binary's deadline,
// less a minute for the tests themselves, and returns the directory it printed.
func build(t testing.TB) (string, error) {
	script, err := findScript()
	if err != nil {
		return "", err
	}
	ctx := context.Background()
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Minute))
			defer cancel()
		}
	}
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	start := time.Now()
	err = cmd.Run()
	if ctx.Err() != nil {
		return "", fmt.Errorf("building kube-apiserver, kine and kwok did not finish before the test deadline (%v spent; run %s once, then test again)", time.Since(start).Round(time.Second), script)
	}
	if err != nil {
		return "", fmt.Errorf("%s failed (%v): %s", script, err, lastLines(errOut.String(), 5))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := lines[len(lines)-1]
	return dir, complete(dir)
}

// findScript finds tools/k8s/build.sh in the working directory (a package's, under go test) or
// a directory above it.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "tools", "k8s", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools/k8s/build.sh above the working directory")
		}
		dir = parent
	}
}

// lastLines returns at most n last lines of s, joined by " | ".
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
