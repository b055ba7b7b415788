// Command mkfixtures records the scenario captures in fixtures/ by running the real probe on
// this machine against real processes and /dev/shm files, with a fake nvidia-smi serving the
// GPU numbers of each scenario. Run as root on Linux from the repository root, on a clean
// machine state (fixtures/README.md: under the test lock, in a PID namespace and with an empty
// /dev/shm of its own; it refuses a /dev/shm that holds anything):
//
//	mkfixtures [-only NAME]
//	go run ./probe/mkfixtures -age-only [-only NAME]
//
// A recording runs its processes for a moment only, so each capture is aged: its host clock
// (time= and uptime=) is moved to the fixture's age after its youngest process started, as if
// the probe had run then. -age-only ages the recorded captures in place (idempotent).
//
// See fixtures/README.md for what each scenario is and where its numbers come from.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

type fixture struct {
	name     string
	hostname string
	// age is how long the youngest captured process had run when the (aged) probe ran.
	age   time.Duration
	build func() (scenario.SMI, func(), error)
}

func main() {
	only := flag.String("only", "", "record only this fixture")
	out := flag.String("dir", "fixtures", "directory to write NAME.capture files into")
	ageOnly := flag.Bool("age-only", false, "age the recorded captures in DIR instead of recording")
	flag.Parse()
	for _, f := range fixtures {
		if *only != "" && f.name != *only {
			continue
		}
		do := record
		if *ageOnly {
			do = ageFile
		}
		if err := do(f, *out); err != nil {
			fmt.Fprintf(os.Stderr, "mkfixtures: %s: %v\n", f.name, err)
			os.Exit(1)
		}
		fmt.Printf("wrote %s\n", filepath.Join(*out, f.name+".capture"))
	}
}

func record(f fixture, dir string) error {
	if err := cleanShm(); err != nil {
		return err
	}
	smi, stop, err := f.build()
	if err != nil {
		return err
	}
	defer stop()
	smiDir, err := os.MkdirTemp("", "gputriage-smi-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(smiDir)
	if err := scenario.WriteFakeSMI(smiDir, smi); err != nil {
		return err
	}
	raw, err := scenario.RunProbe(probe.Script, smiDir, f.hostname, nonce())
	if err != nil {
		return err
	}
	if raw, err = ageCapture(raw, f.age); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, f.name+".capture"), raw, 0o644)
}

// cleanShm refuses to record on a machine whose /dev/shm holds anything: a fixture carries
// what the probe sees there, and only what its scenario staged belongs in it (run under the
// test lock, so that no test's files are there meanwhile).
func cleanShm() error {
	ents, err := os.ReadDir("/dev/shm")
	if err != nil {
		return err
	}
	if len(ents) > 0 {
		return fmt.Errorf("/dev/shm is not empty (%s...): record on a clean machine, under flock /tmp/gputriage-live.lock", ents[0].Name())
	}
	return nil
}

