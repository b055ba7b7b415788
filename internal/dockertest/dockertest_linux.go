package dockertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// daemonPATH is the PATH dockerd runs with: it finds containerd, runc and the shim there.
const daemonPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Daemon is a running dockerd.
type Daemon struct {
	Dir    string // data and exec roots, socket, config, key, log
	Host   string // its DOCKER_HOST: unix://DIR/docker.sock
	Driver string // the storage driver it runs with: overlay2 or vfs

	docker string // the docker CLI
	cmd    *exec.Cmd
	done   chan struct{}
}

// binaries finds dockerd, the docker CLI and what dockerd runs, or skips saying what is
// missing; under CI (CI=true) a missing one fails instead.
func binaries(t testing.TB) map[string]string {
	t.Helper()
	testenv.SkipShort(t, "Docker")
	if os.Geteuid() != 0 {
		testenv.SkipSuite(t, "Docker", "run as root", "dockerd must run as root (CI runs as root)")
	}
	return testenv.Programs(t, "Docker", "apt-get install docker.io",
		[]string{"dockerd", "docker", "containerd", "containerd-shim-runc-v2", "runc"}, filepath.SplitList(daemonPATH))
}

// Start starts a dockerd and waits until it answers; it stops at cleanup, with every
// container it ran.
func Start(t testing.TB) *Daemon {
	t.Helper()
	bins := binaries(t)
	// Not t.TempDir: the API and containerd sockets must fit in a sockaddr_un (108 bytes).
	dir, err := os.MkdirTemp("", "dockertest-")
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	d := &Daemon{Dir: dir, Host: "unix://" + filepath.Join(dir, "docker.sock"), docker: bins["docker"]}
	t.Cleanup(d.stop)
	// dockerd 20.10 writes its identity key to /etc/docker/key.json unless told otherwise.
	conf := fmt.Sprintf(`{"deprecated-key-path": %q}`, filepath.Join(dir, "key.json"))
	if err := os.WriteFile(d.path("daemon.json"), []byte(conf), 0o600); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	var why []string
	for _, driver := range []string{"overlay2", "vfs"} {
		err := d.launch(bins["dockerd"], driver)
		if err == nil {
			return d
		}
		why = append(why, fmt.Sprintf("%s: %v", driver, err))
		d.stopDaemon()
	}
	t.Fatalf("dockertest: dockerd did not start:\n%s\n%s", strings.Join(why, "\n"), d.Log())
	return nil
}

func (d *Daemon) path(name string) string { return filepath.Join(d.Dir, name) }

