// Package simfleet simulates a fleet of GPU hosts for gputriage's scale benchmarks and tests:
// one in-process x/crypto/ssh server answering on N addresses and ports of 127.0.0.0/8, each
// host replying to the probe command either by running the real probe (Config.RunProbe) or
// with a recorded capture (its nonce rewritten to the one the client sent), and to a command
// that runs nvidia-smi (pdsh's) with the recorded nvidia-smi output; after a fixed host-side
// time, behind a simulated latency on every server write, with a configurable share of hosts
// that misbehave the ways a real fleet does: silent after TCP accept, reset mid-output, closed
// port, 50 MiB of garbage, one byte a second.
//
// It also writes what a client needs to reach the fleet: a hosts file, an ssh_config, a
// known_hosts file and the client's private key. bench/simfleetd runs it as a separate process
// (so that server CPU is not charged to the client); tests use it in-process.
package simfleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
)

// Behaviour is how one simulated host treats a connection.
type Behaviour string

// The behaviours. They are also the names written to the manifest.
const (
	Good    Behaviour = "ok"      // answers the probe with a capture
	Hang    Behaviour = "hang"    // accepts TCP, never sends a banner
	Reset   Behaviour = "reset"   // sends half the capture, then resets the TCP connection
	Refuse  Behaviour = "refuse"  // nothing listens on its port
	Garbage Behaviour = "garbage" // sends bytes that are not a capture, exit status 0
	Trickle Behaviour = "trickle" // sends the capture one byte per second
)

// BadBehaviours are the misbehaviours, in the order hosts are assigned them.
var BadBehaviours = []Behaviour{Hang, Reset, Refuse, Garbage, Trickle}

// Config configures a fleet.
type Config struct {
	Hosts int           // number of hosts (at most 253 x 200)
	RTT   time.Duration // simulated round trip: every server write reaches the client this late
	// BadShare is the share of hosts (0..1) that misbehave, spread evenly over BadBehaviours
	// and over the fleet (every 1/BadShare-th host).
	BadShare float64
	// Captures are served round robin to good hosts (and cut or trickled by bad ones). Each
	// must start with a "gputriage-capture v2 nonce=HEX" (or v1) line.
	Captures [][]byte
	// Dir receives hosts, ssh_config, known_hosts, id_ed25519 and manifest.json.
	Dir string
	// User is the login name written to ssh_config (default root); any user is accepted.
	User string
	// HostTime is how long a host takes, once its command and input are in, before it answers:
	// the time its probe or nvidia-smi would take on a real machine elsewhere.
	HostTime time.Duration
	// RunProbe makes the hosts answer the probe by running it: the script the client sent on
	// stdin, run by `sh -s` on this machine (its real /proc and /dev/shm) with a fake
	// nvidia-smi serving an idle 8-GPU host first on PATH (see SMIDir). One run answers every
	// host that is sent the same input: a sweep sends all its hosts the same nonce, and all the
	// hosts of this fleet are this one machine, so the N runs would print the same capture at N
	// times the server's CPU, which would only compete with the client being measured.
	// Without RunProbe, hosts replay Captures.
	RunProbe bool
	// SMIDir holds the nvidia-smi that RunProbe puts first on PATH (the caller writes it, e.g.
	// with scenario.WriteFakeSMI).
	SMIDir string
	// GarbageBytes is what a Garbage host sends; 0 means 50 MiB.
	GarbageBytes int
}

// Host is one simulated host.
type Host struct {
	Name      string    `json:"name"`
	Addr      string    `json:"addr"`
	Port      int       `json:"port"`
	Behaviour Behaviour `json:"behaviour"`
}

