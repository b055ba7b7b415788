// Package sshdtest starts real OpenSSH sshd instances for gputriage's integration tests: each
// on its own 127.0.0.x address (or inside a network namespace the test creates), with its own
// host key, authorized keys, and its own host name, processes and /dev/shm (private UTS, PID and
// mount namespaces), with a fake nvidia-smi first on the session's PATH. Only tests import it.
package sshdtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// SSHDPath finds sshd. Without it the suite skips loudly (testenv.SkipSuite), except under
// CI (CI=true), where a missing sshd is a broken .ci/run and fails.
func SSHDPath(t testing.TB) string {
	t.Helper()
	testenv.SkipShort(t, "SSH integration")
	const install = "apt-get install openssh-server"
	for _, p := range []string{"/usr/sbin/sshd", "/usr/local/sbin/sshd"} {
		if _, err := os.Stat(p); err == nil && !testenv.Absent(install) {
			if os.Geteuid() != 0 {
				testenv.SkipSuite(t, "SSH integration", "run as root", "OpenSSH sshd must run as root")
			}
			return p
		}
	}
	testenv.SkipSuite(t, "SSH integration", install, "no OpenSSH sshd")
	return ""
}

// Config describes one sshd.
type Config struct {
	Name  string // the host name its sessions see (uname -n)
	Addr  string // listen address, e.g. 127.0.0.21
	Port  int
	NetNS string // run inside this network namespace ("" = the test's own)
	// JoinPID, when not 0, runs sshd in the PID, mount and cgroup namespaces of that process
	// instead of fresh ones (os.Getpid(): the test's own), so that its sessions see processes
	// another manager started there: a systemd, a container engine, a Slurm daemon, and their
	// cgroup paths as that manager sees them (a systemd in a cgroup namespace of its own puts
	// its units at /system.slice/..., as on a host it boots). It keeps its own host name and
	// root home, but shares that namespace's /proc and /dev/shm.
	JoinPID int
	KeyType string // host key type: ed25519 (default), ecdsa, rsa
	// AuthorizedKeys are public key lines accepted for root.
	AuthorizedKeys []string
	// SMI, when set, puts a fake nvidia-smi serving it first on the session PATH.
	SMI *scenario.SMI
	// Extra sshd_config lines.
	Extra []string
}

// SSHD is a running sshd.
type SSHD struct {
	Config
	Dir        string
	HostKeyPub string // "type base64" of its host key
	cmd        *exec.Cmd
	exited     chan struct{} // closed once cmd (unshare, or nsenter) has exited and been reaped
	init       int           // sshd, cmd's child: the namespace's PID 1 (JoinPID's otherwise)
	log        *testenv.SyncBuffer
}

