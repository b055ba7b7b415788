package k8stest

import (
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gputriage/gputriage/internal/testenv"
)

// daemon is one of the lab's servers, its output in a log file of the lab's directory.
type daemon struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed once the process has exited and been reaped
	err  error
}

// start starts a lab daemon with the test binary's environment.
func (l *Lab) start(path string, args ...string) *daemon { return l.startEnv(nil, path, args...) }

// startEnv starts a lab daemon with env added to the test binary's environment, in a process
// group of its own that dies with the test binary (deathsig).
func (l *Lab) startEnv(env []string, path string, args ...string) *daemon {
	l.t.Helper()
	d := &daemon{name: filepath.Base(path), log: filepath.Join(l.Dir, filepath.Base(path)+".log"), done: make(chan struct{})}
	f, err := os.Create(d.log)
	if err != nil {
		l.t.Fatal(err)
	}
	defer f.Close()
	d.cmd = exec.Command(path, args...)
	d.cmd.Dir = l.Dir
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = f, f
	d.cmd.SysProcAttr = testenv.DieWithTest(true)
	if err := d.cmd.Start(); err != nil {
		l.t.Fatalf("k8stest: start %s: %v", path, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	l.daemons = append(l.daemons, d)
	return d
}

// Stop stops the daemons, last started first (kwok, the API server, kine): SIGTERM to each
// one's process group, SIGKILL after five seconds. A failed test gets their logs first. Stop
// is called at cleanup; calling it earlier is fine.
func (l *Lab) Stop() {
	if l.t.Failed() && len(l.daemons) > 0 {
		l.t.Logf("k8stest: the lab's logs (%s):\n%s", l.Dir, l.Logs())
	}
	for i := len(l.daemons) - 1; i >= 0; i-- {
		l.daemons[i].stop()
	}
	l.daemons = nil
}

func (d *daemon) stop() { testenv.StopGroup(d.cmd.Process.Pid, d.done) }

// tail returns the last 4 KiB of the daemon's log.
func (d *daemon) tail() string {
	b, _ := os.ReadFile(d.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