// Fleet is a running simulated fleet.
type Fleet struct {
	Hosts      []Host
	HostsFile  string // one host name per line
	SSHConfig  string // for -F: HostName, Port, User, IdentityFile, known_hosts for every host
	KnownHosts string
	ClientKey  string // private key file accepted by every host
	Manifest   string // JSON list of Host

	cfg      Config
	server   *ssh.ServerConfig
	captures []capture
	ctx      context.Context
	cancel   context.CancelFunc
	lns      []net.Listener
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	garbage  []byte // one block of garbage, sent until GarbageBytes are out

	runMu sync.Mutex
	runs  map[string]*probeRun // RunProbe's outputs, by the input that produced them
}

type capture struct {
	raw   []byte
	nonce []byte
}

// Addr is the listen address of host i: 127.0.0.2 to 127.0.0.254 in turn, so that no single
// address carries more than a few hundred listeners and connections.
func Addr(i int) string { return fmt.Sprintf("127.0.0.%d", 2+i%253) }

// Start starts the fleet and writes its client files into cfg.Dir.
func Start(cfg Config) (*Fleet, error) {
	if cfg.Hosts < 1 || cfg.Hosts > 253*200 {
		return nil, fmt.Errorf("simfleet: %d hosts: want 1 to %d", cfg.Hosts, 253*200)
	}
	if len(cfg.Captures) == 0 {
		return nil, errors.New("simfleet: no captures to serve")
	}
	if cfg.User == "" {
		cfg.User = "root"
	}
	if cfg.GarbageBytes <= 0 {
		cfg.GarbageBytes = 50 << 20
	}
	f := &Fleet{cfg: cfg, conns: map[net.Conn]struct{}{}, runs: map[string]*probeRun{}}
	for i, raw := range cfg.Captures {
		n := captureNonce(raw)
		if len(n) == 0 {
			return nil, fmt.Errorf("simfleet: capture %d has no nonce header", i)
		}
		f.captures = append(f.captures, capture{raw: raw, nonce: n})
	}
	f.garbage = garbage(64 << 10)
	hostPub, clientPriv, err := f.setupKeys()
	if err != nil {
		return nil, err
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if err := f.listen(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.writeFiles(hostPub, clientPriv); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// captureNonce is the nonce of a capture's header line (v2 or v1), nil when it has none.
func captureNonce(raw []byte) []byte {
	first, _, _ := bytes.Cut(raw, []byte("\n"))
	first = bytes.TrimSuffix(first, []byte("\r"))
	n, ok := bytes.CutPrefix(first, []byte("gputriage-capture v2 nonce="))
	if !ok {
		n, _ = bytes.CutPrefix(first, []byte("gputriage-capture v1 nonce="))
	}
	if bytes.Equal(n, first) {
		return nil
	}
	return n
}

// setupKeys makes the fleet's host key and the one client key it accepts.
func (f *Fleet) setupKeys() (ssh.PublicKey, ed25519.PrivateKey, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, nil, err
	}
	_, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	clientSigner, err := ssh.NewSignerFromKey(clientPriv)
	if err != nil {
		return nil, nil, err
	}
	authorized := clientSigner.PublicKey().Marshal()
	f.server = &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-simfleet",
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("simfleet: key not authorized")
		},
	}
	f.server.AddHostKey(hostSigner)
	return hostSigner.PublicKey(), clientPriv, nil
}

// listen gives every host its listener and behaviour: one in every 1/BadShare misbehaves,
// in BadBehaviours' turn.
func (f *Fleet) listen() error {
	step := 0
	if f.cfg.BadShare > 0 {
		step = max(1, int(1/f.cfg.BadShare+0.5))
	}
	bad := 0
	for i := range f.cfg.Hosts {
		h := Host{Name: fmt.Sprintf("sim%05d", i), Addr: Addr(i), Behaviour: Good}
		if step > 0 && i%step == step-1 {
			h.Behaviour = BadBehaviours[bad%len(BadBehaviours)]
			bad++
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(h.Addr, "0"))
		if err != nil {
			return fmt.Errorf("simfleet: host %s: %w", h.Name, err)
		}
		h.Port = ln.Addr().(*net.TCPAddr).Port
		if h.Behaviour == Refuse {
			// A port that was just free and is closed again: connecting is refused.
			_ = ln.Close()
		} else {
			f.lns = append(f.lns, ln)
			f.wg.Add(1)
			go f.accept(ln, i, h.Behaviour)
		}
		f.Hosts = append(f.Hosts, h)
	}
	return nil
}

