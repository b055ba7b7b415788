package diagnose

import (
	"github.com/gputriage/gputriage/parse"
)

// smiSeverity is how bad each kind of nvidia-smi failure is: critical when no GPU job can
// start (no driver, a mismatch, a lost or broken GPU).
var smiSeverity = map[parse.SMIFailureKind]Severity{
	parse.SMIMissing:         Warning,
	parse.SMINoDriver:        Critical,
	parse.SMIVersionMismatch: Critical,
	parse.SMIGPULost:         Critical,
	parse.SMIDeviceHandle:    Critical,
	parse.SMINoDevices:       Warning,
	parse.SMITimeout:         Error,
}

// smiCommands are, per kind of failure, the commands that look (inspect) and those that
// change the host (repair).
func (h *host) smiCommands(k parse.SMIFailureKind) (inspect, repair []Command) {
	sudo := h.sudo(nil)
	dmesg := Command{Line: sudo + "dmesg -T | grep -iE 'NVRM|Xid|nvidia'"}
	reboot := Command{Line: sudo + "reboot"}
	switch k {
	case parse.SMIMissing:
		return []Command{{Line: "lspci | grep -i nvidia"}, {Line: "ls -l /dev/nvidia*"}, {Line: "cat /proc/driver/nvidia/version"}}, nil
	case parse.SMINoDriver:
		return []Command{{Line: "lsmod | grep nvidia"}, {Line: "uname -r; dkms status"}, dmesg},
			[]Command{{Line: sudo + "modprobe nvidia"},
				{Line: sudo + "dkms autoinstall", Note: "rebuild for the running kernel if dkms status shows it missing, then reboot"}}
	case parse.SMIVersionMismatch:
		return []Command{{Line: "cat /proc/driver/nvidia/version", Note: "the loaded kernel module"},
				{Line: "ls /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.* /usr/lib64/libnvidia-ml.so.* 2>/dev/null", Note: "the libraries"}},
			[]Command{reboot,
				{Line: sudo + "fuser -v /dev/nvidia*", Note: "without a reboot: nothing may hold the GPUs, then:"},
				{Line: sudo + "systemctl stop nvidia-persistenced; " + sudo + "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && " + sudo + "modprobe nvidia"}}
	case parse.SMIGPULost:
		return []Command{dmesg}, []Command{reboot, {Line: sudo + "nvidia-bug-report.sh", Note: "if it recurs, after the reboot"}}
	case parse.SMIDeviceHandle:
		return []Command{dmesg}, []Command{reboot}
	case parse.SMINoDevices:
		return []Command{{Line: "lspci -nnk | grep -iA3 nvidia", Note: "which kernel driver each GPU is bound to"}, dmesg}, nil
	case parse.SMITimeout:
		return []Command{dmesg, {Line: "ps -eo pid,stat,wchan:32,cmd | awk '$2 ~ /D/'"}, {Line: "systemctl status nvidia-persistenced"}},
			[]Command{{Line: sudo + "reboot", Note: "if the driver stays stuck"}}
	}
	return []Command{{Line: "nvidia-smi"}, dmesg}, nil
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
	f := Finding{Code: CodeSMIFailed, Severity: Error, Kind: string(kind)}
	if sev, ok := smiSeverity[kind]; ok {
		f.Severity = sev
	}
	// The driver is the target of both: one finding per host names it.
	inspect, repair := h.smiCommands(kind)
	f.Actions = append(f.Actions, Action{Kind: ActionInspect, Target: "nvidia driver", Steps: inspect})
	if len(repair) > 0 {
		f.Actions = append(f.Actions, Action{Kind: ActionDriver, Target: "nvidia driver", Steps: repair})
	}
	if p := h.s.Host.NvidiaSMIPath; p != "" {
		f.Files = []string{p}
	}
	f.SMI = &SMIFailure{Message: fl.Message, ExitCode: fl.ExitCode, BusID: fl.BusID, Path: h.s.Host.NvidiaSMIPath}
	smiWords(&f)
	return f, true
}
