package slurmtest

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// defaultConf is slurm.conf without its node and partition lines. Timeouts are short so a
// test sees a job end, a node drain or resume within seconds.
func (c *Cluster) defaultConf() []string {
	return []string{
		"ClusterName=gputriage",
		"SlurmctldHost=" + c.Host,
		fmt.Sprintf("SlurmctldPort=%d", CtldPort),
		"SlurmUser=root",
		"SlurmdUser=root",
		"AuthType=auth/munge",
		"AuthInfo=socket=" + c.path("munge.socket"),
		"CredType=cred/munge",
		"StateSaveLocation=" + c.path("state"),
		"SlurmdSpoolDir=" + c.path("spool/%n"),
		"SlurmctldPidFile=" + c.path("slurmctld.pid"),
		"SlurmdPidFile=" + c.path("slurmd-%n.pid"),
		"SlurmctldLogFile=" + c.path("slurmctld.log"),
		"SlurmdLogFile=" + c.path("slurmd-%n.log"),
		// proctrack/cgroup puts a step's processes in /slurm_NODE/uid_U/job_N/step_S of the
		// freezer hierarchy (cgroup v1), which is how the probe ties a process to its job.
		"ProctrackType=proctrack/cgroup",
		"TaskPlugin=task/none",
		"SchedulerType=sched/builtin",
		"SelectType=select/cons_tres",
		"SelectTypeParameters=CR_Core",
		"ReturnToService=2",
		"MpiDefault=none",
		"SwitchType=switch/none",
		"JobCompType=jobcomp/none",
		"AccountingStorageType=accounting_storage/none",
		"JobAcctGatherType=jobacct_gather/none",
		"KillWait=2",
		"MinJobAge=600",
		"SlurmdTimeout=60",
	}
}

// mergeConf is base with every line of extra whose key a base line has put in that line's
// place, and the others appended.
func mergeConf(base, extra []string) []string {
	out := append([]string(nil), base...)
	for _, line := range extra {
		key, _, _ := strings.Cut(line, "=")
		replaced := false
		for i, b := range out {
			if k, _, _ := strings.Cut(b, "="); strings.EqualFold(k, key) {
				out[i], replaced = line, true
				break
			}
		}
		if !replaced {
			out = append(out, line)
		}
	}
	return out
}

// writeFiles writes the munge key, slurm.conf, cgroup.conf and, with GPUs, gres.conf and the
// device files it names.
func (c *Cluster) writeFiles(cfg Config) error {
	if err := os.Chmod(c.Dir, 0o700); err != nil {
		return err
	}
	for _, d := range append([]string{"state", "spool", "dev"}, c.spoolDirs()...) {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return err
		}
	}
	key := make([]byte, 1024)
	rand.Read(key)
	if err := os.WriteFile(c.path("munge.key"), key, 0o600); err != nil {
		return err
	}
	node := fmt.Sprintf("NodeName=node[1-%d] NodeHostname=%s NodeAddr=127.0.0.1 Port=[%d-%d] CPUs=2 RealMemory=1000 State=UNKNOWN",
		len(c.nodes), c.Host, NodePort, NodePort+len(c.nodes)-1)
	conf := c.defaultConf()
	if cfg.GPUs > 0 {
		conf = append(conf, "GresTypes=gpu")
		node += fmt.Sprintf(" Gres=gpu:%d", cfg.GPUs)
		var gres strings.Builder
		for i := 0; i < cfg.GPUs; i++ {
			// Slurm wants character devices; these are /dev/null's (1, 3), which nothing opens.
			if err := syscall.Mknod(c.path(fmt.Sprintf("dev/nvidia%d", i)), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
				return fmt.Errorf("mknod: %w", err)
			}
		}
		// No NVML here, and none wanted: the devices are the files above, in order.
		gres.WriteString("AutoDetect=off\n")
		fmt.Fprintf(&gres, "NodeName=node[1-%d] Name=gpu File=%s\n", len(c.nodes), c.path(fmt.Sprintf("dev/nvidia[0-%d]", cfg.GPUs-1)))
		if err := os.WriteFile(c.path("gres.conf"), []byte(gres.String()), 0o644); err != nil {
			return err
		}
	}
	conf = mergeConf(conf, cfg.Conf)
	conf = append(conf, node, "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
	if err := os.WriteFile(c.Conf, []byte(strings.Join(conf, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	cgroup := "CgroupPlugin=autodetect\nCgroupMountpoint=/sys/fs/cgroup\n"
	return os.WriteFile(c.path("cgroup.conf"), []byte(cgroup), 0o644)
}

func (c *Cluster) spoolDirs() []string {
	var dirs []string
	for _, n := range c.nodes {
		dirs = append(dirs, filepath.Join("spool", n))
	}
	return dirs
}
