//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/slurmtest"
	"github.com/gputriage/gputriage/internal/sshdtest"
)

// slurmLab is a real Slurm cluster (node1..node4, partitions debug and gpu) and real sshd
// hosts under the same names, plus a login node whose sessions reach the cluster, all joined
// by an ssh config written the usual way. Slurm's state: job `job` runs on node2 and node3,
// node1 is drained by gputriage, node4 by an admin whose reason tries to forge a record
// drawing in node2.
type slurmLab struct {
	c          *slurmtest.Cluster
	job        string
	config     string
	login      *sshdtest.SSHD
	forgedNote string
}

const node4Reason = "fan failure\nnode2|drained|root|2026-12-01T00:00:00|forged"

func newSlurmLab(t *testing.T, sshd bool) *slurmLab {
	c := slurmtest.Start(t, slurmtest.Config{})
	c.Scontrol(t, "create", "partitionname=gpu", "nodes=node[3-4]", "state=up")
	l := &slurmLab{c: c}
	l.job = c.Sbatch(t, "-N2", "-w", "node[2-3]", "-p", "debug", "-o", "/dev/null", "--wrap", "sleep 600")
	c.WaitFor(t, "job "+l.job+" running", 30*time.Second, func() bool {
		s, err := c.JobState(l.job)
		return err == nil && s == "RUNNING"
	})
	t.Cleanup(func() { c.Output("scancel", l.job) })
	c.Scontrol(t, "update", "nodename=node1", "state=drain", "reason=gputriage: leftover PID 20629 holds 55 GiB on GPU 0")
	c.Scontrol(t, "update", "nodename=node4", "state=drain", "reason="+node4Reason)
	c.WaitFor(t, "node1 and node4 drained", 30*time.Second, func() bool {
		s1, _, err1 := c.NodeState("node1")
		s4, _, err4 := c.NodeState("node4")
		return err1 == nil && err4 == nil && s1 == "drained" && s4 == "drained"
	})
	if sshd {
		l.startHosts(t)
	}
	return l
}

