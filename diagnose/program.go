package diagnose

import (
	"path"
	"slices"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// The engines GPUProcess.Engine names (display names; readiness's --engine values differ).
// A process is tied to one by its command line alone.
const (
	engSGLang   = "SGLang"
	engVLLM     = "vLLM"
	engTGI      = "TGI"
	engTriton   = "Triton"
	engRay      = "Ray"
	engTorchrun = "torchrun"
	engJAX      = "JAX"
)

// maxProgram bounds a derived program name: it comes from a host's argv.
const maxProgram = 64

// workerProgram names a multiprocessing spawn/forkserver child whose parent the capture lacks.
const workerProgram = "multiprocessing worker"

// programOf derives from a command line what runs, not the interpreter that runs it
// ("sglang.launch_server", "vllm serve", "torchrun train.py", "ray::RayWorker"), and the
// known engine it belongs to, or "". With no argv (a kernel thread, a process that exited
// or hid it) it falls back to comm and names no engine. The result is raw host text: the
// report sanitizes it like any other.
func programOf(argv []string, comm string) (program, engine string) {
	if len(argv) == 0 {
		return clip(comm), ""
	}
	// A process title set by setproctitle ("ray::IDLE", "sglang::scheduler_TP0",
	// "VLLM::EngineCore") replaces the whole command line.
	if before, _, ok := strings.Cut(argv[0], "::"); ok && !strings.Contains(before, "/") {
		title := strings.TrimSpace(strings.Join(argv, " "))
		return clip(title), engineOf(before)
	}
	base := path.Base(argv[0])
	if isPython(base) {
		return pythonProgram(argv[1:])
	}
	return commandProgram(base, argv[1:])
}

// pythonProgram reads a Python interpreter's arguments: the module of -m, the script, or a
// multiprocessing child.
func pythonProgram(args []string) (program, engine string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args):
			return moduleProgram(args[i+1], args[i+2:])
		case strings.HasPrefix(a, "-m") && len(a) > 2 && a[2] != '-':
			return moduleProgram(a[2:], args[i+1:])
		case a == "-c":
			if i+1 < len(args) && strings.Contains(args[i+1], "multiprocessing") {
				return workerProgram, ""
			}
			return "python -c", ""
		case a == "-W" || a == "-X":
			i++ // the option's value
		case a == "-" || a == "--":
			if a == "--" && i+1 < len(args) {
				return commandProgram(path.Base(args[i+1]), args[i+2:])
			}
			return "python", ""
		case strings.HasPrefix(a, "-"):
			// -B, -u, -O, -Bu, -Wignore, -Xfaulthandler: flags without a separate value.
		default:
			// A script: /usr/local/bin/vllm is vLLM's entry point run by its interpreter.
			return commandProgram(path.Base(a), args[i+1:])
		}
	}
	return "python", ""
}

// moduleProgram names `python -m MOD ARGS`: torch.distributed.run is torchrun.
func moduleProgram(mod string, args []string) (program, engine string) {
	switch mod {
	case "torch.distributed.run", "torch.distributed.launch":
		return torchrunProgram(args)
	case "vllm.entrypoints.cli.main":
		return commandProgram("vllm", args)
	}
	if strings.HasPrefix(mod, "multiprocessing.") {
		return workerProgram, "" // a forkserver or other helper: its parent says what runs
	}
	return clip(mod), engineOf(mod)
}

// commandProgram names an executable run with args: engine CLIs keep their subcommand
// ("vllm serve"), torchrun its script.
func commandProgram(base string, args []string) (program, engine string) {
	switch base {
	case "torchrun":
		return torchrunProgram(args)
	case "vllm", "sglang", "ray":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			return clip(base + " " + args[0]), engineOf(base)
		}
	}
	return clip(base), engineOf(base)
}

// torchrunProgram is "torchrun SCRIPT" (or "torchrun -m MOD"): torchrun's own options are
// --key=value or --key value, so the script is the first argument ending in .py, or the
// module after -m.
func torchrunProgram(args []string) (program, engine string) {
	for i, a := range args {
		if (a == "-m" || a == "--module") && i+1 < len(args) {
			return clip("torchrun -m " + args[i+1]), engTorchrun
		}
		if strings.HasSuffix(a, ".py") && !strings.HasPrefix(a, "-") {
			return clip("torchrun " + path.Base(a)), engTorchrun
		}
	}
	return "torchrun", engTorchrun
}

// engineOf maps a module, executable or process-title prefix to the engine it belongs to.
func engineOf(name string) string {
	n := strings.ToLower(name)
	first, _, _ := strings.Cut(n, ".")
	switch {
	case first == "sglang":
		return engSGLang
	case first == "vllm":
		return engVLLM
	case first == "text_generation_server", n == "text-generation-launcher",
		n == "text-generation-server", n == "text-generation-router":
		return engTGI
	case n == "tritonserver", first == "tritonserver":
		return engTriton
	case first == "ray", n == "raylet", n == "gcs_server":
		return engRay
	case n == "torchrun", n == "torch.distributed.run":
		return engTorchrun
	case first == "jax":
		return engJAX
	}
	return ""
}

