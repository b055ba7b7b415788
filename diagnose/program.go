package diagnose

import (
	"path"
	"strings"
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

// setPrograms fills Program and Engine of every GPU process, and for a multiprocessing
// worker whose parent the probe captured, the parent's command line, program and engine.
func (h *host) setPrograms() {
	for i := range h.procs {
		gp := &h.procs[i]
		gp.Program, gp.Engine = programOf(gp.Argv, gp.Name)
		if gp.Program != workerProgram || gp.PPID == nil {
			continue
		}
		if parent := h.procByPID[*gp.PPID]; parent != nil && len(parent.Argv) > 0 {
			gp.ParentArgv = parent.Argv
			gp.Program, gp.Engine = programOf(parent.Argv, parent.Comm)
			if gp.Program == workerProgram {
				continue
			}
			gp.Program = clip(gp.Program + " worker")
		}
	}
}
