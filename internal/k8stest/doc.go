// Package k8stest is gputriage's Kubernetes test lab: a real control plane on this machine's
// loopback, for the tests of Kubernetes targets (issue 20). Start(t) starts
//
//   - kine, the etcd API on SQLite (a database in the test's temporary directory);
//   - kube-apiserver, on a free 127.0.0.1 port with certificates made in Go (a CA, serving
//     certificates for 127.0.0.1), a static token file with two users (AdminUser in
//     system:masters; LimitedUser in no group, so bound only by what a test applies, such as
//     contrib/k8s/rbac.yaml), RBAC authorization, and kwok as every node's kubelet;
//   - kwok, managing every node: a node created through the API becomes Ready, a pod bound to
//     it Running, and pods/exec into any of its pods runs the command HERE, as kwok's child
//     (a ClusterExec rule with a local target), with PATH led by Lab.ExecBin and, if asked, a
//     fake nvidia-smi: so an exec of the probe reads this machine's real /proc.
//
// The three programs are built from the tools module (tools/k8s, its own go.mod) by
// tools/k8s/build.sh into a cache shared by every checkout on the machine; without them, and
// when they cannot be built, the suite is skipped, naming the script (failed under CI=true,
// where .ci/run builds them first). Every daemon dies with the test binary (Pdeathsig) and is
// stopped at cleanup. No controller manager or scheduler runs: pods are bound by their
// spec.nodeName, and a DaemonSet makes no pods by itself (DaemonSetPod makes the one it would).
// A lab takes about 5 s to start; labs share nothing (free ports, temporary directories), so
// packages may run theirs at once.
//
// Build first, outside the shared test lock (a cold build takes many minutes), then run the
// suite under it:
//
//	tools/k8s/build.sh
//	flock /tmp/gputriage-live.lock go test ./internal/k8stest -count=1
//
// # What kwok's exec does and does not pass through (kwok v0.8.0, kube-apiserver v1.37.2)
//
// Measured by TestLab (which fails, asking for this to be revisited, should kwok change):
//
//   - Both transports work: client-go's WebSocket executor (remotecommand v5, a GET, which the
//     API server translates to SPDY towards kwok) and its SPDY one (a POST). RBAC: SPDY needs
//     create on pods/exec; WebSocket needs get, and create too (checked on the upgrade).
//   - Stdout and stderr arrive separately and whole (4 MiB of stdout, 256 KiB of stdin tried).
//   - Stdin's end is NOT passed on: kwok copies the stream into the command's stdin pipe and
//     never closes it, so a command that reads to EOF (cat, or sh -s without a final exit)
//     runs until the client gives up. Hence the probe's stdin ends in an explicit "exit 0"
//     line (k8s-design's exec contract); a real kubelet does pass EOF.
//   - A non-zero exit status is NOT passed on as one: kwok wraps the command's error, so the
//     stream ends in an InternalError status ("error executing command in container: cmd
//     wait: sh -s: exit status 3") that carries no exit code (client-go's error has no
//     ExitStatus). Exit 0 is a clean end. A real kubelet passes the code; gputriage trusts
//     neither (the capture's own end line decides completeness), and code paths that need a
//     real exit status are tested on the kubelet-free pieces.
package k8stest
