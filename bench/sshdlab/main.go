//go:build linux

// Command sshdlab starts K real OpenSSH sshd hosts for bench/fanout.sh, the way
// internal/sshdtest does for tests (which needs a testing.TB): each host listens on its own
// 127.0.x.y address, runs in private UTS, PID and mount namespaces (its own host name, its own
// /proc, its own /dev/shm, an empty home for root) and finds a fake nvidia-smi first on PATH
// serving a healthy 8-GPU host. Run as root.
//
//	sshdlab -hosts 32 -dir /tmp/lab
//
// It writes hosts, ssh_config, known_hosts, id_ed25519 and pids (the sshd PIDs, for server CPU
// accounting) into -dir, prints "ready DIR", and stops every sshd when its stdin closes, on
// SIGINT or SIGTERM, or after -lifetime.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
)

func main() { os.Exit(run()) }

type host struct {
	name, addr string
	cmd        *exec.Cmd
	sshdPID    int
}

func run() int {
	n := flag.Int("hosts", 32, "number of sshd hosts (at most 250)")
	dir := flag.String("dir", "", "directory for the lab's files (required)")
	net3 := flag.String("net", "127.0.3", "first three octets of the hosts' addresses (127.x.y)")
	port := flag.Int("port", 2322, "port every host listens on")
	lifetime := flag.Duration("lifetime", 15*time.Minute, "stop after this long in any case")
	flag.Parse()
	if *dir == "" || *n < 1 || *n > 250 || !strings.HasPrefix(*net3, "127.") {
		fmt.Fprintln(os.Stderr, "sshdlab: need -dir, 1 <= -hosts <= 250, and a 127.x.y -net")
		return 2
	}
	var hosts []*host
	stop := func() {
		for _, h := range hosts {
			if h.cmd.Process != nil {
				// unshare --kill-child takes the whole PID namespace with it.
				_ = syscall.Kill(-h.cmd.Process.Pid, syscall.SIGKILL)
				_ = h.cmd.Wait()
			}
		}
	}
	defer stop()
	hs, err := start(*dir, *n, *net3, *port, &hosts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sshdlab:", err)
		return 1
	}
	_ = hs
	fmt.Printf("ready %s\n", *dir)
	stdinClosed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-stdinClosed:
	case <-sig:
	case <-time.After(*lifetime):
		fmt.Fprintln(os.Stderr, "sshdlab: lifetime over, stopping")
	}
	return 0
}

func sh(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %v: %s", name, args, err, out)
	}
	return nil
}

func start(dir string, n int, net3 string, port int, hosts *[]*host) ([]*host, error) {
	sshd := "/usr/sbin/sshd"
	if _, err := os.Stat(sshd); err != nil || os.Geteuid() != 0 {
		return nil, errors.New("needs root and /usr/sbin/sshd (apt-get install openssh-server)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	k, err := makeKeys(dir)
	if err != nil {
		return nil, err
	}
	var names, conf, known strings.Builder
	for i := range n {
		h := &host{name: fmt.Sprintf("lab%03d", i+1), addr: fmt.Sprintf("%s.%d", net3, i+1)}
		if err := launch(h, dir, port, sshd, k); err != nil {
			return nil, err
		}
		*hosts = append(*hosts, h)
		fmt.Fprintf(&names, "%s\n", h.name)
		fmt.Fprintf(&conf, "Host %s\n\tHostName %s\n", h.name, h.addr)
		fmt.Fprintf(&known, "[%s]:%d %s\n", h.addr, port, k.hostPub)
	}
	fmt.Fprintf(&conf, "Host *\n\tPort %d\n\tUser root\n\tIdentityFile %s\n\tIdentitiesOnly yes\n\tUserKnownHostsFile %s\n\tGlobalKnownHostsFile /dev/null\n\tStrictHostKeyChecking yes\n\tBatchMode yes\n",
		port, k.user, filepath.Join(dir, "known_hosts"))
	pids, err := waitListening(*hosts, port)
	if err != nil {
		return nil, err
	}
	for name, data := range map[string]string{"hosts": names.String(), "ssh_config": conf.String(),
		"known_hosts": known.String(), "pids": pids} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return nil, err
		}
	}
	return *hosts, nil
}

