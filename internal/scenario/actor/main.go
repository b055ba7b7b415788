//go:build linux

// Command actor plays one process of a staged situation (see scenario.Actor): started with the
// command line the situation gives it, it joins its cgroup, takes its user, opens the device
// files it is told, maps its /dev/shm files, starts its children, says it is ready and then
// waits, exits, or exits its main thread only. Tests build it once per run (go build) and run
// it through a symlink named as the program it plays, so the kernel's comm is that program's.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
)

func init() { runtime.LockOSThread() } // main runs on the leader thread, which ExitLeader ends

func main() {
	var a scenario.Actor
	if err := json.Unmarshal([]byte(os.Getenv(scenario.ActorEnv)), &a); err != nil {
		fail("spec: %v", err)
	}
	if !slices.Equal(os.Args, a.Argv) {
		// Started by path (PID 1 of a box): become the command line the spec gives.
		fail("exec: %v", syscall.Exec(os.Args[0], a.Argv, os.Environ()))
	}
	os.Unsetenv(scenario.ActorEnv)
	if a.Init || a.PIDNS {
		go reapOrphans()
	}
	if a.Init {
		if a.PIDBase > 0 {
			// PIDs such as a busy host has: small ones would read as any other number.
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(a.PIDBase)), 0); err != nil {
				fail("ns_last_pid: %v", err)
			}
		}
	}
	if err := a.Become(); err != nil {
		fail("%s: %v", a.Name, err)
	}
	var keep []any
	for _, n := range a.Devices {
		keep = append(keep, open(fmt.Sprintf("/dev/nvidia%d", n)))
	}
	if len(a.Devices) > 0 {
		keep = append(keep, open("/dev/nvidiactl"), open("/dev/nvidia-uvm"))
	}
	for _, f := range a.Shm {
		m, err := f.Map()
		if err != nil {
			fail("%s: %v", a.Name, err)
		}
		keep = append(keep, m)
	}
	for _, c := range a.Children {
		start(a, c)
	}
	for _, c := range a.Children {
		waitReady(a.ReadyDir, c)
	}
	ready(a)
	go sleepForever() // a goroutine that outlives the leader, and no deadlock for the runtime to see
	switch {
	case a.Exit:
		os.Exit(0)
	case a.ExitLeader:
		// The main thread ends alone (exit, not exit_group): the leader turns zombie while the
		// runtime's other threads keep the process, its files and its maps.
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	}
	runtime.KeepAlive(keep)
	sleepForever()
}

func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// start runs child c with its own command line through a link named as its program.
func start(parent scenario.Actor, c scenario.Actor) {
	c.ReadyDir, c.BinDir = parent.ReadyDir, parent.BinDir
	spec, err := json.Marshal(c)
	if err != nil {
		fail("%s: %v", c.Name, err)
	}
	cmd := &exec.Cmd{Path: filepath.Join(parent.BinDir, c.Program()), Args: c.Argv, Env: append(append(os.Environ(), c.Env...), scenario.ActorEnv+"="+string(spec)), Dir: c.Dir}
	if c.Dir == "" {
		cmd.Dir = "/"
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: c.Job}
	if c.PIDNS {
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if err := cmd.Start(); err != nil {
		fail("%s: %v", c.Name, err)
	}
	if !parent.NoReap && !parent.Init && !parent.PIDNS {
		go cmd.Wait() //nolint:errcheck // reaped as a parent does
	}
}

// reapOrphans is PID 1's part: every child that ends is reaped, its own and those re-parented
// to it.
func reapOrphans() {
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(-1, &ws, 0, nil); err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func waitReady(dir string, c scenario.Actor) {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, c.Name)); err == nil {
			return
		}
		if time.Now().After(deadline) {
			fail("%s: not ready in 30s", c.Name)
		}
	}
}

func ready(a scenario.Actor) {
	p := filepath.Join(a.ReadyDir, a.Name)
	// Its PID as its box sees it: /proc is the box's, and /proc/self names the process there
	// also from a PID namespace below the box's, where getpid would say 1.
	self, err := os.Readlink("/proc/self")
	if err != nil {
		fail("%s: %v", a.Name, err)
	}
	if err := os.WriteFile(p+".tmp", []byte(self+"\n"), 0o644); err != nil {
		fail("%s: %v", a.Name, err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		fail("%s: %v", a.Name, err)
	}
}

func open(p string) *os.File {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		fail("%v", err)
	}
	return f
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "actor: "+format+"\n", args...)
	os.Exit(111)
}
