package parse

import (
	"slices"
	"strings"
)

// MaxGPUs bounds the GPUs a snapshot keeps: nvidia-smi lists a host's physical GPUs (16 on the
// largest boards), and a GPU list filling its section's 1 MiB (some 8,000 rows) would make
// every report of the host megabytes long.
const MaxGPUs = 64

// capGPUs keeps the first MaxGPUs of gpus and notes how many more the section listed: the
// compute apps on those read as apps on GPUs missing from the list (probe-limited), which
// blames no process.
func (p *snapParser) capGPUs(gpus []GPU, section string) []GPU {
	if len(gpus) <= MaxGPUs {
		return gpus
	}
	p.note(NoteSectionTruncated, "section %s lists %d GPUs: only the first %d are read", section, len(gpus), MaxGPUs)
	return slices.Clone(gpus[:MaxGPUs]) // not the whole list's array
}

// CloneGPUs copies gpus with their own strings, so that what is kept of a host after its
// diagnosis holds no part of the section they were read from.
func CloneGPUs(gpus []GPU) []GPU {
	out := slices.Clone(gpus)
	for i := range out {
		g := &out[i]
		for _, s := range []*string{&g.UUID, &g.Name, &g.BusID, &g.ComputeMode, &g.DriverVersion, &g.MIGMode} {
			*s = strings.Clone(*s)
		}
	}
	return out
}
