package dockertest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Holder builds ./gpuholder statically and imports it as image (e.g. "sglang:test"): one
// file, /usr/bin/python3, so that a container started with
//
//	python3 -m sglang.launch_server --model-path /dev/shm/NAME --files N --bytes B
//
// writes N model files of B bytes into its /dev/shm/NAME, maps them, prints "ready" and runs
// until SIGTERM, when it exits 0 at once.
func (d *Daemon) Holder(t testing.TB, image string) {
	t.Helper()
	bin := filepath.Join(d.Dir, "python3")
	build := exec.Command(goTool(), "build", "-trimpath", "-o", bin, ".")
	build.Dir = holderSource(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("dockertest: build the holder: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	var img bytes.Buffer
	tw := tar.NewWriter(&img)
	for _, dir := range []string{"usr/", "usr/bin/", "tmp/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: 0o755}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/bin/python3", Mode: 0o755, Size: int64(len(exe))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(exe); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	imp := exec.Command(d.docker, "import", "-", image)
	imp.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
	imp.Stdin = &img
	if out, err := imp.CombinedOutput(); err != nil {
		t.Fatalf("dockertest: docker import: %v\n%s", err, out)
	}
}

// HolderFile is the path of a Holder's model file i (from 1) of files in dir.
func HolderFile(dir string, i, files int) string {
	return fmt.Sprintf("%s/model-%05d-of-%05d.safetensors", dir, i, files)
}

// holderSource is the directory of ./gpuholder, next to this file.
func holderSource(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("dockertest: cannot find the holder's source")
	}
	return filepath.Join(filepath.Dir(file), "gpuholder")
}

// goTool is the go command: go test puts GOROOT/bin first on PATH.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
