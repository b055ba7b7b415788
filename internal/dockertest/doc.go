// Package dockertest runs a real Docker engine for gputriage's integration tests: Debian's
// dockerd (20.10, with the containerd and runc it starts) with everything in a temporary
// directory of its own (data root, exec root, pid file, key, config, the API socket), no
// iptables, no bridge, the cgroupfs cgroup driver (containers land in /docker/<id> of every
// hierarchy, as on a host without systemd as PID 1), overlay2 storage where the kernel offers
// it, else vfs. Images are built offline with `docker import` (there is no registry): Holder
// imports a static stand-in for an inference server (see ./gpuholder) as /usr/bin/python3.
//
// It needs root and Debian's docker.io package (dockerd, docker, containerd, runc); it
// installs nothing. Outside its directory the engine leaves only what it always makes there:
// the cgroups /docker/<id> (removed with each container, the parent /docker kept), the shims'
// sockets in /run/containerd/s (removed with them) and an empty /run/docker/plugins. Without them it skips loudly, except under CI (CI=true), where a missing
// one is a broken .ci/run and fails. Several daemons may run at once (each in its own
// directory); only tests import it, and only on Linux.
package dockertest