// labKeys are the lab's one user key (its file, and authorized_keys holding it) and the one
// host key every host uses ("type base64").
type labKeys struct{ user, authorized, hostKey, hostPub string }

func makeKeys(dir string) (labKeys, error) {
	k := labKeys{user: filepath.Join(dir, "id_ed25519"), authorized: filepath.Join(dir, "authorized_keys"),
		hostKey: filepath.Join(dir, "host_key")}
	for _, f := range []string{k.user, k.hostKey} {
		_ = os.Remove(f)
		_ = os.Remove(f + ".pub")
		if err := sh("ssh-keygen", "-q", "-N", "", "-t", "ed25519", "-f", f, "-C", "sshdlab"); err != nil {
			return k, err
		}
	}
	userPub, err := os.ReadFile(k.user + ".pub")
	if err != nil {
		return k, err
	}
	hostPub, err := os.ReadFile(k.hostKey + ".pub")
	if err != nil {
		return k, err
	}
	hf := strings.Fields(string(hostPub))
	if len(hf) < 2 {
		return k, fmt.Errorf("bad host key file %s", k.hostKey+".pub")
	}
	k.hostPub = hf[0] + " " + hf[1]
	return k, os.WriteFile(k.authorized, userPub, 0o600)
}

// launch starts one host's sshd in its own UTS, PID and mount namespaces.
func launch(h *host, dir string, port int, sshd string, k labKeys) error {
	hdir := filepath.Join(dir, h.name)
	bin, home := filepath.Join(hdir, "bin"), filepath.Join(hdir, "home")
	for _, d := range []string{bin, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if err := scenario.WriteFakeSMI(bin, smi8()); err != nil {
		return err
	}
	cfg := []string{
		fmt.Sprintf("ListenAddress %s:%d", h.addr, port),
		"HostKey " + k.hostKey,
		"AuthorizedKeysFile " + k.authorized,
		"PidFile none", "StrictModes no", "UsePAM no",
		"PermitRootLogin prohibit-password", "PasswordAuthentication no",
		"KbdInteractiveAuthentication no", "AllowAgentForwarding no",
		"SetEnv PATH=" + bin + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"LogLevel ERROR", "MaxStartups 400:30:800", "MaxSessions 64", "UseDNS no",
	}
	cfgFile := filepath.Join(hdir, "sshd_config")
	if err := os.WriteFile(cfgFile, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
		return err
	}
	h.cmd = exec.Command("unshare", "-u", "-p", "-m", "-f", "--kill-child", "--mount-proc", "sh", "-c",
		`hostname "$1" && mount -t tmpfs -o size=1g,mode=1777 tmpfs /dev/shm && mount --bind "$2" "$3" && shift 3 && exec "$@"`,
		"sh", h.name, home, "/root", sshd, "-D", "-e", "-f", cfgFile)
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(filepath.Join(hdir, "sshd.log"))
	if err != nil {
		return err
	}
	h.cmd.Stdout, h.cmd.Stderr = logf, logf
	return h.cmd.Start()
}

// waitListening waits until every host accepts connections and returns their sshd PIDs, one
// a line.
func waitListening(hosts []*host, port int) (string, error) {
	var pids strings.Builder
	deadline := time.Now().Add(30 * time.Second)
	for _, h := range hosts {
		for {
			c, err := net.DialTimeout("tcp", net.JoinHostPort(h.addr, strconv.Itoa(port)), time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				return "", fmt.Errorf("sshd %s on %s:%d did not start", h.name, h.addr, port)
			}
			time.Sleep(20 * time.Millisecond)
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", h.cmd.Process.Pid, h.cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) > 0 {
			h.sshdPID, _ = strconv.Atoi(f[0])
			fmt.Fprintf(&pids, "%d\n", h.sshdPID)
		}
	}
	return pids.String(), nil
}

// smi8 is a healthy, idle 8-GPU host.
func smi8() scenario.SMI {
	var g []scenario.GPU
	for i := range 8 {
		g = append(g, scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-0000000%d-1111-2222-3333-444444444444", i),
			Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			TotalMiB: 81559, UsedMiB: 1, ReservedMiB: 532, Driver: "550.90.07"})
	}
	return scenario.SMI{GPUs: g}
}
