package probe

import (
	"os"
	"path/filepath"
)

// SMIDirs are where the probe looks for nvidia-smi when PATH lacks it, in its order.
var SMIDirs = []string{"/usr/bin", "/usr/local/bin", "/usr/local/nvidia/bin", "/opt/nvidia/bin", "/usr/lib/wsl/lib"}

// FindSMI finds nvidia-smi on this machine as the probe does: on PATH (with the directories
// it adds), else in the driver's usual directories; "" when there is none.
func FindSMI() string {
	for _, dir := range append(filepath.SplitList(os.Getenv("PATH")), "/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin") {
		if dir == "" {
			continue
		}
		if p := filepath.Join(dir, "nvidia-smi"); isExecutable(p) {
			return p
		}
	}
	for _, dir := range SMIDirs {
		if p := filepath.Join(dir, "nvidia-smi"); isExecutable(p) {
			return p
		}
	}
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}

// NoDriver says why this machine has no NVIDIA GPU or driver to triage: no nvidia-smi where
// the probe looks, no /dev/nvidia* device, no /proc/driver/nvidia. It is "" when any of
// them is there: a driver that is there but broken is the probe's to report (smi-failed).
func NoDriver() string {
	if FindSMI() != "" {
		return ""
	}
	if devs, _ := filepath.Glob("/dev/nvidia*"); len(devs) > 0 {
		return ""
	}
	if _, err := os.Lstat("/proc/driver/nvidia"); err == nil {
		return ""
	}
	return "no NVIDIA GPU or driver on this machine (no nvidia-smi on PATH or in the driver's directories, no /dev/nvidia*, no /proc/driver/nvidia)"
}