// Close stops every listener and connection and waits for the server's goroutines.
func (f *Fleet) Close() {
	f.cancel()
	for _, ln := range f.lns {
		_ = ln.Close()
	}
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *Fleet) writeFiles(hostKey ssh.PublicKey, clientPriv ed25519.PrivateKey) error {
	dir := f.cfg.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f.HostsFile = filepath.Join(dir, "hosts")
	f.SSHConfig = filepath.Join(dir, "ssh_config")
	f.KnownHosts = filepath.Join(dir, "known_hosts")
	f.ClientKey = filepath.Join(dir, "id_ed25519")
	f.Manifest = filepath.Join(dir, "manifest.json")
	block, err := ssh.MarshalPrivateKey(clientPriv, "simfleet")
	if err != nil {
		return err
	}
	var hosts, conf, kh strings.Builder
	key := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostKey)))
	for _, h := range f.Hosts {
		fmt.Fprintf(&hosts, "%s\n", h.Name)
		fmt.Fprintf(&conf, "Host %s\n\tHostName %s\n\tPort %d\n", h.Name, h.Addr, h.Port)
		fmt.Fprintf(&kh, "[%s]:%d %s\n", h.Addr, h.Port, key)
	}
	fmt.Fprintf(&conf, "Host *\n\tUser %s\n\tIdentityFile %s\n\tIdentitiesOnly yes\n\tUserKnownHostsFile %s\n\tGlobalKnownHostsFile /dev/null\n\tStrictHostKeyChecking yes\n\tBatchMode yes\n",
		f.cfg.User, f.ClientKey, f.KnownHosts)
	manifest, err := json.MarshalIndent(f.Hosts, "", " ")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		f.ClientKey:  pem.EncodeToMemory(block),
		f.HostsFile:  []byte(hosts.String()),
		f.SSHConfig:  []byte(conf.String()),
		f.KnownHosts: []byte(kh.String()),
		f.Manifest:   append(manifest, '\n'),
	} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fleet) accept(ln net.Listener, i int, b Behaviour) {
	defer f.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		if f.ctx.Err() != nil {
			f.mu.Unlock()
			_ = c.Close()
			return
		}
		f.conns[c] = struct{}{}
		f.wg.Add(1)
		f.mu.Unlock()
		go func() {
			defer f.wg.Done()
			defer func() {
				f.mu.Lock()
				delete(f.conns, c)
				f.mu.Unlock()
				_ = c.Close()
			}()
			f.serve(c, i, b)
		}()
	}
}

func (f *Fleet) serve(raw net.Conn, i int, b Behaviour) {
	if b == Hang {
		// Read and drop whatever the client sends until it gives up (or the fleet closes).
		_, _ = io.Copy(io.Discard, raw)
		return
	}
	c := newDelayConn(raw, f.cfg.RTT)
	defer c.Close()
	sc, chans, reqs, err := ssh.NewServerConn(c, f.server)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "simfleet: sessions only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go f.session(c, ch, creqs, i, b)
	}
}

func (f *Fleet) session(c *delayConn, ch ssh.Channel, reqs <-chan *ssh.Request, i int, b Behaviour) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(false, nil)
			continue
		}
		var p struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			_ = req.Reply(false, nil)
			continue
		}
		_ = req.Reply(true, nil)
		go func() {
			for r := range reqs {
				_ = r.Reply(false, nil)
			}
		}()
		f.exec(c, ch, p.Command, i, b)
		return
	}
}

