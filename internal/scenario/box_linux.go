package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Box is a staged host of its own inside this machine: a PID and mount namespace whose PID 1
// is an actor, with a private /dev (its /dev/nvidiaN, /dev/nvidiactl and /dev/nvidia-uvm plain
// files), a private /dev/shm, its own /etc/passwd and /etc/group, and a cgroup namespace rooted
// at a cgroup of its own, so its processes' cgroups read as a host's (/system.slice/x.service).
// Its processes are Actors, started by its PID 1 as the situation describes them.
type Box struct {
	// Init is the host's PID of the box's PID 1; PIDs are the box's PIDs of its actors by name.
	Init int
	PIDs map[string]int
	dir  string
	cmd  *exec.Cmd
}

// BoxSpec is what a box holds.
type BoxSpec struct {
	Actor   string   // the actor program (go build ./internal/scenario/actor)
	Cgroup  string   // an empty cgroup v2 directory (MakeCgroup) that is the box's root cgroup
	Devices int      // /dev/nvidia0 ... /dev/nvidia(Devices-1)
	Passwd  []string // /etc/passwd lines besides root's
	Groups  []string // /etc/group lines besides root's
	Procs   []Actor  // PID 1's children
	PIDBase int      // the box's PIDs start after this one
}

// boxSetup runs as the box's PID 1 before it becomes the actor: it builds /dev in a tmpfs of
// the staging directory $1, moves it over /dev, and binds the box's passwd and group files.
const boxSetup = `set -e
s=$1 n=$2 d=$1/dev
shift 2
mount -t tmpfs -o mode=0755,size=4m tmpfs "$d"
` + DevNodes + `mkdir "$d/shm" "$d/pts"
mount -t tmpfs -o mode=1777,size=64g tmpfs "$d/shm"
i=0
while [ "$i" -lt "$n" ]; do : >"$d/nvidia$i"; i=$((i + 1)); done
: >"$d/nvidiactl"
: >"$d/nvidia-uvm"
chmod 666 "$d"/nvidia*
mount --move "$d" /dev
mount --bind "$s/passwd" /etc/passwd
mount --bind "$s/group" /etc/group
exec "$@"
`

// DevNodes is shell text that makes the device nodes and links every program expects in a
// new /dev at $d (a tmpfs): null, zero, full, random, urandom, tty, and fd, stdin, stdout,
// stderr.
const DevNodes = `mknod -m 666 "$d/null" c 1 3
mknod -m 666 "$d/zero" c 1 5
mknod -m 666 "$d/full" c 1 7
mknod -m 666 "$d/random" c 1 8
mknod -m 666 "$d/urandom" c 1 9
mknod -m 666 "$d/tty" c 5 0
ln -s /proc/self/fd "$d/fd"
ln -s /proc/self/fd/0 "$d/stdin"
ln -s /proc/self/fd/1 "$d/stdout"
ln -s /proc/self/fd/2 "$d/stderr"
`

