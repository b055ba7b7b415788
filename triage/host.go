package triage

import (
	"bytes"
	"fmt"
	"github.com/gputriage/gputriage/readiness"
	"os"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/report"
)

// finish gives h to Each, answers Job for it, bounds the processes its result keeps
// (diagnose.Retain), then drops what no report reads: the raw capture beyond Keep
// (CaptureSize keeps its length) and the snapshot beyond reportView. The pipeline keeps of
// each diagnosed host what the report needs, so that hosts are dropped as they are
// diagnosed, not when the report is written.
func (cc *Config) finish(h *report.Host) {
	if cc.Each != nil {
		cc.Each(h)
	}
	if cc.Job != nil && h.Err == nil && h.Snapshot != nil {
		r := readiness.Check(h.Snapshot, h.Result, *cc.Job)
		h.Readiness = &r
	}
	diagnose.Retain(&h.Result)
	h.Snapshot = reportView(h.Snapshot)
	if c := h.Capture; c != nil {
		h.CaptureSize, h.Capture = len(c), nil
		if keep := cc.Keep; keep > 0 {
			h.Capture = bytes.Clone(c[:min(len(c), keep)])
		}
	}
}

// reportView is the part of a snapshot that reports read: host facts, nvidia-smi's answer,
// the GPUs, /dev/shm's totals, notes and sections. The processes, descriptors, mappings,
// units and /dev/shm entries are diagnose's input only; its Result carries what it found in
// them. TestReportView checks that every report renders the same from the view.
func reportView(s *parse.Snapshot) *parse.Snapshot {
	if s == nil {
		return nil
	}
	v := &parse.Snapshot{Host: s.Host, SMI: s.SMI, GPUs: parse.CloneGPUs(s.GPUs), Shm: s.Shm, Notes: s.Notes,
		Sections: s.Sections, Truncated: s.Truncated}
	v.Shm.Entries = nil
	return v
}

// diagnoseCapture parses one host's raw probe output and diagnoses it. Ages are computed
// against the host's own clock at probe time, so a replay gives exactly the live result.
func diagnoseCapture(name string, raw []byte) report.Host {
	// Output that is not a capture at all (a login banner, a shell that ignored the script,
	// garbage) means the probe did not run: the host is not triaged, whatever it printed. Only
	// the first line is looked at, and at most maxHeaderLine bytes of it.
	if _, err := parse.SplitCapture(firstLine(raw)); err != nil {
		return report.Host{Name: name, Capture: raw, Err: &report.HostError{Phase: "probe", Kind: "bad-output",
			Message: fmt.Sprintf("the host's output is not a gputriage capture (%d bytes): %v", len(raw), err)}}
	}
	snap, err := parse.Parse(raw) // never nil: what could be read, and what could not
	h := report.Host{Name: name, Snapshot: snap, Capture: raw}
	if err != nil {
		snap.Notes = append(snap.Notes, parse.Note{Code: "parse-error", Message: err.Error()})
	}
	now := time.Unix(0, 0).UTC()
	if snap.Host.Time != nil {
		now = *snap.Host.Time
	}
	h.Result = diagnose.Diagnose(snap, now)
	return h
}

// PlainHostname reports whether a host's reported hostname can name it in a report: letters,
// digits, '-', '_' and '.', at most 253 bytes, not starting with '-' or '.'. The value is the
// host's, so anything else (escapes, spaces, a forged "name  OK") falls back to the file name.
func PlainHostname(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '-' || s[0] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Replay reads a capture file, or a directory saved by --save/collect (or any directory of
// HOST.capture files), and diagnoses each host in it exactly as Run would have, keeping of
// each what c keeps. A file that is not a capture is a usage error.
func Replay(path string, c *Config) ([]report.Host, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, usagef("--replay: %v", err)
	}
	if st.IsDir() {
		hosts, err := c.replayDir(path)
		if err != nil {
			return nil, usagef("--replay: %v", err)
		}
		return hosts, nil
	}
	raw, err := readCapture(path)
	if err != nil {
		return nil, usagef("--replay: %v", err)
	}
	h := diagnoseCapture(hostFromCaptureFile(path), raw)
	if h.Snapshot != nil && PlainHostname(h.Snapshot.Host.Hostname) {
		// A capture file is named by whoever saved it (fixtures/ct200.capture, a.capture): the
		// host is the one the capture says it came from. (In a directory, a saved sweep, the
		// file names are the names the user gave, as the live report showed them.)
		h.Name = h.Snapshot.Host.Hostname
	}
	if h.Err != nil && h.Err.Kind == "bad-output" {
		// The user named the wrong file. (In a directory, a saved sweep, such a file is one
		// host's bad record and the others are still reported.)
		return nil, usagef("--replay %s: %s", path, h.Err.Message)
	}
	c.finish(&h)
	return []report.Host{h}, nil
}
