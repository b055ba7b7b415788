package diagnose

import (
	"fmt"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Words of smi-failed.

// smiMeaning is the title and the explanation of one kind of nvidia-smi failure; bus is the
// PCI bus id nvidia-smi named, if any.
func smiMeaning(k parse.SMIFailureKind, bus string) (title, meaning string) {
	switch k {
	case parse.SMIMissing:
		return "nvidia-smi was not found",
			"The probe found no nvidia-smi on PATH or in /usr/bin, /usr/local/bin, /usr/local/nvidia/bin, /opt/nvidia/bin or /usr/lib/wsl/lib, so it could not ask the driver about GPU memory. " +
				"Either this host has no NVIDIA driver installed (is it a GPU host?), or the driver's tools live elsewhere. " +
				"Inside a container, the NVIDIA container toolkit mounts nvidia-smi only when the container was started with GPUs (--gpus, or NVIDIA_DRIVER_CAPABILITIES including utility)."
	case parse.SMINoDriver:
		return "nvidia-smi cannot talk to the NVIDIA driver",
			"The NVIDIA kernel module is not loaded, so no program on this host can use a GPU. " +
				"The usual cause is a kernel upgrade after which the module was not rebuilt for the new kernel (DKMS failed or is not used); " +
				"other causes are an unfinished driver install, or the nouveau driver holding the GPUs. " +
				"Check whether the module is loaded and built for the running kernel, load it, and rebuild it if it is missing; a reboot after rebuilding is the safe path."
	case parse.SMIVersionMismatch:
		return "NVIDIA driver/library version mismatch",
			"The NVIDIA libraries on disk (used by nvidia-smi and every new CUDA program) are a different version from the kernel module still loaded. " +
				"This happens when the driver package is updated (often by unattended upgrades) without a reboot. " +
				"Programs that were already running keep working; every new GPU job fails to start until the loaded module matches the libraries. " +
				"Compare the two versions, then reboot, or stop every GPU user and reload the modules."
	case parse.SMIGPULost:
		gpu := "A GPU"
		if bus != "" {
			gpu = "The GPU at " + bus
		}
		return "a GPU is lost" + onBus(bus),
			gpu + " has fallen off the bus (usually logged as Xid 79): the driver can no longer reach it, and every process that used it is dead or hung. " +
				"Only a reboot (or a power cycle) brings it back. Causes are hardware, power, cooling or PCIe link problems; if it happens again, collect a bug report and have the hardware checked."
	case parse.SMIDeviceHandle:
		return "nvidia-smi cannot open a GPU" + onBus(bus),
			"The driver is loaded but cannot get a handle to a GPU (\"Unable to determine the device handle\"): the GPU is in an error state, typically after an Xid error, " +
				"a failed reset or a GPU that is about to fall off the bus. GPU jobs on it will fail. Look for Xid errors in the kernel log; a reboot is usually needed."
	case parse.SMINoDevices:
		return "nvidia-smi found no GPU",
			"The driver answered but sees no GPU. In a container this means it was started without GPUs (--gpus all, or the Kubernetes nvidia.com/gpu resource). " +
				"On a host it means the GPUs are bound to another driver (vfio-pci for passthrough, nouveau) or failed to initialize (RmInitAdapter failed in the kernel log)."
	case parse.SMITimeout:
		return "nvidia-smi hung and was killed by the probe's timeout",
			"nvidia-smi did not answer within 30 seconds. The driver or a GPU is stuck, often after an Xid error, or a process is stuck inside the driver (state D) and holds a lock. " +
				"New GPU jobs will likely hang too. Look for Xid errors and for processes in state D; if the driver does not recover, reboot."
	}
	return "nvidia-smi failed",
		"nvidia-smi failed in a way gputriage does not recognize; its message is below. Until it works, gputriage cannot tell who holds GPU memory."
}

func onBus(bus string) string {
	if bus == "" {
		return ""
	}
	return " (" + bus + ")"
}

// smiWords composes a smi-failed finding's words: its meaning, and what nvidia-smi said.
func smiWords(f *Finding) {
	fl := f.SMI
	f.Title, f.Explanation = smiMeaning(parse.SMIFailureKind(f.Kind), fl.BusID)
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
	if fl.Path != "" {
		f.Evidence = append(f.Evidence, "nvidia-smi path: "+fl.Path)
	}
	f.Evidence = append(f.Evidence, "kind: "+f.Kind)
	f.Fix = fixWords(f.Actions, 0, nil)
}