// StartBox starts a box and waits until every actor is in place: ready, and those that exit
// gone (or zombies, when their parent does not reap them), leaders that exit zombies.
func StartBox(spec BoxSpec) (*Box, error) {
	dir, err := os.MkdirTemp("", "gt-box-")
	if err != nil {
		return nil, err
	}
	b := &Box{dir: dir, PIDs: map[string]int{}}
	if err := b.prepare(spec); err != nil {
		return nil, b.fail(err)
	}
	init := Actor{Name: "init", Argv: []string{"/sbin/init"}, Init: true, Children: spec.Procs, PIDBase: spec.PIDBase,
		ReadyDir: filepath.Join(dir, "ready"), BinDir: filepath.Join(dir, "bin")}
	env, err := init.env()
	if err != nil {
		return nil, b.fail(err)
	}
	b.cmd = exec.Command("sh", "-c", `echo $$ >"$0/cgroup.procs" && exec "$@"`, spec.Cgroup,
		"unshare", "-C", "-p", "-m", "-f", "--kill-child", "--propagation", "private", "--mount-proc",
		"sh", "-c", boxSetup, "sh", dir, strconv.Itoa(spec.Devices), filepath.Join(dir, "bin", "init"))
	b.cmd.Env = append(os.Environ(), env)
	var stderr strings.Builder
	b.cmd.Stderr = &stderr
	if err := b.cmd.Start(); err != nil {
		return nil, b.fail(err)
	}
	exited := make(chan struct{})
	go func() { b.cmd.Wait(); close(exited) }() //nolint:errcheck // the box's end
	var names []string
	init.Walk(func(a *Actor) { names = append(names, a.Name) })
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for {
			pid, err := readPID(filepath.Join(dir, "ready", n))
			if err == nil {
				b.PIDs[n] = pid
				break
			}
			select {
			case <-exited:
				return nil, b.fail(fmt.Errorf("box: ended before %s was ready: %s", n, stderr.String()))
			default:
			}
			if time.Now().After(deadline) {
				return nil, b.fail(fmt.Errorf("box: %s not ready in 30s: %s", n, stderr.String()))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	b.Init, err = b.initPID()
	if err != nil {
		return nil, b.fail(err)
	}
	return b, b.settle(init, deadline)
}

// prepare writes the staging directory: passwd, group, ready/ and bin/ with a link named as
// each actor's program.
func (b *Box) prepare(spec BoxSpec) error {
	if err := os.Chmod(b.dir, 0o755); err != nil {
		return err
	}
	passwd := append([]string{"root:x:0:0:root:/root:/bin/bash"}, spec.Passwd...)
	group := append([]string{"root:x:0:"}, spec.Groups...)
	errs := []error{
		os.WriteFile(filepath.Join(b.dir, "passwd"), []byte(strings.Join(passwd, "\n")+"\n"), 0o644),
		os.WriteFile(filepath.Join(b.dir, "group"), []byte(strings.Join(group, "\n")+"\n"), 0o644),
		os.Mkdir(filepath.Join(b.dir, "dev"), 0o755),
		os.Mkdir(filepath.Join(b.dir, "ready"), 0o777),
		os.Mkdir(filepath.Join(b.dir, "bin"), 0o755),
		os.Chmod(filepath.Join(b.dir, "ready"), 0o777),
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	root := Actor{Argv: []string{"init"}, Children: spec.Procs}
	var err error
	root.Walk(func(a *Actor) {
		link := filepath.Join(b.dir, "bin", a.Program())
		if _, e := os.Lstat(link); e != nil {
			err = errors.Join(err, os.Symlink(spec.Actor, link))
		}
	})
	return err
}

func (a Actor) env() (string, error) {
	j, err := json.Marshal(a)
	return ActorEnv + "=" + string(j), err
}

// initPID finds the box's PID 1 as this machine sees it: unshare's only child.
func (b *Box) initPID() (int, error) {
	c, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", b.cmd.Process.Pid, b.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(c))
	if len(f) != 1 {
		return 0, fmt.Errorf("box: unshare has children %q", c)
	}
	return strconv.Atoi(f[0])
}

// settle waits until the actors that exit have: gone, or zombies when their parent does not
// reap them; a leader that exits alone, a zombie.
func (b *Box) settle(init Actor, deadline time.Time) error {
	var err error
	var walk func(parent, a *Actor)
	walk = func(parent, a *Actor) {
		if a.Exit || a.ExitLeader {
			for st := b.State(a.Name); !(st == 'Z' && (a.ExitLeader || parent.NoReap) || st == 0 && a.Exit && !parent.NoReap); st = b.State(a.Name) {
				if time.Now().After(deadline) {
					err = errors.Join(err, fmt.Errorf("box: %s still in state %c", a.Name, st))
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		for i := range a.Children {
			walk(a, &a.Children[i])
		}
	}
	walk(&Actor{}, &init)
	return err
}

// State is the state letter of the actor name as its box sees it (/proc/PID/stat), 0 when it
// is gone.
func (b *Box) State(name string) byte {
	s, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/proc/%d/stat", b.Init, b.PIDs[name]))
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(s), ')')
	if i < 0 || i+2 >= len(s) {
		return 0
	}
	return s[i+2]
}

// Enter is the command prefix that runs a command inside the box: its PID, mount and cgroup
// namespaces.
func (b *Box) Enter() []string {
	return []string{"nsenter", "-t", strconv.Itoa(b.Init), "-p", "-m", "-C", "--"}
}

// Stop ends the box (its PID 1, and with it every process in it) and removes its files.
func (b *Box) Stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Kill()
	}
	if b.Init > 0 {
		Exited(b.Init, 5*time.Second)
	}
	_ = os.RemoveAll(b.dir)
}

func (b *Box) fail(err error) error {
	b.Stop()
	return err
}

func readPID(p string) (int, error) {
	s, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(s)))
}
