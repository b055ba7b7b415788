// Command fleet measures gputriage against a simulated fleet (bench/simfleetd, a separate
// process) whose hosts run the real probe and of which a share misbehave (hang, reset, refuse,
// 50 MiB of garbage, one byte a second): it sweeps fleets of several sizes through the real CLI
// (-f hosts -F ssh_config --fanout --timeout --format json), checks that every host is reported
// with the outcome its behaviour calls for, and reports wall time, the client's CPU (user+sys)
// and peak RSS from the child's rusage, the memory each extra host costs, and the server's CPU
// from /proc, against the targets. After each run it runs, on the same fleet, bench/sshfloor (the
// same SSH client, sshexec, with nothing else to do) and bench/sshbare (a bare x/crypto/ssh
// client: the floor under both), and reports gputriage's CPU as a multiple of the bare floor's.
//
// Run from the repository root:
//
//	go run ./bench/fleet -sizes 500,1000 -reps 3
//
// Every child runs under a time limit and is stopped when the program ends.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
)

type opts struct {
	sizes    []int
	rtt      time.Duration
	fanout   int
	timeout  time.Duration
	reps     int
	bad      float64
	runProbe bool
	gogc     string
	work     string
}

// The targets (issue 8): at 1,000 hosts, peak RSS and client CPU per host; between sizes, the
// memory an extra host costs.
const (
	targetRSSMiB       = 64
	targetCPUMsPerHost = 2
	targetKiBPerHost   = 32
)

func main() { os.Exit(run()) }

func run() int {
	var o opts
	sizes := flag.String("sizes", "500,1000", "fleet sizes to sweep")
	flag.DurationVar(&o.rtt, "rtt", 50*time.Millisecond, "simulated latency of every server write")
	flag.IntVar(&o.fanout, "fanout", 64, "gputriage --fanout")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Second, "gputriage --timeout")
	flag.IntVar(&o.reps, "reps", 3, "runs per size (the median is reported)")
	flag.Float64Var(&o.bad, "bad", 0.1, "share of misbehaving hosts")
	flag.BoolVar(&o.runProbe, "run-probe", true, "hosts run the real probe (else they replay fixtures)")
	flag.StringVar(&o.gogc, "gogc", "", "GOGC for gputriage only (empty: the runtime's default)")
	flag.Parse()
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fleet: bad size %q\n", s)
			return 2
		}
		o.sizes = append(o.sizes, n)
	}
	work, err := os.MkdirTemp("", "gputriage-fleet-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	defer os.RemoveAll(work)
	o.work = work
	if err := build(work); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	if err := sweeps(o); err != nil {
		fmt.Fprintln(os.Stderr, "fleet:", err)
		return 1
	}
	return 0
}

func build(work string) error {
	for _, p := range []string{"./cmd/gputriage", "./bench/simfleetd", "./bench/sshfloor", "./bench/sshbare"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, "go", "build", "-o", work+"/", p).CombinedOutput()
		cancel()
		if err != nil {
			return fmt.Errorf("go build %s: %v: %s", p, err, out)
		}
	}
	return nil
}

// server is a running simfleetd and the directory it wrote the fleet's files to.
type server struct {
	*simfleet.Daemon
	dir string
}

func startServer(o opts, hosts int, name string) (*server, error) {
	dir := filepath.Join(o.work, name)
	d, err := simfleet.StartDaemon(filepath.Join(o.work, "simfleetd"), "-hosts", strconv.Itoa(hosts), "-rtt", o.rtt.String(),
		"-bad", strconv.FormatFloat(o.bad, 'f', -1, 64), "-dir", dir, "-lifetime", "30m",
		"-run-probe="+strconv.FormatBool(o.runProbe))
	if err != nil {
		return nil, err
	}
	return &server{Daemon: d, dir: dir}, nil
}

// cpu is the server's user+sys CPU so far, from /proc.
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.PID()))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / 100 // USER_HZ is 100 on Linux
}

type measure struct {
	wall, user, sys, server time.Duration
	maxRSSKiB               int64
	exit                    int
	stdout                  []byte
	stderr                  string
}

func (s *server) sweep(o opts, fanout int, timeout time.Duration) (measure, error) {
	return s.measure(o, timeout, "gputriage", "-f", filepath.Join(s.dir, "hosts"), "-F", filepath.Join(s.dir, "ssh_config"),
		"--fanout", strconv.Itoa(fanout), "--timeout", timeout.String(), "--format", "json")
}

