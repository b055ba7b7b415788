// Package systemdtest runs a real systemd (Debian's /lib/systemd/systemd) for gputriage's
// integration tests: PID 1 of its own PID, mount, UTS and cgroup namespaces, booted into a
// target that wants only the units the test writes (and, when asked, systemd-journald with its
// sockets), so that `systemctl stop` and the journal are the real ones. A lab sshd joins it
// with sshdtest.Config{JoinPID: s.PID}.
//
// It keeps to itself: its units, journal (volatile) and sockets live in a tmpfs on the
// namespace's /run; its /dev is a tmpfs of its own (null, zero, random, a private devpts and
// /dev/shm), so the /dev/log symlink journald's socket makes never reaches the machine's /dev;
// its cgroups are one directory below the test's own cgroup v2 path
// (gputriage-systemdtest-PID-N), the root of its cgroup namespace, where it makes init.scope
// and system.slice as on a host it boots. It touches no v1 hierarchy. Stop (at cleanup)
// kills it with SIGKILL (SIGTERM would make it re-execute), waits until the cgroup is empty
// and removes it. Only tests import it, and only on Linux.
package systemdtest
