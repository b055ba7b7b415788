package dockertest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
)

// A container's process, as the machine sees it, is in /docker/<full id> of every cgroup
// hierarchy (cgroupfs driver), which parse reads as the container and its runtime; docker
// stop ends it through its SIGTERM handler, not the engine's SIGKILL 10 s later.
func TestHolderInDockerCgroup(t *testing.T) {
	d := Start(t)
	d.Holder(t, "holder:test")
	id := d.Run(t, "h1", "holder:test", "python3", "-m", "sglang.launch_server", "--model-path", "/dev/shm/M", "--files", "2", "--bytes", "65536")
	pid := d.WaitHolder(t, "h1", "/dev/shm/M", 2, 30*time.Second)
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("storage driver %s; /proc/%d/cgroup:\n%s", d.Driver, pid, raw)
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if !strings.HasSuffix(l, ":/docker/"+id) {
			t.Errorf("cgroup line %q is not /docker/%s", l, id)
		}
	}
	if c := parse.ParseCgroup(string(raw)); c.ContainerID != id || c.Runtime != "docker" || c.Unit != "" {
		t.Errorf("parse reads %+v, want container %s of docker and no unit", c, id)
	}
	start := time.Now()
	d.Docker(t, "stop", "--", id)
	if took := time.Since(start); took > min(testenv.Scale(5*time.Second), 9*time.Second) { // docker stop waits 10 s before SIGKILL
		t.Errorf("docker stop took %v: the holder did not exit on SIGTERM", took)
	}
	if _, st := d.Inspect(t, id); st.Running || st.Status != "exited" || st.ExitCode != 0 {
		t.Errorf("after docker stop: %+v", st)
	}
}
