package slurmtest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// Stop cancels every job, stops the daemons, kills what slurmd left running (its slurmstepd
// and their children, and anything left in the nodes' cgroups), removes the cgroups slurmd
// made and the cluster's directory, and releases the lock. A failed test gets the daemons'
// logs first. Stop is called at cleanup; calling it earlier is fine.
func (c *Cluster) Stop() {
	c.once.Do(func() {
		if c.t.Failed() {
			c.t.Logf("slurmtest: the cluster's logs (%s):\n%s", c.Dir, c.Logs())
		}
		c.cancelJobs()
		for i := len(c.daemons) - 1; i >= 0; i-- { // slurmd before slurmctld before munged
			c.daemons[i].stop()
		}
		for _, pid := range c.strays() {
			killTree(pid)
		}
		c.removeCgroups()
		os.RemoveAll(c.Dir)
		c.lock.Close() // releases the flock
	})
}

// cancelJobs cancels every job and waits (a few seconds at most) until none is left running
// or completing, so that slurmd ends their steps as it would.
func (c *Cluster) cancelJobs() {
	out, err := c.Output("squeue", "-h", "-o", "%i")
	if err != nil || strings.TrimSpace(out) == "" {
		return
	}
	c.Output("scancel", strings.Fields(out)...)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		out, err := c.Output("squeue", "-h", "-o", "%i")
		if err != nil || strings.TrimSpace(out) == "" {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *daemon) stop() { testenv.StopGroup(d.cmd.Process.Pid, d.done) }

// strays are the processes this cluster's slurmd left: every slurmstepd that writes to this
// cluster's directory (its node's log), and every process in this cluster's nodes' cgroups.
func (c *Cluster) strays() []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join(p, "comm"))
		if strings.HasPrefix(string(comm), "slurmstepd") && c.writesHere(p) {
			pids = append(pids, pid)
		}
	}
	for _, cg := range c.cgroupDirs() {
		thaw(cg)
		filepath.WalkDir(cg, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && d.Name() == "cgroup.procs" {
				data, _ := os.ReadFile(path)
				for _, f := range strings.Fields(string(data)) {
					if pid, err := strconv.Atoi(f); err == nil && !slices.Contains(pids, pid) {
						pids = append(pids, pid)
					}
				}
			}
			return nil
		})
	}
	return pids
}

// writesHere reports whether the process /proc/PID has a file open in the cluster's directory.
func (c *Cluster) writesHere(proc string) bool {
	fds, _ := os.ReadDir(filepath.Join(proc, "fd"))
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(proc, "fd", fd.Name())); err == nil && strings.HasPrefix(target, c.Dir+"/") {
			return true
		}
	}
	return false
}

// killTree kills pid and its descendants with SIGKILL, children first found.
func killTree(pid int) {
	for _, child := range testenv.Children(pid) {
		killTree(child)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// cgroupDirs are the cgroups slurmd makes for this cluster's nodes, /slurm_NODE in every v1
// hierarchy that has one.
func (c *Cluster) cgroupDirs() []string {
	var dirs []string
	for _, n := range c.nodes {
		found, _ := filepath.Glob("/sys/fs/cgroup/*/slurm_" + n)
		dirs = append(dirs, found...)
	}
	return dirs
}

// thaw lets the tasks of a frozen cgroup run again, so that SIGKILL reaches them.
func thaw(cg string) {
	state := filepath.Join(cg, "freezer.state")
	if _, err := os.Stat(state); err == nil {
		os.WriteFile(state, []byte("THAWED"), 0o644)
	}
}

// removeCgroups removes the nodes' cgroups, deepest first, waiting briefly for killed tasks
// to leave them. A cgroup still in use stays, and so does its parent.
func (c *Cluster) removeCgroups() {
	for _, cg := range c.cgroupDirs() {
		var dirs []string
		filepath.WalkDir(cg, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			for try := 0; try < 20; try++ {
				if err := syscall.Rmdir(d); err == nil || err != syscall.EBUSY {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}
