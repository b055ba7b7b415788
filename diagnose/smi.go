package diagnose

import (
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// smiAdvice is what one kind of nvidia-smi failure means and what to do about it.
type smiAdvice struct {
	severity Severity
	title    string
	meaning  string
	// inspect are the commands that look, repair those that change the host.
	inspect, repair []Command
}

// cmds turns lines, each "command" or "command  # note", into Commands.
func cmds(lines ...string) []Command {
	out := make([]Command, len(lines))
	for i, l := range lines {
		line, note, _ := strings.Cut(l, "  # ")
		out[i] = Command{Line: line, Note: note}
	}
	return out
}

func (h *host) smiAdvice(k parse.SMIFailureKind, bus string) smiAdvice {
	sudo := h.sudo(nil)
	dmesg := sudo + "dmesg -T | grep -iE 'NVRM|Xid|nvidia'"
	switch k {
	case parse.SMIMissing:
		return smiAdvice{Warning, "nvidia-smi was not found",
			"The probe found no nvidia-smi on PATH or in /usr/bin, /usr/local/bin, /usr/local/nvidia/bin, /opt/nvidia/bin or /usr/lib/wsl/lib, so it could not ask the driver about GPU memory. " +
				"Either this host has no NVIDIA driver installed (is it a GPU host?), or the driver's tools live elsewhere. " +
				"Inside a container, the NVIDIA container toolkit mounts nvidia-smi only when the container was started with GPUs (--gpus, or NVIDIA_DRIVER_CAPABILITIES including utility).",
			cmds("lspci | grep -i nvidia", "ls -l /dev/nvidia*", "cat /proc/driver/nvidia/version"), nil}
	case parse.SMINoDriver:
		return smiAdvice{Critical, "nvidia-smi cannot talk to the NVIDIA driver",
			"The NVIDIA kernel module is not loaded, so no program on this host can use a GPU. " +
				"The usual cause is a kernel upgrade after which the module was not rebuilt for the new kernel (DKMS failed or is not used); " +
				"other causes are an unfinished driver install, or the nouveau driver holding the GPUs. " +
				"Check whether the module is loaded and built for the running kernel, load it, and rebuild it if it is missing; a reboot after rebuilding is the safe path.",
			cmds("lsmod | grep nvidia", "uname -r; dkms status", dmesg),
			cmds(sudo+"modprobe nvidia", sudo+"dkms autoinstall  # rebuild for the running kernel if dkms status shows it missing, then reboot")}
	case parse.SMIVersionMismatch:
		return smiAdvice{Critical, "NVIDIA driver/library version mismatch",
			"The NVIDIA libraries on disk (used by nvidia-smi and every new CUDA program) are a different version from the kernel module still loaded. " +
				"This happens when the driver package is updated (often by unattended upgrades) without a reboot. " +
				"Programs that were already running keep working; every new GPU job fails to start until the loaded module matches the libraries. " +
				"Compare the two versions, then reboot, or stop every GPU user and reload the modules.",
			cmds("cat /proc/driver/nvidia/version  # the loaded kernel module",
				"ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.* /usr/lib64/libnvidia-ml.so.* 2>/dev/null  # the libraries"),
			cmds(sudo+"reboot",
				sudo+"fuser -v /dev/nvidia*  # without a reboot: nothing may hold the GPUs, then:",
				sudo+"systemctl stop nvidia-persistenced; "+sudo+"rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && "+sudo+"modprobe nvidia")}
	case parse.SMIGPULost:
		gpu := "A GPU"
		if bus != "" {
			gpu = "The GPU at " + bus
		}
		return smiAdvice{Critical, "a GPU is lost" + onBus(bus),
			gpu + " has fallen off the bus (usually logged as Xid 79): the driver can no longer reach it, and every process that used it is dead or hung. " +
				"Only a reboot (or a power cycle) brings it back. Causes are hardware, power, cooling or PCIe link problems; if it happens again, collect a bug report and have the hardware checked.",
			cmds(dmesg), cmds(sudo+"reboot", sudo+"nvidia-bug-report.sh  # if it recurs, after the reboot")}
	case parse.SMIDeviceHandle:
		return smiAdvice{Critical, "nvidia-smi cannot open a GPU" + onBus(bus),
			"The driver is loaded but cannot get a handle to a GPU (\"Unable to determine the device handle\"): the GPU is in an error state, typically after an Xid error, " +
				"a failed reset or a GPU that is about to fall off the bus. GPU jobs on it will fail. Look for Xid errors in the kernel log; a reboot is usually needed.",
			cmds(dmesg), cmds(sudo + "reboot")}
	case parse.SMINoDevices:
		return smiAdvice{Warning, "nvidia-smi found no GPU",
			"The driver answered but sees no GPU. In a container this means it was started without GPUs (--gpus all, or the Kubernetes nvidia.com/gpu resource). " +
				"On a host it means the GPUs are bound to another driver (vfio-pci for passthrough, nouveau) or failed to initialize (RmInitAdapter failed in the kernel log).",
			cmds("lspci -nnk | grep -iA3 nvidia  # which kernel driver each GPU is bound to", dmesg), nil}
	case parse.SMITimeout:
		return smiAdvice{Error, "nvidia-smi hung and was killed by the probe's timeout",
			"nvidia-smi did not answer within 30 seconds. The driver or a GPU is stuck, often after an Xid error, or a process is stuck inside the driver (state D) and holds a lock. " +
				"New GPU jobs will likely hang too. Look for Xid errors and for processes in state D; if the driver does not recover, reboot.",
			cmds(dmesg, "ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'", "systemctl status nvidia-persistenced"),
			cmds(sudo + "reboot  # if the driver stays stuck")}
	}
	return smiAdvice{Error, "nvidia-smi failed",
		"nvidia-smi failed in a way gputriage does not recognize; its message is below. Until it works, gputriage cannot tell who holds GPU memory.",
		cmds("nvidia-smi", dmesg), nil}
}

func onBus(bus string) string {
	if bus == "" {
		return ""
	}
	return " (" + bus + ")"
}

// smiFinding reports a failed nvidia-smi query.
func (h *host) smiFinding() (Finding, bool) {
	fl := h.s.SMI.Failure
	if fl == nil {
		return Finding{}, false
	}
	kind := fl.Kind
	if kind == "" {
		kind = parse.SMIOther
	}
	a := h.smiAdvice(kind, fl.BusID)
	f := Finding{
		Code:        CodeSMIFailed,
		Severity:    a.severity,
		Kind:        string(kind),
		Title:       a.title,
		Explanation: a.meaning,
	}
	// The driver is the target of both: one finding per host names it.
	f.Actions = append(f.Actions, Action{Kind: ActionInspect, Target: "nvidia driver", Steps: a.inspect})
	if len(a.repair) > 0 {
		f.Actions = append(f.Actions, Action{Kind: ActionDriver, Target: "nvidia driver", Steps: a.repair})
	}
	f.Fix = fixWords(f.Actions, 0, nil)
	for _, l := range strings.Split(strings.TrimSpace(fl.Message), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			f.Evidence = append(f.Evidence, "nvidia-smi: "+l)
		}
	}
	if fl.ExitCode != nil {
		f.Evidence = append(f.Evidence, fmt.Sprintf("exit status %d", *fl.ExitCode))
	}
	if fl.BusID != "" {
		f.Evidence = append(f.Evidence, "PCI bus id: "+fl.BusID)
	}
	if p := h.s.Host.NvidiaSMIPath; p != "" {
		f.Evidence = append(f.Evidence, "nvidia-smi path: "+p)
		f.Files = []string{p}
	}
	f.Evidence = append(f.Evidence, "kind: "+string(kind))
	return f, true
}
