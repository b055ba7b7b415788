package parse

import (
	"bytes"
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

// recordCaps bounds how many records of each section the client parses, well below what the
// section's byte bound admits: the probe describes at most maxProbeProcs processes (and so at
// most that many users, units and apps worth reading), and a busy 8-GPU host sends a few
// thousand descriptors, mappings and /dev/shm entries. Records past a cap are counted and
// dropped before they are parsed, so that a host filling every section costs at most 64 MiB
// in flight, its capture included (TestLimitCost, docs/performance.md). The section then reads
// as cut (SectionInfo.Truncated and Dropped, and a section-truncated note naming it and the
// records dropped), so every verdict that needs it whole treats it as cut. host, shm-df and
// slurm are small for their bytes and have no cap.
var recordCaps = map[string]int{
	"smi-gpu":       MaxGPUs + 1, // lines: the header and MaxGPUs rows
	"smi-gpu-basic": MaxGPUs + 1,
	"smi-apps":      2049, // lines: the header and 2,048 apps
	"apps-alive":    2048, // lines: one per distinct app
	"smi-pids":      8192, // lines: about 1,300 processes of 6 lines and their GPUs' headings
	"shm-dirs":      8192, // fields: the files (the probe sends at most 512), each with its directories
	"fds":           4096,
	"maps":          4096,
	"fdstat":        4096,
	"procs":         maxProbeProcs,
	"users":         2048, // the users of at most maxProbeProcs processes
	"units":         1024,
	"user-units":    1024,
	"shm-ls":        4096,
	"ancestors":     2048,
}

// RecordCap is the most records of the named section the client parses (0: no cap).
func RecordCap(name string) int { return recordCaps[name] }

// cutRecords cuts body after the section's cap on records (recordCaps) and returns how many
// records were dropped. Records end in sep; a procs record is a block ending in an "end"
// field, a units record a block ending in an empty line. A NUL-separated body keeps what
// follows its last record (the fds section's "denied N" line). Linear, and without copying
// unless a tail is kept.
func cutRecords(name string, body []byte, sep byte) ([]byte, int) {
	limit := recordCaps[name]
	if limit <= 0 {
		return body, 0
	}
	end := recordEnd(name, sep)
	off, n := 0, 0
	for n < limit {
		i := bytes.Index(body[off:], end)
		if i < 0 {
			return body, 0
		}
		off += i + len(end)
		n++
	}
	rest := body[off:]
	dropped := bytes.Count(rest, end)
	tail := []byte(nil)
	if i := bytes.LastIndex(rest, end); i >= 0 {
		tail = rest[i+len(end):]
	} else {
		tail = rest
	}
	if len(tail) > 0 && sep != 0 {
		dropped++ // a last record without its separator
		tail = nil
	}
	if dropped == 0 {
		return body, 0
	}
	if len(tail) == 0 {
		return body[:off], dropped
	}
	return append(slices.Clip(slices.Clone(body[:off])), tail...), dropped
}

// recordEnd is what ends a record of the named section: for procs, a field that is "end"
// whole (a comm or argv ending in "end" must not count as one).
func recordEnd(name string, sep byte) []byte {
	switch name {
	case "procs":
		return []byte{sep, 'e', 'n', 'd', sep}
	case "units":
		return []byte("\n\n")
	}
	return []byte{sep}
}

// capRecords cuts a section's body at its cap on records; a cut is noted, with how many
// records were dropped, and the section's SectionInfo reads as cut.
func (p *snapParser) capRecords(name string, body []byte, sep byte) []byte {
	kept, dropped := cutRecords(name, body, sep)
	if dropped == 0 {
		return body
	}
	for i := range p.s.Sections {
		if si := &p.s.Sections[i]; si.Name == name {
			si.Truncated, si.Dropped = true, dropped
		}
	}
	p.note(NoteSectionTruncated, "section %s holds more records than the client reads: the first %d were read, %d more dropped", name, recordCaps[name], dropped)
	return kept
}
