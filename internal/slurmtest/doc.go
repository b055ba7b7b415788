// Package slurmtest runs a real Slurm cluster for gputriage's integration tests: munged with a
// key of its own, slurmctld and four slurmd (node1..node4, one `slurmd -N nodeK` each, all on
// this machine at 127.0.0.1:17001-17004), from a slurm.conf and cgroup.conf written into a
// temporary directory. Processes of a job step land in the freezer cgroup
// /slurm_nodeK/uid_U/job_N/step_S, as on a cgroup v1 Slurm node. It needs root and Debian's
// slurmctld, slurmd, slurm-client and munge packages; it installs nothing and touches no file
// outside its directory except the cgroups slurmd makes, which it removes when it stops.
//
// A cluster holds the flock /tmp/gputriage-slurm.lock for its whole life, so tests in
// different packages (different processes) never start two at once on the fixed ports
// (slurmctld 17000, slurmd 17001-17004) and node cgroups; callers need no flock of their own.
// Within one test process, Stop a cluster before starting the next: a second Start waits for
// the first's lock. Only tests import it, and only on Linux.
package slurmtest
