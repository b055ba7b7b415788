package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// ActorEnv is the environment variable that carries an actor's spec (JSON) to the actor
// program (./actor), which removes it from its own environment before it starts children.
const ActorEnv = "GT_ACTOR"

// Actor is one process of a staged situation, played by the actor program: its command line
// is exactly the real program's, its comm the real program's file name, its user, cgroup,
// device files and /dev/shm mappings the situation's. Children are started by it, as the real
// program starts its workers.
type Actor struct {
	Name string   // the situation's name for it; its ready file
	Argv []string // the command line, as /proc/PID/cmdline shows it
	// Exe is the name of the program file the kernel runs (comm, cut at 15 bytes):
	// filepath.Base(Argv[0]) when empty. A script run through its #! line has the script's
	// name (torchrun), not the interpreter's.
	Exe string `json:",omitempty"`
	// Comm, when set, is the name the process gives itself once running (setproctitle sets
	// it, as Ray's workers do).
	Comm   string `json:",omitempty"`
	UID    int    `json:",omitempty"` // run as this uid and gid; root when 0
	Cgroup string `json:",omitempty"` // a cgroup v2 directory to join first (MakeCgroup)
	Dir    string `json:",omitempty"` // working directory; / when empty
	// Env are NAME=VALUE entries its parent adds to the environment it passes on, after its
	// own, as a launcher gives each worker its own (torchrun's elastic agent: LOCAL_RANK,
	// TORCHELASTIC_RUN_ID, ...). Its children inherit them, as forked workers do.
	Env []string `json:",omitempty"`
	// Devices are the N of the /dev/nvidiaN files it opens; with any, /dev/nvidiactl and
	// /dev/nvidia-uvm too, as every CUDA process does.
	Devices  []int     `json:",omitempty"`
	Shm      []ShmFile `json:",omitempty"`
	Children []Actor   `json:",omitempty"`
	// Exit: it exits once its children are ready (they are orphaned). ExitLeader: only its
	// main thread exits (exit, not exit_group), so the leader is a zombie with live threads.
	// NoReap: it never waits for its children, so one that exits stays a zombie. Init: it is
	// PID 1 of its box, reaping every orphan.
	Exit, ExitLeader, NoReap, Init bool `json:",omitempty"`
	// Job: it is started in a process group of its own, as an interactive shell's job
	// control starts each command line (its children, forked, stay in that group).
	Job bool `json:",omitempty"`
	// PIDNS: it is started as PID 1 of a PID namespace of its own (a container's command,
	// docker run without --init), reaping the orphans of its descendants as an init does.
	PIDNS bool `json:",omitempty"`

	// What nvidia-smi says of it (the fake's answers; the actor ignores these): MiB of GPU
	// memory per GPU index, and the process type: "C" (compute, the default), "G" (graphics:
	// not in --query-compute-apps), "M+C" (an MPS client), "M" (MPS server's share).
	GPUMiB map[int]int64 `json:"-"`
	Type   string        `json:"-"`
	// Age is how long before the probe it started, when set: the start time in the parsed
	// capture is moved back (days cannot be waited for).
	Age time.Duration `json:"-"`

	PIDBase  int    `json:",omitempty"` // with Init: the PIDs of its box start after this one
	ReadyDir string `json:",omitempty"` // where it writes its ready file: its PID as its box sees it
	BinDir   string `json:",omitempty"` // links named as programs to the actor program
}

// Program is the name of the file the kernel runs for it: its comm.
func (a Actor) Program() string {
	if a.Exe != "" {
		return a.Exe
	}
	return filepath.Base(a.Argv[0])
}

// Walk calls f for a and every descendant, parents first.
func (a *Actor) Walk(f func(*Actor)) {
	f(a)
	for i := range a.Children {
		a.Children[i].Walk(f)
	}
}

// Become makes the running process what a says: in its cgroup, named as it names itself,
// running as its user.
func (a Actor) Become() error {
	if a.Cgroup != "" {
		if err := os.WriteFile(filepath.Join(a.Cgroup, "cgroup.procs"), []byte("0\n"), 0); err != nil {
			return err
		}
	}
	if a.Comm != "" {
		if err := os.WriteFile("/proc/self/comm", []byte(a.Comm), 0); err != nil {
			return err
		}
	}
	if a.UID > 0 && os.Getuid() != a.UID {
		return errors.Join(syscall.Setgroups(nil), syscall.Setresgid(a.UID, a.UID, a.UID), syscall.Setresuid(a.UID, a.UID, a.UID))
	}
	return nil
}

// ShmFile is a file under /dev/shm a process creates and maps, as weights copied to RAM, a
// NCCL segment or a DataLoader's shared tensors are.
type ShmFile struct {
	Path  string
	Bytes int64 // 1 MiB when 0 (sparse: no RAM is used)
	// Delete removes the file once mapped; DeleteDir removes its directory (rm -rf).
	Delete, DeleteDir bool `json:",omitempty"`
}

// Map creates, maps and (as told) deletes the file; the mapping and its descriptor are kept.
func (s ShmFile) Map() (any, error) {
	size := s.Bytes
	if size == 0 {
		size = 1 << 20
	}
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.Path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %s: %w", s.Path, err)
	}
	switch {
	case s.DeleteDir:
		err = os.RemoveAll(filepath.Dir(s.Path))
	case s.Delete:
		err = os.Remove(s.Path)
	}
	return []any{f, m}, err
}