// launch starts dockerd with a storage driver and waits up to a minute for its API.
func (d *Daemon) launch(dockerd, driver string) error {
	log, err := os.OpenFile(d.path("dockerd.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close()
	d.cmd = exec.Command(dockerd, "--config-file", d.path("daemon.json"),
		"--data-root", d.path("data"), "--exec-root", d.path("exec"), "--pidfile", d.path("docker.pid"),
		"-H", d.Host, "--iptables=false", "--ip6tables=false", "--bridge=none",
		"--storage-driver", driver, "--exec-opt", "native.cgroupdriver=cgroupfs")
	d.cmd.Env = []string{"PATH=" + daemonPATH, "HOME=" + d.Dir}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	// Pdeathsig: a test binary killed (go test's -timeout) takes its daemons with it, rather than
	// leave them holding the ports and state the next run needs.
	d.cmd.SysProcAttr = testenv.DieWithTest(true)
	if err := d.cmd.Start(); err != nil {
		return err
	}
	d.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { cmd.Wait(); close(done) }(d.cmd, d.done)
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := d.Output("info", "--format", "{{.Driver}}")
		if err == nil && out == driver {
			d.Driver = driver
			return nil
		}
		select {
		case <-d.done:
			return fmt.Errorf("dockerd exited: %v", d.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer after a minute (%v: %s)", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Log is what dockerd (and its containerd) logged so far.
func (d *Daemon) Log() string {
	b, _ := os.ReadFile(d.path("dockerd.log"))
	return string(b)
}

// Output runs the docker CLI against this daemon and returns its standard output, trimmed.
func (d *Daemon) Output(args ...string) (string, error) {
	cmd := exec.Command(d.docker, args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+d.Host)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return strings.TrimSpace(string(out)), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Docker runs the docker CLI against this daemon and returns its standard output; an error
// fails the test.
func (d *Daemon) Docker(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.Output(args...)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	return out
}

// State is what `docker inspect` says of a container's state.
type State struct {
	Status     string // created, running, exited, ...
	Running    bool
	Pid        int // its process as the machine sees it; 0 when it does not run
	ExitCode   int
	StartedAt  time.Time
	FinishedAt time.Time
}

// Inspect is the container's full id and state, as the engine reports them.
func (d *Daemon) Inspect(t testing.TB, name string) (id string, st State) {
	t.Helper()
	out := d.Docker(t, "inspect", "--type", "container", "--format", "{{.Id}} {{json .State}}", "--", name)
	id, js, _ := strings.Cut(out, " ")
	if err := json.Unmarshal([]byte(js), &st); err != nil {
		t.Fatalf("dockertest: inspect %s: %v: %q", name, err, out)
	}
	return id, st
}

// Run starts a detached container without a network and returns its full id.
func (d *Daemon) Run(t testing.TB, name, image string, argv ...string) string {
	t.Helper()
	args := append([]string{"run", "--detach", "--name", name, "--network", "none", "--", image}, argv...)
	return d.Docker(t, args...)
}

// WaitHolder waits up to within until a Holder started in the running container with
// --model-path dir --files files is ready, and returns its PID as the machine sees it: the
// container's own process, or one started in it by docker exec. Ready is when it maps its
// last file: it maps them in order, and has written them all by then, so that deleting them
// afterwards leaves it mapping every one.
func (d *Daemon) WaitHolder(t testing.TB, name, dir string, files int, within time.Duration) int {
	t.Helper()
	last := HolderFile(dir, files, files)
	deadline := time.Now().Add(testenv.Scale(within)) // a loaded machine takes longer
	for {
		id, st := d.Inspect(t, name)
		if st.Running {
			if pid := mapping(id, last); pid > 0 {
				return pid
			}
		}
		if time.Now().After(deadline) {
			logs, _ := d.Output("logs", "--", name)
			t.Fatalf("dockertest: no process of %s maps %s after %v: %+v\n%s", name, last, within, st, logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// mapping is a process whose cgroup names the container id and that maps the file path; 0
// when there is none.
func mapping(id, path string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		cg, err := os.ReadFile(dir + "/cgroup")
		if err != nil || !bytes.Contains(cg, []byte("/docker/"+id)) {
			continue
		}
		maps, _ := os.ReadFile(dir + "/maps")
		if bytes.Contains(maps, []byte(" "+path+"\n")) || bytes.Contains(maps, []byte(" "+path+" (deleted)\n")) {
			pid, _ := strconv.Atoi(filepath.Base(dir))
			return pid
		}
	}
	return 0
}

// stop removes every container, stops dockerd (and with it its containerd), unmounts what
// is left below the directory and removes it.
func (d *Daemon) stop() {
	if d.cmd != nil {
		if ids, err := d.Output("ps", "--all", "--quiet", "--no-trunc"); err == nil && ids != "" {
			_, _ = d.Output(append([]string{"rm", "--force", "--volumes", "--"}, strings.Fields(ids)...)...)
		}
	}
	d.stopDaemon()
	unmountBelow(d.Dir)
	_ = os.RemoveAll(d.Dir)
}

// stopDaemon ends dockerd: SIGTERM, then SIGKILL to its process group after 20 s.
func (d *Daemon) stopDaemon() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
	d.cmd = nil
}

// unmountBelow detaches every mount at or below dir (a daemon killed mid-way leaves its
// layers, shm and network namespace mounts), deepest first.
func unmountBelow(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	for _, p := range points {
		_ = syscall.Unmount(p, syscall.MNT_DETACH)
	}
}
