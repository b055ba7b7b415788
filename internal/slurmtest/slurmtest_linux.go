package slurmtest

import (
	"context"
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

// LockPath is the flock every Slurm-starting test holds; Start takes it.
const LockPath = "/tmp/gputriage-slurm.lock"

// CtldPort is slurmctld's port; the nodes listen on NodePort+0..3.
const (
	CtldPort = 17000
	NodePort = 17001
)

// Config describes a cluster. The zero Config is four idle nodes in one partition, "debug".
type Config struct {
	// Conf are slurm.conf lines added to the defaults; a line whose key a default line has
	// (KillWait=1, ProctrackType=...) replaces that default instead.
	Conf []string
	// GPUs, when positive, gives every node that many GPUs as GRES (GresTypes=gpu, Gres=gpu:N;
	// gres.conf AutoDetect=off), backed by character devices DIR/dev/nvidia0.. so that Slurm
	// hands jobs SLURM_JOB_GPUS and CUDA_VISIBLE_DEVICES, and their prologs and epilogs
	// SLURM_JOB_GPUS. The zero value is a cluster that does not manage GPUs as GRES.
	GPUs int
	// Env is added to the daemons' environment. slurmd does not pass it on: its
	// HealthCheckProgram gets only SLURMD_NODENAME (no PATH, no SLURM_CONF), its Prolog and
	// Epilog Slurm's job variables, SLURM_CONF and SLURM_SCRIPT_CONTEXT (22.05), no PATH.
	Env []string
}

// Cluster is a running cluster.
type Cluster struct {
	Dir  string // slurm.conf, cgroup.conf, the munge key and socket, logs, spool and state
	Conf string // the slurm.conf path, SLURM_CONF of every command the helpers run
	Host string // this machine's short host name: SlurmctldHost and every node's NodeHostname

	nodes   []string
	daemons []*daemon
	lock    *os.File
	once    sync.Once
	t       testing.TB
}

type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// daemonPATH is the PATH the daemons run with, unless Config.Env sets one.
const daemonPATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// binaries finds the programs a cluster needs, or skips the test saying what is missing;
// under CI (CI=true) a missing one is a broken .ci/run and fails instead.
func binaries(t testing.TB) map[string]string {
	t.Helper()
	testenv.SkipShort(t, "Slurm")
	if os.Geteuid() != 0 {
		testenv.SkipSuite(t, "Slurm", "run as root", "slurmd and munged must run as root (CI runs as root)")
	}
	return testenv.Programs(t, "Slurm", "apt-get install slurmctld slurmd slurm-client munge",
		[]string{"munged", "slurmctld", "slurmd", "sinfo", "scontrol", "squeue", "scancel", "srun", "sbatch"},
		[]string{"/usr/sbin", "/usr/bin", "/sbin"})
}

// Start starts a cluster and waits until sinfo shows every node idle; it stops at cleanup.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	bins := binaries(t)
	lock, err := os.OpenFile(LockPath, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		t.Fatalf("slurmtest: flock %s: %v", LockPath, err)
	}
	// Not t.TempDir: the munge socket's path must fit in a sockaddr_un (108 bytes), and a
	// test's temporary directory is named after the test.
	dir, err := os.MkdirTemp("", "slurmtest-")
	if err != nil {
		lock.Close()
		t.Fatalf("slurmtest: %v", err)
	}
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf"), Host: host, lock: lock, t: t}
	for k := 1; k <= 4; k++ {
		c.nodes = append(c.nodes, fmt.Sprintf("node%d", k))
	}
	t.Cleanup(c.Stop)
	if err := c.writeFiles(cfg); err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	env := append([]string{"PATH=" + daemonPATH, "HOME=/root", "SLURM_CONF=" + c.Conf}, cfg.Env...)
	c.start(t, env, "munged", bins["munged"], "-F", "--force", "--key-file="+c.path("munge.key"),
		"--socket="+c.path("munge.socket"), "--pid-file="+c.path("munged.pid"),
		"--log-file="+c.path("munged.log"), "--seed-file="+c.path("munged.seed"))
	c.waitFor(t, "munged's socket", 10*time.Second, func() bool {
		_, err := os.Stat(c.path("munge.socket"))
		return err == nil
	})
	c.start(t, env, "slurmctld", bins["slurmctld"], "-D")
	for _, n := range c.nodes {
		c.start(t, env, "slurmd-"+n, bins["slurmd"], "-D", "-N", n)
	}
	c.waitFor(t, "every node idle", 60*time.Second, func() bool {
		out, err := c.Output("sinfo", "-h", "-N", "-o", "%N %T")
		return err == nil && strings.Count(out, " idle\n") == len(c.nodes)
	})
	return c
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// start starts one daemon in the foreground, its output in DIR/NAME.out.
func (c *Cluster) start(t testing.TB, env []string, name, bin string, args ...string) {
	t.Helper()
	out, err := os.Create(c.path(name + ".out"))
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, c.Dir, out, out
	// Pdeathsig: a test binary killed (go test's -timeout) takes its daemons with it, rather than
	// leave them holding the ports and state the next run needs.
	cmd.SysProcAttr = testenv.DieWithTest(true)
	if err := cmd.Start(); err != nil {
		t.Fatalf("slurmtest: start %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
}

// waitFor polls cond until it holds, or fails the test with the daemons' logs.
func (c *Cluster) waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testenv.Scale(within)) // a loaded machine takes longer
	for !cond() {
		for _, d := range c.daemons {
			select {
			case <-d.done:
				t.Fatalf("slurmtest: %s exited while waiting for %s\n%s", d.name, what, c.Logs())
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("slurmtest: no %s after %v\n%s", what, within, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// WaitFor polls cond every 100 ms until it holds, failing the test with the daemons' logs
// after within.
func (c *Cluster) WaitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	c.waitFor(t, what, within, cond)
}

// NodeNames are the cluster's nodes, node1..node4.
func (c *Cluster) NodeNames() []string { return append([]string(nil), c.nodes...) }

// Env is the environment of the helpers' commands: this process's, with SLURM_CONF set to the
// cluster's.
func (c *Cluster) Env() []string {
	return append(os.Environ(), "SLURM_CONF="+c.Conf)
}

// Command is a Slurm client command (scontrol, sinfo, srun, ...) for this cluster.
func (c *Cluster) Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Env = c.Env()
	return cmd
}

// Output runs a Slurm client command, with a 30 s deadline, and returns its standard output;
// an error carries its standard error.
func (c *Cluster) Output(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

// Run runs a Slurm client command and returns its standard output, failing the test if it fails.
func (c *Cluster) Run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := c.Output(name, args...)
	if err != nil {
		t.Fatalf("slurmtest: %v", err)
	}
	return out
}

// Scontrol, Sinfo and Srun are Run of that command.
func (c *Cluster) Scontrol(t testing.TB, args ...string) string {
	t.Helper()
	return c.Run(t, "scontrol", args...)
}

func (c *Cluster) Sinfo(t testing.TB, args ...string) string {
	t.Helper()
	return c.Run(t, "sinfo", args...)
}

func (c *Cluster) Srun(t testing.TB, args ...string) string {
	t.Helper()
	return c.Run(t, "srun", args...)
}

// Sbatch submits a batch job (sbatch --parsable ARGS) and returns its job ID.
func (c *Cluster) Sbatch(t testing.TB, args ...string) string {
	t.Helper()
	out := c.Run(t, "sbatch", append([]string{"--parsable"}, args...)...)
	id, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	return id
}

// NodeState is the node's state as `sinfo -h -N -n NODE -o %T` prints it (idle, drained,
// draining, allocated, ...), and its reason (%E, "none" when it has none).
func (c *Cluster) NodeState(node string) (state, reason string, err error) {
	out, err := c.Output("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E")
	if err != nil {
		return "", "", err
	}
	state, reason, _ = strings.Cut(strings.TrimSpace(out), "|")
	return state, reason, nil
}

// JobState is the job's state as `squeue`/`scontrol show job` name it (RUNNING, COMPLETED,
// COMPLETING, ...), read from scontrol's JobState= field.
func (c *Cluster) JobState(id string) (string, error) {
	out, err := c.Output("scontrol", "-o", "show", "job", id)
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(out) {
		if v, ok := strings.CutPrefix(f, "JobState="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("scontrol show job %s: no JobState in %q", id, out)
}

// Logs are the last lines of every daemon's log, for a failure message.
func (c *Cluster) Logs() string {
	var b strings.Builder
	names, _ := filepath.Glob(c.path("*.log"))
	outs, _ := filepath.Glob(c.path("*.out"))
	for _, name := range append(names, outs...) {
		data, err := os.ReadFile(name)
		if err != nil || len(data) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		fmt.Fprintf(&b, "== %s\n%s\n", filepath.Base(name), strings.Join(lines, "\n"))
	}
	return b.String()
}
