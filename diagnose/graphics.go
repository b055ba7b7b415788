package diagnose

import (
	"path"
	"slices"
	"strings"
)

// Graphics work and CUDA MPS. --query-compute-apps lists compute contexts only: a display
// server, a compositor or a desktop shell holds graphics memory (type G in nvidia-smi's full
// listing, smi-pids) that it never shows. MPS clients (type M+C) run their work inside
// nvidia-cuda-mps-server, which holds memory on their behalf.

// displayPrograms are display servers, compositors, desktop shells and display managers, by
// the kernel's comm (cut at 15 bytes) or the base name of argv[0]; prefixes.
var displayPrograms = []string{
	"Xorg", "X", "Xwayland", "gnome-shell", "gnome-session", "gnome-remote-de", "mutter", "kwin_wayland",
	"kwin_x11", "kwin", "plasmashell", "ksmserver", "gdm", "gdm-", "gdm3", "sddm", "lightdm", "weston",
	"sway", "Hyprland", "cinnamon", "muffin", "xfwm4", "xfce4-session", "marco", "budgie-wm",
	"gamescope", "labwc", "wayfire", "niri", "cosmic-comp", "enlightenment", "openbox", "i3",
}

// exactDisplay are the names above matched exactly, not as prefixes ("X" must not match
// "Xvfb"-like test servers or any program whose name starts with X; "i3" not "i3status").
var exactDisplay = map[string]bool{"X": true, "i3": true, "kwin": true, "gdm": true, "mutter": true, "sway": true, "marco": true}

// displayName reports whether a process of this comm and argv is a display server, a
// compositor, a desktop shell or a display manager.
func displayName(comm string, argv []string) bool {
	names := []string{comm}
	if len(argv) > 0 {
		names = append(names, path.Base(argv[0]))
	}
	for _, n := range names {
		for _, d := range displayPrograms {
			if n == d || !exactDisplay[d] && len(d) > 1 && strings.HasPrefix(n, d) {
				return true
			}
		}
	}
	return false
}

// mpsDaemon reports whether the process is CUDA MPS's control daemon or server
// (nvidia-cuda-mps-control, nvidia-cuda-mps-server: comm "nvidia-cuda-mps").
func mpsDaemon(comm string, argv []string) bool {
	if strings.HasPrefix(comm, "nvidia-cuda-mps") {
		return true
	}
	return len(argv) > 0 && strings.HasPrefix(path.Base(argv[0]), "nvidia-cuda-mps-")
}

// busGPU maps a PCI bus id as nvidia-smi prints it (4- or 8-digit domain, any case) to a
// GPU index.
func (h *host) busGPU(bus string) (int, bool) {
	want := normBus(bus)
	for _, g := range h.s.GPUs {
		if g.BusID != "" && normBus(g.BusID) == want {
			return g.Index, true
		}
	}
	return 0, false
}

func normBus(b string) string {
	b = strings.ToUpper(b)
	if dom, rest, ok := strings.Cut(b, ":"); ok && len(dom) < 8 && strings.Count(b, ":") == 2 {
		b = strings.Repeat("0", 8-len(dom)) + dom + ":" + rest
	}
	return b
}