// Start starts an sshd and waits until it accepts connections; it is stopped at cleanup.
func Start(t testing.TB, c Config) *SSHD {
	t.Helper()
	SSHDPath(t)
	if c.KeyType == "" {
		c.KeyType = "ed25519"
	}
	dir := t.TempDir()
	s := &SSHD{Config: c, Dir: dir, log: &testenv.SyncBuffer{}}
	hostKey := filepath.Join(dir, "host_key")
	args := []string{"-q", "-N", "", "-t", c.KeyType, "-f", hostKey, "-C", c.Name}
	if c.KeyType == "rsa" {
		args = append(args, "-b", "2048")
	}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	s.HostKeyPub = f[0] + " " + f[1]
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), []byte(strings.Join(c.AuthorizedKeys, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
	if c.SMI != nil {
		smiDir := filepath.Join(dir, "bin")
		if err := os.Mkdir(smiDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := scenario.WriteFakeSMI(smiDir, *c.SMI); err != nil {
			t.Fatal(err)
		}
		path = smiDir + ":" + path
	}
	cfg := []string{
		fmt.Sprintf("ListenAddress %s:%d", c.Addr, c.Port),
		"HostKey " + hostKey,
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PidFile none",
		"StrictModes no",
		"UsePAM no",
		"PermitRootLogin prohibit-password",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"AllowAgentForwarding no",
		"SetEnv PATH=" + path,
		"LogLevel VERBOSE",
		"MaxStartups 200:30:400",
		"MaxSessions 64",
	}
	cfg = append(cfg, c.Extra...)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	s.launch(t)
	return s
}

// Restart stops the sshd and starts it again with the same host key, address and config, as
// a host whose sshd (or whole namespace: its processes end too) was restarted.
func (s *SSHD) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.launch(t)
}

// launch starts sshd in fresh namespaces and waits until it accepts connections.
func (s *SSHD) launch(t testing.TB) {
	t.Helper()
	c, dir, sshd := s.Config, s.Dir, SSHDPath(t)
	// Private UTS, PID and mount namespaces give this host its own name, its own /proc (its
	// processes only; sshd is its PID 1, which adopts orphans), its own /dev/shm and an empty
	// home for root (so the test machine's shell profile does not run in the sessions). sshd
	// -D stays in the foreground.
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	argv := []string{"unshare", "-u", "-p", "-m", "-f", "--kill-child", "--mount-proc", "sh", "-c",
		`hostname "$1" && mount -t tmpfs -o size=8g,mode=1777 tmpfs /dev/shm && mount --bind "$2" "$3" && shift 3 && exec "$@"`,
		"sh", c.Name, home, rootHome(),
		sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config")}
	if c.JoinPID != 0 {
		// nsenter forks sshd into the joined PID namespace; a fresh mount namespace copied
		// from the joined one holds only the home bind. sshd dies with nsenter (pdeathsig),
		// as it does with unshare --kill-child above.
		argv = []string{"nsenter", "-t", strconv.Itoa(c.JoinPID), "-p", "-m", "-C", "--",
			"unshare", "-u", "-m", "--propagation", "private", "sh", "-c",
			`hostname "$1" && mount --bind "$2" "$3" && shift 3 && exec "$@"`,
			"sh", c.Name, home, rootHome(),
			"setpriv", "--pdeathsig", "KILL", "--", sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config")}
	}
	if c.NetNS != "" {
		argv = append([]string{"ip", "netns", "exec", c.NetNS}, argv...)
	}
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.WaitDelay = 2 * time.Second
	// A test binary killed (go test's -timeout) takes its sshd with it (unshare --kill-child,
	// setpriv --pdeathsig): no sshd is left holding the address the next run needs.
	s.cmd.SysProcAttr = testenv.DieWithTest(false)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := s.cmd, make(chan struct{})
	s.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	s.waitListening(t)
	// Listening, sshd is there: unshare's (or nsenter's) one child. Unless it has exited, as
	// one that found its address taken does while another still answers there.
	testenv.WaitFor(t, "sshd "+s.Name+" under "+filepath.Base(argv[0]), func() bool {
		s.init = testenv.ChildOf(cmd.Process.Pid)
		return s.init != 0 || s.gone()
	})
	if s.init == 0 {
		t.Fatalf("sshd %s on %s:%d exited: %s", s.Name, s.Addr, s.Port, s.log.String())
	}
}

// gone says whether unshare (or nsenter), and so sshd, has exited.
func (s *SSHD) gone() bool {
	select {
	case <-s.exited:
		return true
	default:
		return false
	}
}

// waitListening waits until the sshd accepts connections, or fails the test once it has
// exited. The bound is no assertion of speed, only a guard against a hang.
func (s *SSHD) waitListening(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(testenv.HangGuard); time.Now().Before(deadline) && !s.gone(); time.Sleep(30 * time.Millisecond) {
		if s.NetNS == "" {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Addr, fmt.Sprint(s.Port)), time.Second)
			if err == nil {
				c.Close()
				return
			}
			continue
		}
		// Inside a namespace: ask ss there whether the port is listening.
		out, _ := exec.Command("ip", "netns", "exec", s.NetNS, "ss", "-Htln", fmt.Sprintf("sport = :%d", s.Port)).Output()
		if len(bytes.TrimSpace(out)) > 0 {
			return
		}
	}
	t.Fatalf("sshd %s on %s:%d did not start: %s", s.Name, s.Addr, s.Port, s.log.String())
}

// rootHome is root's home directory from the password database.
func rootHome() string {
	out, err := exec.Command("getent", "passwd", "root").Output()
	if f := strings.Split(strings.TrimSpace(string(out)), ":"); err == nil && len(f) >= 6 && f[5] != "" {
		return f[5]
	}
	return "/root"
}

// Enter is the command prefix that runs a command inside this host's PID and mount
// namespaces (nsenter into its sshd, the namespace's PID 1; or into JoinPID's, with its
// cgroup namespace).
func (s *SSHD) Enter(t testing.TB) []string {
	t.Helper()
	if s.JoinPID != 0 {
		return []string{"nsenter", "-t", strconv.Itoa(s.JoinPID), "-p", "-m", "-C", "--"}
	}
	if s.init == 0 {
		t.Fatalf("sshd %s is not running", s.Name)
	}
	return []string{"nsenter", "-t", strconv.Itoa(s.init), "-p", "-m", "--"}
}

// SMIDir is where this host's fake nvidia-smi reads its answers; rewrite them with
// scenario.WriteFakeSMI to change what it says.
func (s *SSHD) SMIDir() string { return filepath.Join(s.Dir, "bin") }

// Stop stops the sshd (it also ends its sessions) and returns once it has exited, its
// address free again for a Restart or the next test's sshd: sshd is killed first, and
// unshare (nsenter), which waits for it (for the whole namespace, sshd being its PID 1),
// exits after it. Killing unshare first would leave sshd to die later, still listening for a
// while on a loaded machine.
func (s *SSHD) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	if s.init != 0 {
		_ = syscall.Kill(s.init, syscall.SIGKILL)
		select {
		case <-s.exited:
		case <-time.After(testenv.HangGuard):
		}
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.init = nil, 0
}

// Log returns what sshd logged so far.
func (s *SSHD) Log() string { return s.log.String() }

// KnownHostsLine is this host's known_hosts line under the given name ("[addr]:port" form
// when the port is not 22).
func (s *SSHD) KnownHostsLine(name string) string {
	if s.Port != 22 {
		name = fmt.Sprintf("[%s]:%d", name, s.Port)
	}
	return name + " " + s.HostKeyPub
}

// NetNS is a network namespace with a veth link to the test's own namespace: the test side
// has HostAddr, the namespace side NSAddr. Anything listening on the namespace's loopback is
// reachable only from inside it.
type NetNS struct {
	Name     string
	HostAddr string
	NSAddr   string
}

// NewNetNS creates a namespace (removed at cleanup). n picks the /30 subnet, so parallel tests
// can each have one.
func NewNetNS(t testing.TB, n int) *NetNS {
	t.Helper()
	SSHDPath(t)
	name := fmt.Sprintf("gt-lab-%d-%d", os.Getpid(), n)
	hostIf, nsIf := fmt.Sprintf("gth%d", n), fmt.Sprintf("gtn%d", n)
	ns := &NetNS{Name: name, HostAddr: fmt.Sprintf("10.231.%d.1", n), NSAddr: fmt.Sprintf("10.231.%d.2", n)}
	steps := [][]string{
		{"ip", "netns", "add", name},
		{"ip", "link", "add", hostIf, "type", "veth", "peer", "name", nsIf},
		{"ip", "link", "set", nsIf, "netns", name},
		{"ip", "addr", "add", ns.HostAddr + "/30", "dev", hostIf},
		{"ip", "link", "set", hostIf, "up"},
		{"ip", "netns", "exec", name, "ip", "addr", "add", ns.NSAddr + "/30", "dev", nsIf},
		{"ip", "netns", "exec", name, "ip", "link", "set", nsIf, "up"},
		{"ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"},
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostIf).Run()
		_ = exec.Command("ip", "netns", "del", name).Run()
	})
	for _, st := range steps {
		if out, err := exec.Command(st[0], st[1:]...).CombinedOutput(); err != nil {
			testenv.SkipSuite(t, "network namespace", "apt-get install iproute2",
				fmt.Sprintf("network namespace setup %v: %v: %s", st, err, out))
		}
	}
	return ns
}

// UserKey makes a client key pair in dir and returns the private key path and public line.
func UserKey(t testing.TB, dir, typ string) (string, string) {
	t.Helper()
	p := filepath.Join(dir, "id_"+typ)
	args := []string{"-q", "-N", "", "-t", typ, "-f", p, "-C", "gputriage-test"}
	if out, err := exec.Command("ssh-keygen", args...).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(p + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return p, strings.TrimSpace(string(pub))
}