func (f *Fleet) exec(c *delayConn, ch ssh.Channel, command string, i int, b Behaviour) {
	exit := func(status uint32) {
		_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		_ = ch.CloseWrite()
	}
	out, err := f.answer(ch, command, i)
	if err != nil {
		_, _ = io.WriteString(ch.Stderr(), "simfleet: "+err.Error()+"\n")
		exit(2)
		return
	}
	if !f.sleep(f.cfg.HostTime) {
		return
	}
	switch b {
	case Good:
		_, _ = ch.Write(out)
		exit(0)
	case Garbage:
		for sent := 0; sent < f.cfg.GarbageBytes; sent += len(f.garbage) {
			if _, err := ch.Write(f.garbage[:min(len(f.garbage), f.cfg.GarbageBytes-sent)]); err != nil {
				return
			}
		}
		exit(0)
	case Reset:
		_, _ = ch.Write(out[:len(out)/2])
		c.Reset() // after the half capture has reached the client
	case Trickle:
		for k := range out {
			if _, err := ch.Write(out[k : k+1]); err != nil || !f.sleep(time.Second) {
				return
			}
		}
		exit(0)
	}
}

// sleep waits d, or until the fleet closes (then it returns false).
func (f *Fleet) sleep(d time.Duration) bool {
	if d <= 0 {
		return f.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

// answer is what host i prints for command: the recorded nvidia-smi output for a command that
// runs nvidia-smi (pdsh's queries) or for input without a nonce that does (bench/sshbare's
// `sh -s` fed the two queries), else the probe's capture for the input on ch (the probe
// script after a "set -- NONCE SECONDS" line), read whole.
func (f *Fleet) answer(ch ssh.Channel, command string, i int) ([]byte, error) {
	cp := f.captures[i%len(f.captures)]
	if strings.Contains(command, "nvidia-smi") {
		return smiOutput(cp.raw), nil
	}
	in, err := io.ReadAll(io.LimitReader(ch, 4<<20))
	if err != nil {
		return nil, err
	}
	first, _, _ := bytes.Cut(in, []byte("\n"))
	nonce := NonceOf(string(first))
	if nonce == "" && bytes.Contains(in, []byte("nvidia-smi")) {
		return smiOutput(cp.raw), nil // `sh -s` fed nvidia-smi queries (bench/sshbare)
	}
	if nonce == "" {
		return nil, errors.New("no nonce on the first line of stdin")
	}
	if f.cfg.RunProbe {
		return f.runProbe(in)
	}
	return bytes.ReplaceAll(cp.raw, cp.nonce, []byte(nonce)), nil
}

// probeRun is one run of the real probe, shared by every host sent the same input.
type probeRun struct {
	done chan struct{}
	out  []byte
	err  error
}

// runProbe runs `sh -s` on input once per distinct input; hosts that ask meanwhile wait for
// that run.
func (f *Fleet) runProbe(input []byte) ([]byte, error) {
	f.runMu.Lock()
	r, ok := f.runs[string(input)]
	if !ok {
		r = &probeRun{done: make(chan struct{})}
		f.runs[string(input)] = r
	}
	f.runMu.Unlock()
	if !ok {
		ctx, cancel := context.WithTimeout(f.ctx, time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-s")
		cmd.Stdin = bytes.NewReader(input)
		cmd.Env = []string{"PATH=" + f.cfg.SMIDir + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LC_ALL=C"}
		r.out, r.err = cmd.Output()
		cancel()
		close(r.done)
	}
	<-r.done
	return r.out, r.err
}

// smiOutput is what the probe's two nvidia-smi queries printed on the host a capture was
// taken from: its smi-gpu and smi-apps sections.
func smiOutput(capture []byte) []byte {
	c, err := parse.SplitCapture(capture)
	if err != nil {
		return nil
	}
	var out []byte
	for _, name := range []string{"smi-gpu", "smi-apps"} {
		if s := c.Section(name); s != nil {
			out = append(out, s.Body...)
			if len(s.Body) > 0 && s.Body[len(s.Body)-1] != '\n' {
				out = append(out, '\n')
			}
		}
	}
	return out
}

// NonceOf finds the probe's nonce in the first line of its stdin ("set -- NONCE SECONDS", see
// probe.Input): the first word of 16 or more lower-case hex digits.
func NonceOf(command string) string {
	for _, w := range strings.Fields(command) {
		if len(w) >= 16 && strings.Trim(w, "0123456789abcdef") == "" {
			return w
		}
	}
	return ""
}

// garbage is n bytes that are not a capture: no header line, control bytes, invalid UTF-8.
func garbage(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	b[0] = 0xff
	return b
}

// delayConn delivers every write to the peer RTT after it was made, in order, without
// blocking the writer (up to a bounded queue): the client sees each server reply one round
// trip late, as across a network. Reads are not delayed.
type delayConn struct {
	net.Conn
	rtt   time.Duration
	q     chan delayed
	done  chan struct{}
	close sync.Once
}

type delayed struct {
	due   time.Time
	data  []byte
	reset bool
}

func newDelayConn(c net.Conn, rtt time.Duration) *delayConn {
	d := &delayConn{Conn: c, rtt: rtt, q: make(chan delayed, 256), done: make(chan struct{})}
	go d.pump()
	return d
}

func (d *delayConn) Write(p []byte) (int, error) {
	if d.rtt <= 0 {
		return d.Conn.Write(p)
	}
	item := delayed{due: time.Now().Add(d.rtt), data: bytes.Clone(p)}
	select {
	case d.q <- item:
		return len(p), nil
	case <-d.done:
		return 0, net.ErrClosed
	}
}

// Reset aborts the connection with a RST once everything written before has been delivered.
func (d *delayConn) Reset() {
	select {
	case d.q <- delayed{due: time.Now().Add(d.rtt), reset: true}:
	case <-d.done:
	}
}

func (d *delayConn) pump() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var it delayed
		select {
		case it = <-d.q:
		case <-d.done:
			return
		}
		if wait := time.Until(it.due); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-d.done:
				return
			}
		}
		if it.reset {
			if tc, ok := d.Conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			_ = d.Conn.Close()
			return
		}
		if _, err := d.Conn.Write(it.data); err != nil {
			_ = d.Conn.Close()
			return
		}
	}
}

