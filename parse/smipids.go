package parse

import (
	"io"
	"strconv"
	"strings"
)

// SMIProcess is one process of nvidia-smi's full process listing (nvidia-smi -q -d PIDS):
// every kind the driver knows, graphics and MPS clients included, which
// --query-compute-apps leaves out.
type SMIProcess struct {
	PID int
	// BusID is the PCI bus id of the GPU the listing names it under, as nvidia-smi prints
	// it ("00000000:01:00.0").
	BusID string
	// Type is nvidia-smi's type: "C" compute, "G" graphics, "C+G" both, "M+C" an MPS client,
	// and whatever else a driver prints (a short run of upper-case letters and '+').
	Type string
	// UsedMiB is nil when nvidia-smi did not say (N/A, "Not available in WDDM driver model",
	// insufficient permissions).
	UsedMiB *int64
	// GPUInstance and ComputeInstance are the MIG ids; nil when N/A.
	GPUInstance, ComputeInstance *int
}

// Graphics reports whether nvidia-smi typed the process as graphics work (G, C+G, M+G, ...).
func (p SMIProcess) Graphics() bool { return typeHas(p.Type, "G") }

// MPSClient reports whether nvidia-smi typed the process as a CUDA MPS client (M+C, ...).
func (p SMIProcess) MPSClient() bool { return typeHas(p.Type, "M") }

func typeHas(t, part string) bool {
	for _, x := range strings.Split(t, "+") {
		if x == part {
			return true
		}
	}
	return false
}

// maxSMIPIDsLine bounds one line of the listing, a longer one is skipped; maxSMIPIDsBytes
// bounds what is read at all (the section's own bound).
const (
	maxSMIPIDsLine  = 4096
	maxSMIPIDsBytes = 1 << 20
)

// ParseSMIPIDs reads nvidia-smi -q (or -q -d PIDS) text: the processes under each GPU's
// "Processes" heading. Only the labelled fields it knows are read; "Name" is never read (it
// is the process's own text). A block is kept only with a Process ID and a Type, each GPU
// heading and each field given once: a block with a field given twice is dropped whole, and
// so is every block of a PID listed twice on one GPU, since a process name holding a
// newline could forge lines. Other sections of a full -q report are skipped.
func ParseSMIPIDs(r io.Reader) []SMIProcess {
	raw, _ := io.ReadAll(io.LimitReader(r, maxSMIPIDsBytes))
	var out []SMIProcess
	var cur *smiBlock
	bus, inProcs := "", false
	flush := func() {
		if cur != nil && cur.ok() {
			out = append(out, cur.p)
		}
		cur = nil
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimRight(line, "\r \t")
		if line == "" || len(line) > maxSMIPIDsLine {
			continue
		}
		if b, ok := gpuHeading(line); ok {
			flush()
			bus, inProcs = b, false
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, val, _ := strings.Cut(strings.TrimSpace(line), ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if indent <= 4 {
			flush()
			inProcs = bus != "" && indent == 4 && key == "Processes" && val == ""
			continue
		}
		if !inProcs {
			continue
		}
		if key == "GPU instance ID" || key == "Process ID" && cur != nil && cur.seen["Process ID"] {
			flush()
		}
		if cur == nil {
			cur = &smiBlock{p: SMIProcess{BusID: bus}, seen: map[string]bool{}}
		}
		cur.field(key, val)
	}
	flush()
	return dropRepeated(out)
}

// gpuHeading reads "GPU 00000000:01:00.0", the heading of one GPU's part of the report.
func gpuHeading(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "GPU ")
	if !ok || len(rest) < 7 || len(rest) > 16 {
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == ':' || c == '.') {
			return "", false
		}
	}
	return rest, strings.Count(rest, ":") >= 1 && strings.Contains(rest, ".")
}

// smiBlock is one process block being read.
type smiBlock struct {
	p    SMIProcess
	seen map[string]bool
	bad  bool
}

func (b *smiBlock) ok() bool { return !b.bad && b.seen["Process ID"] && b.p.Type != "" }

// field reads one labelled field of a process block.
func (b *smiBlock) field(key, val string) {
	switch key {
	case "GPU instance ID", "Compute instance ID", "Process ID", "Type", "Used GPU Memory":
	default:
		return // Name and anything a newer driver adds
	}
	if b.seen[key] {
		b.bad = true
		return
	}
	b.seen[key] = true
	switch key {
	case "GPU instance ID":
		b.p.GPUInstance = smiInstance(val)
	case "Compute instance ID":
		b.p.ComputeInstance = smiInstance(val)
	case "Process ID":
		pid, ok := atoiNonNeg(val)
		if !ok || pid == 0 {
			b.bad = true
		}
		b.p.PID = pid
	case "Type":
		if !smiType(val) {
			b.bad = true
		}
		b.p.Type = val
	case "Used GPU Memory":
		if n, ok := strings.CutSuffix(val, " MiB"); ok {
			if v, ok := parseInt64NonNeg(n); ok {
				b.p.UsedMiB = &v
			}
		}
	}
}

// smiInstance reads a MIG instance id; nil for N/A or anything but digits.
func smiInstance(v string) *int {
	n, ok := atoiNonNeg(v)
	if !ok || n > 1<<16 {
		return nil
	}
	return &n
}

// smiType reports whether v looks like a process type: upper-case letters and '+', short.
func smiType(v string) bool {
	if v == "" || len(v) > 8 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !(v[i] >= 'A' && v[i] <= 'Z' || v[i] == '+') {
			return false
		}
	}
	return true
}

// dropRepeated drops every block of a PID listed more than once under one GPU.
func dropRepeated(ps []SMIProcess) []SMIProcess {
	type key struct {
		pid int
		bus string
		gi  string
	}
	k := func(p SMIProcess) key {
		gi := ""
		if p.GPUInstance != nil {
			gi = strconv.Itoa(*p.GPUInstance)
		}
		if p.ComputeInstance != nil {
			gi += "/" + strconv.Itoa(*p.ComputeInstance)
		}
		return key{p.PID, p.BusID, gi}
	}
	n := map[key]int{}
	for _, p := range ps {
		n[k(p)]++
	}
	out := ps[:0]
	for _, p := range ps {
		if n[k(p)] == 1 {
			out = append(out, p)
		}
	}
	return out
}