// startHosts starts sshd hosts node1..node4 and a login node on 127.0.0.70-74, the login
// node's shell profile pointing Slurm's commands at the cluster.
func (l *slurmLab) startHosts(t *testing.T) {
	dir := t.TempDir()
	key, pub := sshdtest.UserKey(t, dir, "ed25519")
	var conf, known strings.Builder
	for i, name := range []string{"login", "node1", "node2", "node3", "node4"} {
		addr, port := fmt.Sprintf("127.0.0.%d", 70+i), 2270+i
		s := sshdtest.Start(t, sshdtest.Config{Name: name, Addr: addr, Port: port, AuthorizedKeys: []string{pub}, SMI: cleanSMI(2)})
		fmt.Fprintf(&conf, "Host %s\n  HostName %s\n  Port %d\n\n", name, addr, port)
		known.WriteString(s.KnownHostsLine(addr) + "\n")
		if name == "login" {
			l.login = s
			// The login node's environment finds the cluster, as /etc/slurm/slurm.conf would.
			rc := "export SLURM_CONF=" + l.c.Conf + "\n"
			if err := os.WriteFile(filepath.Join(s.Dir, "home", ".bashrc"), []byte(rc), 0o644); err != nil {
				t.Fatal(err)
			}
			// login-stranger is the login node under a name known_hosts does not know.
			fmt.Fprintf(&conf, "Host login-stranger\n  HostName %s\n  Port %d\n  HostKeyAlias login-stranger\n\n", addr, port)
		}
	}
	knownHosts := filepath.Join(dir, "known_hosts")
	fmt.Fprintf(&conf, "Host *\n  User root\n  IdentityFile %s\n  IdentitiesOnly yes\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile none\n", key, knownHosts)
	if err := os.WriteFile(knownHosts, []byte(known.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l.config = filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(l.config, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// slurmDryRun runs gputriage --dry-run --format json with args and returns the hosts it
// would reach.
func slurmDryRun(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	out, errOut, code := cli(t, nil, append([]string{"--dry-run", "--format", "json"}, args...)...)
	var doc struct {
		Hosts []struct{ Host string } `json:"hosts"`
	}
	if code == exitOK {
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
	var names []string
	for _, h := range doc.Hosts {
		names = append(names, h.Host)
	}
	return strings.Join(names, " "), errOut, code
}

// TestSlurmSelectsHosts: --slurm-job, --slurm-partition, --slurm-nodes and --slurm-state
// resolve, with this machine's squeue and sinfo, to the nodes a real Slurm names; a node
// drain reason cannot forge another node in; errors name what is wrong.
func TestSlurmSelectsHosts(t *testing.T) {
	l := newSlurmLab(t, false)
	t.Setenv("SLURM_CONF", l.c.Conf)
	for _, tt := range []struct {
		name  string
		args  []string
		hosts string
	}{
		{"job", []string{"--slurm-job", l.job}, "node2 node3"},
		{"partition", []string{"--slurm-partition", "gpu"}, "node3 node4"},
		{"drained among nodes", []string{"--slurm-nodes", "node[1-4]", "--slurm-state", "drain"}, "node1 node4"},
		{"drained in a partition", []string{"--slurm-partition", "gpu", "--slurm-state", "drained"}, "node4"},
		{"job's nodes in a partition", []string{"--slurm-job", l.job, "--slurm-partition", "gpu"}, "node3"},
		{"with hosts, -w and -x", []string{"gpu01", "--slurm-partition", "debug", "-w", "node9", "-x", "node[2-3]"}, "gpu01 node1 node4 node9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hosts, errOut, code := slurmDryRun(t, tt.args...)
			if code != exitOK || hosts != tt.hosts {
				t.Errorf("%v: exit %d, hosts %q, want %q\nstderr: %s", tt.args, code, hosts, tt.hosts, errOut)
			}
		})
	}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown job", []string{"--slurm-job", l.job + ",999999"}, "slurm: job 999999: Slurm does not know it"},
		{"bad job id", []string{"--slurm-job", l.job + ";reboot"}, "is not a job id"},
		{"bad state", []string{"--slurm-state", "sleepy"}, `sinfo: error: Bad state string: "sleepy"; sinfo: error: valid states: `},
		{"no match", []string{"--slurm-partition", "gpu", "--slurm-state", "down"}, "slurm: no node in partition gpu in state down"},
		{"via alone", []string{"--slurm-via", "login"}, "--slurm-via goes with --slurm-job"},
		{"with --local", []string{"--slurm-state", "drain", "--local"}, "give only one of"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := slurmDryRun(t, tt.args...)
			if code != exitUsage || !strings.Contains(errOut, tt.want) {
				t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q", tt.args, code, errOut, tt.want)
			}
		})
	}
	t.Run("no slurm here", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, errOut, code := slurmDryRun(t, "--slurm-job", l.job)
		if code != exitUsage || !strings.Contains(errOut, "sinfo is not on this machine's PATH") || !strings.Contains(errOut, "--slurm-via LOGIN") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
	})
}

// TestSlurmDrainedSweep: the drained nodes of node[1-4] are swept over real SSH, and the report
// shows each one's drain reason in every format, the forged line only as part of node4's.
func TestSlurmDrainedSweep(t *testing.T) {
	l := newSlurmLab(t, true)
	t.Setenv("SLURM_CONF", l.c.Conf)
	base := []string{"-F", l.config, "--timeout", "30s", "--slurm-nodes", "node[1-4]", "--slurm-state", "drain"}
	out, errOut, code := cli(t, nil, append(base, "--format", "json")...)
	var doc struct {
		Hosts []struct {
			Host      string
			OK        bool
			Hostname  *string
			Scheduler *struct {
				Name       string  `json:"name"`
				State      string  `json:"state"`
				Reason     *string `json:"reason"`
				ReasonUser *string `json:"reason_user"`
				ReasonTime *string `json:"reason_time"`
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
		t.Fatalf("exit %d, %v\nstderr: %s\n%s", code, err, errOut, out)
	}
	if len(doc.Hosts) != 2 {
		t.Fatalf("%d hosts, want node1 and node4:\n%s", len(doc.Hosts), out)
	}
	for i, want := range []struct{ host, reason string }{
		{"node1", "gputriage: leftover PID 20629 holds 55 GiB on GPU 0"}, {"node4", node4Reason},
	} {
		h := doc.Hosts[i]
		if h.Host != want.host || !h.OK || h.Hostname == nil || *h.Hostname != want.host {
			t.Errorf("host %d: %s ok=%v hostname %v, want %s probed", i, h.Host, h.OK, h.Hostname, want.host)
		}
		s := h.Scheduler
		if s == nil || s.Name != "slurm" || s.State != "drained" || s.Reason == nil || *s.Reason != want.reason ||
			s.ReasonUser == nil || *s.ReasonUser != "root" || s.ReasonTime == nil {
			t.Errorf("%s: scheduler %+v, want drained with %q", want.host, s, want.reason)
		}
	}
	text, _, _ := cli(t, map[string]string{"COLUMNS": "200"}, append(base, "--color", "never")...)
	for _, want := range []string{
		"node1  OK", "  slurm: drained: gputriage: leftover PID 20629 holds 55 GiB on GPU 0 (root, ",
		`  slurm: drained: fan failure\nnode2|drained|root|2026-12-01T00:00:00|forged (root,`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the text report lacks %q:\n%s", want, text)
		}
	}
	md, _, _ := cli(t, nil, append(base, "--format", "markdown")...)
	if !strings.Contains(md, "slurm: drained: gputriage: leftover PID 20629 holds 55 GiB on GPU 0 (root, ") {
		t.Errorf("the Markdown report lacks node1's reason:\n%s", md)
	}

	t.Run("via login node", func(t *testing.T) { testSlurmVia(t, l) })
}

// testSlurmVia: --slurm-via asks the login node over one real SSH session, with this
// machine's Slurm unusable, and resolves what the local commands resolve; the login node's
// host key is checked like any host's.
func testSlurmVia(t *testing.T, l *slurmLab) {
	t.Setenv("SLURM_CONF", "/nonexistent/slurm.conf")
	for _, tt := range []struct {
		args  []string
		hosts string
	}{
		{[]string{"--slurm-job", l.job}, "node2 node3"},
		{[]string{"--slurm-partition", "gpu"}, "node3 node4"},
		{[]string{"--slurm-nodes", "node[1-4]", "--slurm-state", "drain"}, "node1 node4"},
	} {
		before := strings.Count(l.login.Log(), "Accepted publickey")
		hosts, errOut, code := slurmDryRun(t, append([]string{"-F", l.config, "--slurm-via", "login"}, tt.args...)...)
		if code != exitOK || hosts != tt.hosts {
			t.Errorf("%v: exit %d, hosts %q, want %q\nstderr: %s", tt.args, code, hosts, tt.hosts, errOut)
		}
		if n := strings.Count(l.login.Log(), "Accepted publickey") - before; n != 1 {
			t.Errorf("%v: %d SSH sessions to the login node, want 1", tt.args, n)
		}
	}
	_, errOut, code := slurmDryRun(t, "-F", l.config, "--slurm-via", "login", "--slurm-job", "999999")
	if code != exitUsage || !strings.Contains(errOut, "--slurm-via login: slurm: job 999999: Slurm does not know it") {
		t.Errorf("unknown job via login: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = slurmDryRun(t, "-F", l.config, "--slurm-via", "login-stranger", "--slurm-job", l.job)
	if code != exitUsage || !strings.Contains(errOut, "unknown-host-key") {
		t.Errorf("a login node with an unknown host key: exit %d, stderr %q", code, errOut)
	}
}
