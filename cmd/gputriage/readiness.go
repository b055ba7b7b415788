package main

import (
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/gputriage/gputriage/readiness"
)

// readyOptions are the flags of "will my deployment start?" (--tp).
type readyOptions struct {
	tp              int
	engines         []string
	utilization     float64
	need            string
	contextOverhead string
}

func (o *readyOptions) addFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.tp, "tp", 0, "check whether a tensor-parallel job of `N` GPUs per host would start, and on which GPUs")
	fs.StringSliceVar(&o.engines, "engine", nil, "`ENGINES` whose startup check --tp applies: sglang, vllm (default both)")
	fs.Float64Var(&o.utilization, "gpu-memory-utilization", readiness.DefaultGPUMemoryUtilization, "vLLM's --gpu-memory-utilization `FRACTION`, for --tp")
	fs.StringVar(&o.need, "need", "", "memory each GPU must have free for --tp: a `SIZE` such as 80GiB or 70000MiB")
	fs.StringVar(&o.contextOverhead, "context-overhead", strconv.FormatInt(readiness.DefaultContextOverheadMiB, 10)+"MiB",
		"memory (`SIZE`) each rank's CUDA context takes before the engines check, for --tp")
}

// job validates the flags; nil when --tp was not given.
func (o *readyOptions) job(fs *pflag.FlagSet) (*readiness.Job, error) {
	if o.tp == 0 {
		for _, n := range []string{"engine", "gpu-memory-utilization", "need", "context-overhead"} {
			if fs.Changed(n) {
				return nil, usagef("--%s goes with --tp", n)
			}
		}
		return nil, nil
	}
	if o.tp < 1 || o.tp > 1024 {
		return nil, usagef("--tp must be between 1 and 1024, got %d", o.tp)
	}
	j := &readiness.Job{TP: o.tp, GPUMemoryUtilization: o.utilization}
	for _, e := range o.engines {
		e = strings.ToLower(strings.TrimSpace(e))
		if !readiness.IsEngine(e) {
			return nil, usagef("--engine must be sglang or vllm, got %q", e)
		}
		j.Engines = append(j.Engines, e)
	}
	if o.utilization <= 0 || o.utilization > 1 {
		return nil, usagef("--gpu-memory-utilization must be in (0, 1], got %g", o.utilization)
	}
	if o.need != "" {
		n, err := parseMiB(o.need)
		if err != nil {
			return nil, usagef("--need: %v", err)
		}
		j.NeedMiB = &n
	}
	c, err := parseMiB(o.contextOverhead)
	if err != nil {
		return nil, usagef("--context-overhead: %v", err)
	}
	j.ContextOverheadMiB = c
	return j, nil
}

// parseMiB reads a size such as 80GiB, 80G, 81920MiB, 81920M or 0.5TiB, in MiB. A bare
// number is MiB, as nvidia-smi counts.
func parseMiB(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mib    float64
	}{{"TiB", 1 << 20}, {"GiB", 1 << 10}, {"MiB", 1}, {"TB", 1e12 / (1 << 20)}, {"GB", 1e9 / (1 << 20)}, {"MB", 1e6 / (1 << 20)},
		{"T", 1 << 20}, {"G", 1 << 10}, {"M", 1}}
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(strings.ToUpper(t), strings.ToUpper(u.suffix)) && (len(u.suffix) > 1 || !strings.HasSuffix(strings.ToUpper(t), "B")) {
			t, mult = strings.TrimSpace(t[:len(t)-len(u.suffix)]), u.mib
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || v*mult > 1<<40 {
		return 0, usagef("bad size %q (want e.g. 80GiB or 70000MiB)", s)
	}
	return int64(v*mult + 0.5), nil
}