func ageFile(f fixture, dir string) error {
	path := filepath.Join(dir, f.name+".capture")
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if raw, err = ageCapture(raw, f.age); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// ageCapture moves the host clock of a capture (its time= and uptime= lines; btime stays) to
// age after the start of its youngest process, rounded up to the second. A capture without
// processes, or an age of 0, is returned as it is.
func ageCapture(raw []byte, age time.Duration) ([]byte, error) {
	if age == 0 {
		return raw, nil
	}
	snap, err := parse.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	var youngest time.Time
	for _, p := range snap.Processes {
		if p.StartTime != nil && p.StartTime.After(youngest) {
			youngest = *p.StartTime
		}
	}
	if youngest.IsZero() {
		return raw, nil
	}
	if snap.Host.Time == nil || snap.Host.UptimeSeconds == nil {
		return nil, fmt.Errorf("age: the capture has no time= or uptime=")
	}
	probe := youngest.Add(age).Truncate(time.Second)
	if probe.Before(youngest.Add(age)) {
		probe = probe.Add(time.Second)
	}
	boot := snap.Host.Time.Add(-time.Duration(*snap.Host.UptimeSeconds * float64(time.Second)))
	uptime := math.Round(probe.Sub(boot).Seconds()*100) / 100
	for _, kv := range [][2]string{{"time=", strconv.FormatInt(probe.Unix(), 10)}, {"uptime=", strconv.FormatFloat(uptime, 'f', 2, 64)}} {
		if raw, err = replaceLine(raw, kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	return raw, nil
}

// replaceLine replaces the value of the one line starting with key (in the host section: the
// first such line of the capture).
func replaceLine(raw []byte, key, value string) ([]byte, error) {
	i := bytes.Index(raw, []byte("\n"+key))
	if i < 0 {
		return nil, fmt.Errorf("age: no %s line", key)
	}
	start := i + 1 + len(key)
	end := bytes.IndexByte(raw[start:], '\n')
	if end < 0 {
		return nil, fmt.Errorf("age: %s line not ended", key)
	}
	out := append([]byte{}, raw[:start]...)
	out = append(out, value...)
	return append(out, raw[start+end:]...), nil
}

func nonce() string {
	b := make([]byte, 16)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if _, err := f.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b)
}

func gpus(n int, name, driver string, total, reserved int64, busFmt string) []scenario.GPU {
	out := make([]scenario.GPU, n)
	for i := range out {
		out[i] = scenario.GPU{Index: i, UUID: fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", 0x1a2b3c00+i, 0x1000+i, 0x2000+i, 0x3000+i, 0x4000+i),
			Name: name, BusID: fmt.Sprintf(busFmt, 0x18+i*0x10), TotalMiB: total, ReservedMiB: reserved, Driver: driver}
	}
	return out
}

func noStop() {}

var fixtures = []fixture{
	{name: "ct200", hostname: "ct200", age: 2*time.Hour + 13*time.Minute, build: func() (scenario.SMI, func(), error) {
		// The incident: a leftover SGLang server of the previous deployment, PID 20629, still
		// holds 55,286 MiB on GPU 0 and maps its weights in /dev/shm, which were rm -rf'd.
		p, err := scenario.Start(scenario.Server{
			Module: "sglang.launch_server",
			Python: "/usr/bin/python3",
			Args: []string{"--model-path", "/dev/shm/Qwen3.6-27B", "--served-model-name", "Qwen3.6-27B",
				"--host", "0.0.0.0", "--port", "30000", "--mem-fraction-static", "0.55"},
			ShmDir: "/dev/shm/Qwen3.6-27B", ShmFiles: 12, ShmBytes: 4 << 20, Delete: true,
			Orphan: true, WantPID: 20629,
		})
		if err != nil {
			return scenario.SMI{}, nil, err
		}
		if p.PID != 20629 {
			p.Stop()
			return scenario.SMI{}, nil, fmt.Errorf("got PID %d, not 20629 (is 20629 taken? run again)", p.PID)
		}
		g := gpus(8, "NVIDIA RTX PRO 6000 Blackwell Server Edition", "580.95.05", 97887, 635, "00000000:%02X:00.0")
		g[0].UUID = "GPU-6793b112-91ac-b02e-b2b2-a7e4143a878b"
		g[0].UsedMiB, g[0].FreeMiB, g[0].UtilPct = 55295, 41958, 0
		for i := 1; i < 8; i++ {
			g[i].FreeMiB = 97252
		}
		return scenario.SMI{GPUs: g, Apps: []scenario.App{{PID: p.PID, GPUUUID: g[0].UUID, UsedMiB: 55286, Name: "/usr/bin/python3"}}}, p.Stop, nil
	}},
	{name: "clean", hostname: "h200-07", build: func() (scenario.SMI, func(), error) {
		return scenario.SMI{GPUs: gpus(8, "NVIDIA H200", "590.48.01", 143771, 568, "00000000:%02X:00.0")}, noStop, nil
	}},
	{name: "ghost", hostname: "a100-03", build: func() (scenario.SMI, func(), error) {
		// 30 GiB used on GPU 2 and no process anywhere: its owner lives in a PID namespace the
		// host cannot see into (a container), or the memory is the driver's.
		g := gpus(4, "NVIDIA A100-SXM4-80GB", "550.90.07", 81920, 465, "00000000:%02X:00.0")
		g[2].UsedMiB, g[2].UtilPct = 30720, 0
		for i := range g {
			if g[i].UsedMiB == 0 {
				g[i].UsedMiB = 4
			}
			g[i].FreeMiB = 81920 - 465 - g[i].UsedMiB
		}
		return scenario.SMI{GPUs: g}, noStop, nil
	}},
	{name: "driver-mismatch", hostname: "l40s-11", build: func() (scenario.SMI, func(), error) {
		return scenario.SMI{FailText: "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.172\n", FailRC: 18}, noStop, nil
	}},
	{name: "busy", hostname: "h100-02", age: 5*time.Hour + 2*time.Minute, build: func() (scenario.SMI, func(), error) {
		// A healthy tensor-parallel 8 vLLM job: "vllm serve MODEL" (a console script, as pip
		// installs it) and eight spawned workers, one per GPU. The launcher is asked for PID
		// 20973 (best effort: a thread of the Go runtime may take it first; the recorded busy
		// got 20974).
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte("20972"), 0o644); err != nil {
			return scenario.SMI{}, nil, err
		}
		p, err := scenario.Start(scenario.Server{
			Module: "vllm.entrypoints.cli.main",
			Script: "vllm",
			Python: "/usr/bin/python3",
			Args: []string{"serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "8",
				"--gpu-memory-utilization", "0.9", "--port", "8000"},
			Children: 8,
		})
		if err != nil {
			return scenario.SMI{}, nil, err
		}
		stop := p.Stop
		var kids []int
		for i := 0; i < 250 && len(kids) < 8; i++ { // spawned workers exec a moment after start
			time.Sleep(20 * time.Millisecond)
			kids = scenario.WorkerPIDs(p.PID)
		}
		if len(kids) != 8 {
			stop()
			return scenario.SMI{}, nil, fmt.Errorf("want 8 workers, got %v", kids)
		}
		g := gpus(8, "NVIDIA H100 80GB HBM3", "550.90.07", 81559, 532, "00000000:%02X:00.0")
		var apps []scenario.App
		for i := range g {
			g[i].UsedMiB, g[i].UtilPct = 73404+int64(i%2)*2, 97
			g[i].FreeMiB = 81559 - 532 - g[i].UsedMiB
			apps = append(apps, scenario.App{PID: kids[i], GPUUUID: g[i].UUID, UsedMiB: 73394 + int64(i%2)*2, Name: "/usr/bin/python3"})
		}
		return scenario.SMI{GPUs: g, Apps: apps}, stop, nil
	}},
}