// isPython matches python, python3, python3.12, pypy3 and the like.
func isPython(base string) bool {
	for _, p := range []string{"python", "pypy"} {
		if rest, ok := strings.CutPrefix(base, p); ok {
			return strings.Trim(rest, "0123456789.") == ""
		}
	}
	return false
}

func clip(s string) string {
	if len(s) <= maxProgram {
		return s
	}
	// Cut at a rune boundary: the report checks UTF-8 anyway, but a cut rune would show.
	cut := maxProgram
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// setPrograms fills Program and Engine of every GPU process. A worker (a multiprocessing
// spawn or forkserver child, or a fork that kept its parent's command line) whose parent the
// probe captured carries the parent's command line and is named after what launched it: the
// nearest captured ancestor that is not itself a multiprocessing child ("vllm serve worker").
// The probe describes parents one level up, so a worker's grandparent is known only when its
// parent is described in its own right (it holds a GPU or a deleted /dev/shm file).
func (h *host) setPrograms() {
	byLauncher := map[int][]*GPUProcess{}
	for i := range h.procs {
		gp := &h.procs[i]
		gp.Program, gp.Engine = programOf(gp.Argv, gp.Name)
		if _, gone := h.orphanedWorker(gp); gone {
			gp.LauncherGone = true // its parent is what adopted it, not what runs
			continue
		}
		parent := h.parentOf(h.procByPID[gp.PID])
		titled := gp.Program != workerProgram && childKind(gp.Argv) != ""
		if parent == nil || (gp.Program != workerProgram && !titled && !slices.Equal(gp.Argv, parent.Argv)) {
			continue
		}
		gp.ParentArgv = parent.Argv
		if lp, program, engine, ok := h.launcher(parent); ok {
			if !titled {
				gp.Program, gp.Engine = clip(program+" worker"), engine
			}
			gp.Launcher, gp.LauncherPID = launcherText(program, lp.Argv), lp.PID
			byLauncher[lp.PID] = append(byLauncher[lp.PID], gp)
		}
	}
	for _, ws := range byLauncher {
		for i, gp := range ws { // h.procs is sorted by PID
			gp.WorkerIndex, gp.Workers = i, len(ws)
		}
	}
}

// launcherText names a launcher by its program and the model it serves, when its command
// line names one: "vllm serve meta-llama/Llama-3.1-8B", "sglang.launch_server Qwen/Qwen3-8B".
// The model is the host's text, a display value only: it is named only when it reads as a
// model name or path (modelName), so that no argument can write words of its own ("(PID 1),
// worker 0 of 8") into the name.
func launcherText(program string, argv []string) string {
	if m := modelOf(argv); modelName(m) && !strings.Contains(program, m) {
		return clip(program + " " + m)
	}
	return program
}

// modelName reports whether m reads as a model name or path: a Hugging Face id
// ("meta-llama/Llama-3.1-8B"), a directory, at most 128 bytes of letters, digits and ._-/:@+
// (no space, quote, parenthesis or control character).
func modelName(m string) bool {
	if m == "" || len(m) > 128 {
		return false
	}
	for _, c := range []byte(m) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-/:@+", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// modelOf is the model a command line names: the value of --model, --model-path or
// --model-name-or-path, or the positional argument after "serve".
func modelOf(argv []string) string {
	for i, a := range argv {
		for _, f := range []string{"--model", "--model-path", "--model_path", "--model-name-or-path"} {
			if v, ok := strings.CutPrefix(a, f+"="); ok {
				return v
			}
			if a == f && i+1 < len(argv) {
				return argv[i+1]
			}
		}
		if a == "serve" && i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
			return argv[i+1]
		}
	}
	return ""
}

// parentOf is p's parent when the probe described it with a command line and it is p's
// parent indeed: one that started after p holds a PID reused since p's parent exited.
func (h *host) parentOf(p *parse.Process) *parse.Process {
	if p == nil || p.PPID == nil || *p.PPID == p.PID {
		return nil
	}
	parent := h.procByPID[*p.PPID]
	if parent == nil || len(parent.Argv) == 0 {
		return nil
	}
	if parent.StartTime != nil && p.StartTime != nil && parent.StartTime.After(*p.StartTime) {
		return nil
	}
	return parent
}

// launcher is what started the workers of p, with its program: p, or when p is a worker
// itself (a forkserver, a spawned engine core, VLLM::EngineCore), its nearest captured
// ancestor that is not.
func (h *host) launcher(p *parse.Process) (lp *parse.Process, program, engine string, ok bool) {
	for steps := 0; p != nil && steps < maxAncestry; steps++ {
		if childKind(p.Argv) == "" {
			program, engine = programOf(p.Argv, p.Comm)
			return p, program, engine, true
		}
		p = h.parentOf(p)
	}
	return nil, "", "", false
}
