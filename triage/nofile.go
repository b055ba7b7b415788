package triage

import (
	"fmt"
	"io"
	"syscall"
)

// fdsPerHost is what one host in flight may hold open at once: its TCP connection, plus a
// file being read (known_hosts) or written (--save, accept-new). fdsReserved covers the rest
// of the process: standard streams, the poller, the agent socket.
const (
	fdsPerHost  = 2
	fdsReserved = 16
)

// fanoutWithin returns the fanout to use for n hosts: the one asked for, unless the open-file
// limit cannot hold that many hosts at once. Then it first raises the soft limit to the hard
// one and, if that is still too low, probes fewer hosts at once and says so, rather than let
// hosts fail to connect for want of a descriptor and be reported as unreachable.
func fanoutWithin(fanout, n int, stderr io.Writer) int {
	need := uint64(fdsReserved + fdsPerHost*min(fanout, n))
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur >= need {
		return fanout
	}
	if lim.Cur < lim.Max {
		raised := lim
		raised.Cur = lim.Max
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			lim = raised
		}
		// darwin refuses a soft limit above kern.maxfilesperproc; what Getrlimit says now is
		// what there is.
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if lim.Cur >= need {
		return fanout
	}
	capped := 1
	if lim.Cur > fdsReserved+fdsPerHost {
		capped = int((lim.Cur - fdsReserved) / fdsPerHost)
	}
	fmt.Fprintf(stderr, "gputriage: --fanout %d needs about %d open files, but the limit is %d (ulimit -n; hard limit %d): probing %d hosts at once\n",
		fanout, need, lim.Cur, lim.Max, capped)
	return capped
}
