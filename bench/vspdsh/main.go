// Command vspdsh measures gputriage's wall time against pdsh on hosts that stand for machines
// elsewhere: bench/simfleetd (a separate process) serves K hosts that answer after a fixed
// host-side time (150 ms) with every server write delayed (10 ms), running nothing on this
// machine. gputriage gets the probe's capture (a fixture with this run's nonce); pdsh, through
// OpenSSH's ssh, gets the recorded output of the two nvidia-smi queries the probe makes.
//
// It alternates runs of
//
//	(a) gputriage -f hosts -F ssh_config --fanout K --timeout 60s --format json
//	(b) PDSH_RCMD_TYPE=ssh pdsh -f K -w ^hosts 'nvidia-smi --query-gpu=...; nvidia-smi --query-compute-apps=...'
//
// checks that each reached every host, and prints the medians of wall time and client CPU
// (the child's rusage, which includes the ssh processes pdsh waited for), the wall ratio a/b
// against the target, and gputriage's wall time for one host alone. Run from the repository
// root (needs pdsh and ssh):
//
//	go run ./bench/vspdsh -hosts 64 -runs 7
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
)

const targetRatio = 0.35

const (
	smiGPU  = "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,memory.free,utilization.gpu,compute_mode,driver_version,memory.reserved,mig.mode.current --format=csv,nounits"
	smiApps = "--query-compute-apps=pid,gpu_uuid,used_memory,process_name --format=csv,nounits"
)

type opts struct {
	hosts    int
	runs     int
	rtt      time.Duration
	hostTime time.Duration
	fixture  string
	work     string
}

func main() { os.Exit(run()) }

func run() int {
	var o opts
	flag.IntVar(&o.hosts, "hosts", 64, "simulated hosts (also the fanout of both)")
	flag.IntVar(&o.runs, "runs", 7, "alternating runs of each")
	flag.DurationVar(&o.rtt, "rtt", 10*time.Millisecond, "delay added to every server write")
	flag.DurationVar(&o.hostTime, "host-time", 150*time.Millisecond, "host-side time before each host answers")
	flag.StringVar(&o.fixture, "fixture", "fixtures/clean.capture", "the capture (and nvidia-smi output) every host serves")
	flag.Parse()
	for _, tool := range []string{"pdsh", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Fprintf(os.Stderr, "vspdsh: %s is missing (apt-get install -y pdsh openssh-client)\n", tool)
			return 2
		}
	}
	work, err := os.MkdirTemp("", "gputriage-vspdsh-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "vspdsh:", err)
		return 1
	}
	defer os.RemoveAll(work)
	o.work = work
	if err := measure(o); err != nil {
		fmt.Fprintln(os.Stderr, "vspdsh:", err)
		return 1
	}
	return 0
}

func measure(o opts) error {
	for _, p := range []string{"./cmd/gputriage", "./bench/simfleetd"} {
		if out, err := exec.Command("go", "build", "-o", o.work+"/", p).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v: %s", p, err, out)
		}
	}
	fleet := filepath.Join(o.work, "fleet")
	srv, err := simfleet.StartDaemon(filepath.Join(o.work, "simfleetd"), "-hosts", strconv.Itoa(o.hosts), "-rtt", o.rtt.String(),
		"-host-time", o.hostTime.String(), "-fixtures", o.fixture, "-dir", fleet, "-lifetime", "30m")
	if err != nil {
		return err
	}
	defer srv.Stop()
	hosts, config := filepath.Join(fleet, "hosts"), filepath.Join(fleet, "ssh_config")
	first, _, _ := strings.Cut(readFile(hosts), "\n")
	k := strconv.Itoa(o.hosts)
	env := []string{"HOME=" + o.work, "PATH=" + os.Getenv("PATH"), "USER=root"}
	a := func() *exec.Cmd {
		return exec.Command(filepath.Join(o.work, "gputriage"), "-f", hosts, "-F", config, "--fanout", k, "--timeout", "60s", "--format", "json")
	}
	one := func() *exec.Cmd {
		return exec.Command(filepath.Join(o.work, "gputriage"), "-F", config, "--timeout", "60s", "--format", "json", first)
	}
	b := func() *exec.Cmd {
		c := exec.Command("pdsh", "-f", k, "-w", "^"+hosts, "nvidia-smi "+smiGPU+"; nvidia-smi "+smiApps)
		c.Env = append(env, "PDSH_RCMD_TYPE=ssh", "PDSH_SSH_ARGS=-F "+config+" -x -a -l%u %h")
		return c
	}
	okA := func(out []byte, n int) bool { return bytes.Count(out, []byte(`"ok": true`)) == n }
	okB := func(out []byte, n int) bool {
		seen := map[string]bool{}
		for _, l := range strings.Split(string(out), "\n") {
			if h, rest, ok := strings.Cut(l, ": "); ok && strings.Contains(rest, ", GPU-") {
				seen[h] = true
			}
		}
		return len(seen) == n
	}
	// One warm-up run of each (page cache, first connections), not counted.
	if _, err := timed(a(), env, func(out []byte) bool { return okA(out, o.hosts) }); err != nil {
		return err
	}
	if _, err := timed(b(), nil, func(out []byte) bool { return okB(out, o.hosts) }); err != nil {
		return err
	}
	var as, bs, ones []sample
	for range o.runs {
		for _, x := range []struct {
			cmd  func() *exec.Cmd
			env  []string
			ok   func([]byte) bool
			into *[]sample
		}{
			{a, env, func(out []byte) bool { return okA(out, o.hosts) }, &as},
			{b, nil, func(out []byte) bool { return okB(out, o.hosts) }, &bs},
			{one, env, func(out []byte) bool { return okA(out, 1) }, &ones},
		} {
			s, err := timed(x.cmd(), x.env, x.ok)
			if err != nil {
				return err
			}
			*x.into = append(*x.into, s)
		}
	}
	printResults(o, as, bs, ones)
	return nil
}

