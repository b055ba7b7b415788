// Command gpuholder stands in for an inference server inside a test container: it writes
// model files under --model-path (in the container's /dev/shm), maps each one, says "ready"
// on standard output, and runs until SIGTERM, when it exits 0 at once, as a server that
// shuts down cleanly on `docker stop` does. It is built statically by internal/dockertest and
// put in an image as /usr/bin/python3, so that its command line reads as the server's
// (python3 -m sglang.launch_server --model-path ...); it ignores every argument but
// --model-path, --files and --bytes.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
)

func main() {
	dir, files, size := "/dev/shm/model", 2, 1<<20
	// The server's other arguments (-m, --tp) are skipped.
	args := os.Args[1:]
	for i := 0; i+1 < len(args); i++ {
		var err error
		switch args[i] {
		case "--model-path":
			dir = args[i+1]
		case "--files":
			files, err = strconv.Atoi(args[i+1])
		case "--bytes":
			size, err = strconv.Atoi(args[i+1])
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gpuholder:", err)
			os.Exit(2)
		}
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM, syscall.SIGINT)
	if err := hold(dir, files, size); err != nil {
		fmt.Fprintln(os.Stderr, "gpuholder:", err)
		os.Exit(1)
	}
	fmt.Println("ready")
	<-terms
	os.Exit(0)
}

// hold writes and maps the model files, in order (dockertest.HolderFile names them, and waits
// for the last one's mapping); the mappings outlive the files' deletion.
func hold(dir string, files, size int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := 1; i <= files; i++ {
		name := filepath.Join(dir, fmt.Sprintf("model-%05d-of-%05d.safetensors", i, files))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		if err := f.Truncate(int64(size)); err != nil {
			return err
		}
		m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
		if err != nil {
			return err
		}
		for j := 0; j < len(m); j += 4096 {
			m[j] = 1
		}
		f.Close()
	}
	return nil
}