// floor runs bench/sshfloor (the same SSH client, sshexec, on the same hosts, and nothing
// else) or bench/sshbare (a bare x/crypto/ssh client, no sshexec): name is either.
func (s *server) floor(o opts, name string) (measure, error) {
	return s.measure(o, o.timeout, name, "-dir", s.dir, "-fanout", strconv.Itoa(o.fanout), "-timeout", o.timeout.String())
}

func (s *server) measure(o opts, timeout time.Duration, name string, args ...string) (measure, error) {
	var m measure
	ctx, cancel := context.WithTimeout(context.Background(), timeout*4+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(o.work, name), args...)
	// No agent, no user ssh config: the sweep uses exactly the fleet's files.
	cmd.Env = []string{"HOME=" + o.work, "PATH=" + os.Getenv("PATH"), "USER=root"}
	if name == "gputriage" && o.gogc != "" {
		cmd.Env = append(cmd.Env, "GOGC="+o.gogc)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cpu0 := s.cpu()
	start := time.Now()
	err := cmd.Run()
	m.wall = time.Since(start)
	m.server = s.cpu() - cpu0
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return m, err
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	m.user = time.Duration(ru.Utime.Nano())
	m.sys = time.Duration(ru.Stime.Nano())
	m.maxRSSKiB = ru.Maxrss
	m.exit = cmd.ProcessState.ExitCode()
	m.stdout, m.stderr = out.Bytes(), errb.String()
	if ctx.Err() != nil {
		return m, fmt.Errorf("%s did not finish within %v", name, timeout*4+2*time.Minute)
	}
	return m, nil
}

type jsonHost struct {
	Host     string                                 `json:"host"`
	OK       bool                                   `json:"ok"`
	Hostname *string                                `json:"hostname"`
	Error    *struct{ Phase, Kind, Message string } `json:"error"`
	Raw      json.RawMessage                        `json:"-"`
}

func decode(b []byte) ([]jsonHost, error) {
	var doc struct {
		Hosts []json.RawMessage `json:"hosts"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("gputriage output is not JSON: %v", err)
	}
	out := make([]jsonHost, len(doc.Hosts))
	for i, r := range doc.Hosts {
		if err := json.Unmarshal(r, &out[i]); err != nil {
			return nil, err
		}
		out[i].Raw = r
	}
	return out, nil
}

// outcome says how gputriage reported a host: "ok", or "phase/kind" for a failure.
func outcome(h jsonHost) string {
	switch {
	case h.Error != nil:
		return h.Error.Phase + "/" + h.Error.Kind
	case h.OK && h.Hostname != nil:
		return "ok"
	}
	return "unknown"
}

func want(b simfleet.Behaviour) string {
	if b == simfleet.Garbage {
		return "probe/bad-output"
	}
	phase, kind := simfleet.Expected(b)
	if phase == "" {
		return "ok"
	}
	return phase + "/" + kind
}

func median(ms []measure) measure {
	// Sort by wall time; the median run's figures are reported together.
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			if ms[j].wall < ms[i].wall {
				ms[i], ms[j] = ms[j], ms[i]
			}
		}
	}
	return ms[len(ms)/2]
}

type sized struct {
	n int
	m measure
}

func sweeps(o opts) error {
	fmt.Printf("## simulated fleet: %.0f%% misbehaving, hosts run the real probe: %v, %v latency per server write, --fanout %d, --timeout %v, median of %d runs\n\n",
		o.bad*100, o.runProbe, o.rtt, o.fanout, o.timeout, o.reps)
	if o.gogc != "" {
		fmt.Printf("gputriage runs with GOGC=%s.\n\n", o.gogc)
	}
	fmt.Println("Client CPU (user+sys) in ms per host; each run sweeps with gputriage, then sshfloor (sshexec alone), then sshbare (bare x/crypto/ssh), on the same fleet; ratios are per run, then the median.")
	fmt.Println()
	fmt.Println("| hosts | wall s | client CPU s | gputriage ms/host | sshexec floor ms/host | bare floor ms/host | gputriage / bare | sshfloor / bare | peak RSS MiB | server CPU s | every host right |")
	fmt.Println("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|")
	var done []sized
	var failed error
	var lastTally string
	for _, n := range o.sizes {
		s, err := startServer(o, n, fmt.Sprintf("fleet-%d", n))
		if err != nil {
			return err
		}
		hosts, err := simfleet.ReadManifest(filepath.Join(s.dir, "manifest.json"))
		if err != nil {
			s.Stop()
			return err
		}
		var ms, floors, bares []measure
		var ratios, floorRatios []float64
		allRight := true
		for rep := range o.reps {
			m, f, b, err := s.round(o)
			if err != nil {
				s.Stop()
				return err
			}
			tally, right := check(hosts, m.stdout)
			allRight = allRight && right
			lastTally = tally
			ms, floors, bares = append(ms, m), append(floors, f), append(bares, b)
			ratios = append(ratios, cpuOf(m)/cpuOf(b))
			floorRatios = append(floorRatios, cpuOf(f)/cpuOf(b))
			fmt.Fprintf(os.Stderr, "fleet: %d hosts, run %d: gputriage %.2f, sshfloor %.2f, bare %.2f ms/host (%.2fx), %.1f MiB, load %s\n",
				n, rep+1, cpuOf(m)/float64(n)*1000, cpuOf(f)/float64(n)*1000, cpuOf(b)/float64(n)*1000, ratios[rep], float64(m.maxRSSKiB)/1024, loadavg())
		}
		s.Stop()
		m, f, b := median(ms), median(floors), median(bares)
		fmt.Printf("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %v |\n", n, m.wall.Seconds(), cpuOf(m),
			cpuOf(m)/float64(n)*1000, cpuOf(f)/float64(n)*1000, cpuOf(b)/float64(n)*1000, medianOf(ratios), medianOf(floorRatios),
			float64(m.maxRSSKiB)/1024, m.server.Seconds(), allRight)
		if !allRight {
			failed = fmt.Errorf("%d-host sweep: not every host was reported right", n)
		}
		done = append(done, sized{n, m})
	}
	fmt.Printf("\noutcomes of the last run of the largest fleet:\n\n%s\n", lastTally)
	verdicts(done)
	return failed
}

// round sweeps the fleet once with each client, one after the other.
func (s *server) round(o opts) (triage, floor, bare measure, err error) {
	if triage, err = s.sweep(o, o.fanout, o.timeout); err != nil {
		return
	}
	if floor, err = s.floor(o, "sshfloor"); err != nil {
		return
	}
	bare, err = s.floor(o, "sshbare")
	return
}

func cpuOf(m measure) float64 { return (m.user + m.sys).Seconds() }

func medianOf(xs []float64) float64 {
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	return ys[len(ys)/2]
}

// loadavg is the 1-minute load average, for the log.
func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// verdicts compares the largest fleet with the targets, and the memory an extra host costs
// between the two largest fleets.
func verdicts(done []sized) {
	last := done[len(done)-1]
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	rss := float64(last.m.maxRSSKiB) / 1024
	cpu := (last.m.user + last.m.sys).Seconds() / float64(last.n) * 1000
	fmt.Printf("- %d hosts: peak RSS %.1f MiB (target <= %d MiB: %s), client CPU %.2f ms/host (target <= %d: %s)\n",
		last.n, rss, targetRSSMiB, verdict(rss <= targetRSSMiB), cpu, targetCPUMsPerHost, verdict(cpu <= targetCPUMsPerHost))
	if len(done) > 1 {
		prev := done[len(done)-2]
		per := float64(last.m.maxRSSKiB-prev.m.maxRSSKiB) / float64(last.n-prev.n)
		fmt.Printf("- memory per extra host, %d to %d hosts: %.1f KiB (target <= %d KiB: %s)\n",
			prev.n, last.n, per, targetKiBPerHost, verdict(per <= targetKiBPerHost))
	}
	fmt.Println()
}

// check compares what gputriage reported for each host with what its behaviour calls for,
// and returns a table of the outcomes.
func check(hosts []simfleet.Host, stdout []byte) (table string, allRight bool) {
	got, err := decode(stdout)
	if err != nil {
		return err.Error(), false
	}
	byName := map[string]jsonHost{}
	for _, h := range got {
		byName[h.Host] = h
	}
	type tally struct{ n, right int }
	counts := map[simfleet.Behaviour]*tally{}
	right := 0
	for _, h := range hosts {
		t := counts[h.Behaviour]
		if t == nil {
			t = &tally{}
			counts[h.Behaviour] = t
		}
		t.n++
		o := "missing"
		if g, ok := byName[h.Name]; ok {
			o = outcome(g)
		}
		if o == want(h.Behaviour) {
			t.right++
			right++
		} else {
			fmt.Fprintf(os.Stderr, "fleet: %s (%s): reported %s, want %s\n", h.Name, h.Behaviour, o, want(h.Behaviour))
		}
	}
	var b strings.Builder
	b.WriteString("| behaviour | hosts | expected outcome | reported so |\n|---|---:|---|---:|\n")
	for _, bh := range append([]simfleet.Behaviour{simfleet.Good}, simfleet.BadBehaviours...) {
		if t := counts[bh]; t != nil {
			fmt.Fprintf(&b, "| %s | %d | %s | %d |\n", bh, t.n, want(bh), t.right)
		}
	}
	return b.String(), right == len(hosts) && len(got) == len(hosts)
}