// joinSMIProcs joins nvidia-smi's full listing (after joinApps and joinHolders): each
// process's type, and the GPUs and memory of those --query-compute-apps leaves out (graphics,
// MPS clients on drivers that list them only here). A row is believed only of a PID the probe
// did not see, or that holds that GPU's device open: a process name holding newlines may
// forge rows (see parse.ParseSMIPIDs), but not another process's open files.
func (h *host) joinSMIProcs() {
	h.smiListed = map[int]bool{}
	for _, sp := range h.s.SMIProcs {
		idx, ok := h.busGPU(sp.BusID)
		if !ok {
			continue
		}
		gp, seen := h.gpByPID[sp.PID]
		p := h.procByPID[sp.PID]
		if p != nil && !p.Gone && h.s.Host.UID != nil && *h.s.Host.UID == 0 && (!seen || !slices.Contains(gp.DeviceGPUs, idx)) {
			continue // the probe saw the process, as root, and it holds no device of that GPU
		}
		gp = h.gpuProcess(sp.PID)
		// Graphics work alone (G): C+G holds a compute context too (a CUDA app that also
		// renders, EGL in a simulator's workers) and is judged as any compute process; a
		// desktop typed C+G (kwin_wayland on some drivers) is still one by its name.
		gp.Graphics = gp.Graphics || sp.Graphics() && !strings.Contains("+"+sp.Type+"+", "+C+")
		gp.MPSClient = gp.MPSClient || sp.MPSClient()
		h.smiListed[idx] = true
		if _, compute := gp.GPUMemoryMiB[idx]; compute || slices.Contains(gp.GPUs, idx) {
			continue // --query-compute-apps already gave its memory there
		}
		gp.GPUs = append(gp.GPUs, idx)
		if sp.UsedMiB != nil {
			if gp.GPUMemoryMiB == nil {
				gp.GPUMemoryMiB = map[int]int64{}
			}
			gp.GPUMemoryMiB[idx] += *sp.UsedMiB
		}
	}
}

// protected reports whether gp is never a culprit, whatever else is judged of it: a display
// server, compositor, desktop shell or display manager (by name), graphics work alone (typed
// G by nvidia-smi, not C+G), or an MPS daemon while it serves live clients. None of them is
// ever put in a fix: stopping them ends a user's desktop or every MPS client's work.
func (h *host) protected(gp *GPUProcess) bool {
	if gp == nil {
		return false
	}
	if gp.Graphics {
		return true
	}
	p := h.procByPID[gp.PID]
	if p == nil {
		return displayName(gp.Name, nil)
	}
	if displayName(p.Comm, p.Argv) {
		return true
	}
	return mpsDaemon(p.Comm, p.Argv) && h.mpsServes(gp)
}

// mpsServes reports whether an MPS daemon serves a live client: a process nvidia-smi types
// M+C that the probe saw alive; when nvidia-smi's full listing is unknown, any other live
// process listed with memory on the daemon's GPUs (or anywhere, for a daemon tied to none).
// The clients are counted once per host (mpsLive), so that thousands of processes named like
// the daemon cost linear time.
func (h *host) mpsServes(daemon *GPUProcess) bool {
	if h.mpsLive == nil {
		h.mpsLive = map[int]int{}
		for i := range h.procs {
			c := &h.procs[i]
			p := h.procByPID[c.PID]
			if !h.alive(c.PID) || p != nil && mpsDaemon(p.Comm, p.Argv) {
				continue
			}
			switch {
			case c.MPSClient:
				h.mpsLive[-1]++
			case !h.s.SMIProcsKnown && c.memMiB() > 0:
				h.mpsLive[-2]++
				for _, g := range c.memGPUs() {
					h.mpsLive[g]++
				}
			}
		}
	}
	if h.mpsLive[-1] > 0 {
		return true
	}
	if len(daemon.GPUs) == 0 {
		return h.mpsLive[-2] > 0
	}
	return slices.ContainsFunc(daemon.GPUs, func(g int) bool { return h.mpsLive[g] > 0 })
}

// alive reports whether the probe saw pid alive: described, and not gone.
func (h *host) alive(pid int) bool {
	p := h.procByPID[pid]
	return p != nil && !p.Gone && !slices.Contains(h.s.AppsGone, pid)
}

// protectedWhy says, for people, why protected(gp) holds.
func (h *host) protectedWhy(gp *GPUProcess) string {
	switch {
	case gp.Graphics:
		return "graphics work, as nvidia-smi types it"
	case h.procByPID[gp.PID] != nil && mpsDaemon(h.procByPID[gp.PID].Comm, h.procByPID[gp.PID].Argv):
		return "the CUDA MPS daemon of live clients"
	}
	return "a display server or desktop session"
}
