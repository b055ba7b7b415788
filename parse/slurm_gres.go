package parse

import (
	"encoding/base64"
	"strings"
)

// SlurmNode is what the host's Slurm controller said of one node this host serves (slurm
// section's "node" lines, from `scontrol show node -o NODE`): the generic resources (GRES)
// configured on it. A job's GPU allocation means something only on a node with GPU GRES:
// without it Slurm hands out no GPUs and every job may use every GPU.
type SlurmNode struct {
	Name string // a plain node name: letters, digits, ".", "_", "-"
	// Asked is false when the probe did not ask: Slurm had already failed to answer in time.
	Asked    bool
	ExitCode *int
	// NotFound is set when the controller does not know the node (the host's NodeName is
	// not the name asked for).
	NotFound bool
	// Ambiguous is set when the record is not the node asked for or its Gres key came other
	// than once: nothing but Name is used.
	Ambiguous bool
	// Gres is the node's Gres field as Slurm prints it ("gpu:4", "gpu:a100:4(S:0-1),shard:8",
	// "(null)" when none), bounded; "" when unknown.
	Gres string
	// GPUGres says whether GPU GRES (a "gpu" entry with a count above 0) is configured on the
	// node; nil when unknown (not asked, not found, failed, ambiguous).
	GPUGres *bool
	// Output is scontrol's words when it failed, bounded.
	Output string
}

// SlurmGRES is how the host's Slurm manages GPUs, from scontrol show config (the slurm
// section's "gres" line).
type SlurmGRES struct {
	// Types are GresTypes' entries ("gpu", "shard"); none for "(null)". TypesKnown is false
	// when the probe could not read it.
	Types      []string
	TypesKnown bool
	// ConstrainDevices is cgroup.conf's ConstrainDevices; TaskCgroup whether TaskPlugin
	// includes task/cgroup, which enforces it. Nil when unknown. Slurm keeps a job's
	// processes off the GPUs it was not allocated only when both are set.
	ConstrainDevices, TaskCgroup *bool
}

// Bounds of the node lines.
const (
	maxSlurmNodes = 16
	maxNodeGres   = 256
)

// parseSlurmNodeLine reads "node NAME RC BASE64" (RC "-" when not asked), the output of
// scontrol show node -o NAME.
func parseSlurmNodeLine(f []string) (SlurmNode, bool) {
	if len(f) < 3 || !isNodeName(f[1]) {
		return SlurmNode{}, false
	}
	n := SlurmNode{Name: f[1]}
	if f[2] == "-" {
		return n, len(f) == 3
	}
	rc, ok := atoiNonNeg(f[2])
	var text []byte
	var err error
	if len(f) == 4 {
		text, err = base64.StdEncoding.DecodeString(f[3])
	}
	if !ok || err != nil || len(f) > 4 {
		return SlurmNode{}, false
	}
	n.Asked, n.ExitCode = true, &rc
	readSlurmNode(&n, string(text))
	return n, true
}

// readSlurmNode fills n from one record of scontrol show node -o, or notes why it cannot.
func readSlurmNode(n *SlurmNode, s string) {
	if *n.ExitCode != 0 {
		n.NotFound = strings.Contains(s, "not found")
		n.Output = smiMessage(s)
		return
	}
	if !strings.HasPrefix(s, "NodeName="+n.Name+" ") || strings.Count(s, " Gres=") != 1 {
		n.Ambiguous = true
		return
	}
	v := s[strings.Index(s, " Gres=")+len(" Gres="):]
	if i := strings.IndexAny(v, " \n"); i >= 0 {
		v = v[:i]
	}
	if v == "" || len(v) > maxNodeGres {
		return
	}
	n.Gres = v
	has := gresHasGPU(v)
	n.GPUGres = &has
}

// gresHasGPU says whether a node's Gres field configures GPUs: an entry "gpu", "gpu:N",
// "gpu:TYPE" or "gpu:TYPE:N" (each perhaps followed by "(S:0-1)"), N above 0.
func gresHasGPU(v string) bool {
	for _, item := range splitOutsideParens(v) {
		if i := strings.IndexByte(item, '('); i >= 0 {
			item = item[:i]
		}
		f := strings.Split(item, ":")
		if f[0] != "gpu" {
			continue
		}
		last := f[len(f)-1]
		if len(f) > 1 && isDigits(last) && strings.Trim(last, "0") == "" {
			continue // gpu:0
		}
		return true
	}
	return false
}

// parseSlurmGRES reads "gres GRESTYPES CONSTRAINDEVICES TASKPLUGIN", each "-" when unknown.
func parseSlurmGRES(f []string) (SlurmGRES, bool) {
	if len(f) != 4 {
		return SlurmGRES{}, false
	}
	var g SlurmGRES
	if t := f[1]; t != "-" {
		g.TypesKnown = true
		if t != "(null)" {
			g.Types = strings.Split(t, ",")
		}
	}
	switch f[2] {
	case "yes", "no":
		v := f[2] == "yes"
		g.ConstrainDevices = &v
	case "-":
	default:
		return SlurmGRES{}, false
	}
	if tp := f[3]; tp != "-" {
		v := false
		for _, p := range strings.Split(tp, ",") {
			v = v || p == "task/cgroup" || p == "cgroup"
		}
		g.TaskCgroup = &v
	}
	return g, true
}

// isNodeName says whether s is a plain Slurm node name, as the probe sends it.
func isNodeName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