func (d *delayConn) Close() error {
	d.close.Do(func() { close(d.done) })
	return d.Conn.Close()
}

// ReadManifest reads the hosts of a fleet from its manifest.json.
func ReadManifest(path string) ([]Host, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var hs []Host
	if err := json.Unmarshal(b, &hs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return hs, nil
}

// Expected is the outcome a correct client reports for a host of behaviour b: the phase and
// kind of its failure, or "" "" for a host that must succeed. Garbage output is not an SSH
// failure: the command exits 0 and the capture does not parse (see ExpectGarbage).
func Expected(b Behaviour) (phase, kind string) {
	switch b {
	case Hang:
		return "handshake", "timeout"
	case Reset:
		return "probe", "reset"
	case Refuse:
		return "connect", "refused"
	case Trickle:
		return "probe", "timeout"
	}
	return "", ""
}

// WriteIdleSMI writes into dir a fake nvidia-smi serving an idle 8-GPU host, for SMIDir.
func WriteIdleSMI(dir string) error {
	var gpus []scenario.GPU
	for i := range 8 {
		gpus = append(gpus, scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-5a5a5a5a-0000-0000-0000-%012d", i),
			Name: "NVIDIA H100 80GB HBM3", BusID: fmt.Sprintf("00000000:%02X:00.0", 0x18+i*0x10),
			TotalMiB: 81559, UsedMiB: 1, ReservedMiB: 532, Driver: "550.90.07"})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return scenario.WriteFakeSMI(dir, scenario.SMI{GPUs: gpus})
}