// printResults prints the medians of the alternating runs and the wall ratio against its
// target, as the Markdown tables docs/performance.md quotes.
func printResults(o opts, as, bs, ones []sample) {
	ma, mb, m1 := median(as), median(bs), median(ones)
	fmt.Printf("## %d simulated hosts elsewhere: %v host-side time, %v added to every server write; %d alternating runs, medians\n\n",
		o.hosts, o.hostTime, o.rtt, o.runs)
	fmt.Println("| client | wall s | client CPU s | client CPU ms/host |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| (a) gputriage, full triage, --fanout %d | %.3f | %.3f | %.2f |\n", o.hosts, ma.wall.Seconds(), ma.cpu.Seconds(), ma.cpu.Seconds()*1000/float64(o.hosts))
	fmt.Printf("| (b) pdsh -R ssh -f %d, 2 nvidia-smi queries | %.3f | %.3f | %.2f |\n", o.hosts, mb.wall.Seconds(), mb.cpu.Seconds(), mb.cpu.Seconds()*1000/float64(o.hosts))
	fmt.Printf("| gputriage, one host alone | %.3f | %.3f | %.2f |\n", m1.wall.Seconds(), m1.cpu.Seconds(), m1.cpu.Seconds()*1000)
	r := ma.wall.Seconds() / mb.wall.Seconds()
	verdict := "met"
	if r > targetRatio {
		verdict = "MISSED"
	}
	fmt.Printf("\nwall ratio a/b = %.3f (target <= %.2f: %s); gputriage's %d hosts take %.2fx one host\n", r, targetRatio, verdict, o.hosts, ma.wall.Seconds()/m1.wall.Seconds())
	fmt.Printf("raw wall s: a %s; b %s; one %s\n", walls(as), walls(bs), walls(ones))
}

type sample struct{ wall, cpu time.Duration }

// timed runs cmd (with env, when set) and returns its wall time and CPU (its rusage, which
// counts the children it waited for); ok judges its stdout.
func timed(cmd *exec.Cmd, env []string, ok func([]byte) bool) (sample, error) {
	if env != nil {
		cmd.Env = env
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return sample{}, err
	}
	stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
	_ = cmd.Wait()
	stop()
	s := sample{wall: time.Since(start)}
	if ru, isRU := cmd.ProcessState.SysUsage().(*syscall.Rusage); isRU {
		s.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if !ok(out.Bytes()) {
		return s, fmt.Errorf("%s did not reach every host: %.2000s", filepath.Base(cmd.Path), errb.String())
	}
	return s, nil
}

func median(s []sample) sample {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b sample) int { return int(a.wall - b.wall) })
	m := s[len(s)/2]
	cpus := make([]time.Duration, len(s))
	for i := range s {
		cpus[i] = s[i].cpu
	}
	slices.Sort(cpus)
	m.cpu = cpus[len(cpus)/2]
	return m
}

func walls(s []sample) string {
	var parts []string
	for _, x := range s {
		parts = append(parts, fmt.Sprintf("%.3f", x.wall.Seconds()))
	}
	return strings.Join(parts, " ")
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
