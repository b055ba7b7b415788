package watch

import (
	"strconv"
	"time"
)

// jsonRound is one line of watch --format json: one host's round. Documented in docs/json.md
// (watch).
type jsonRound struct {
	Time      string      `json:"time"`
	Host      string      `json:"host"`
	Round     int         `json:"round"`
	Reachable bool        `json:"reachable"`
	Error     *string     `json:"error"`
	ProbeTime string      `json:"probe_time"`
	Holds     bool        `json:"holds"`
	Waiting   string      `json:"waiting,omitempty"`
	Worst     *string     `json:"worst"`
	GPUs      []jsonGPU   `json:"gpus"`
	Holders   []jsonHold  `json:"holders"`
	Events    []jsonEvent `json:"events"`
}

type jsonGPU struct {
	Index    int    `json:"index"`
	UsedMiB  *int64 `json:"used_mib"`
	FreeMiB  *int64 `json:"free_mib"`
	TotalMiB *int64 `json:"total_mib"`
}

type jsonHold struct {
	PID      int              `json:"pid"`
	Start    *int64           `json:"start_unix"`
	Program  string           `json:"program"`
	Leftover bool             `json:"leftover"`
	GPUMiB   map[string]int64 `json:"gpu_mib"`
}

type jsonEvent struct {
	Kind              string   `json:"kind"`
	Text              string   `json:"text"`
	GPU               *int     `json:"gpu,omitempty"`
	PID               *int     `json:"pid,omitempty"`
	MiB               *int64   `json:"mib,omitempty"`
	AfterSeconds      *float64 `json:"after_seconds,omitempty"`
	ResolutionSeconds *float64 `json:"resolution_seconds,omitempty"`
	GapSeconds        *float64 `json:"gap_seconds,omitempty"`
}

func jsonRoundOf(host string, n int, at time.Time, s Status, evs []Event) jsonRound {
	j := jsonRound{Time: at.UTC().Format(time.RFC3339Nano), Host: host, Round: n, Reachable: s.Reachable,
		ProbeTime: s.Time.UTC().Format(time.RFC3339), Holds: s.Holds, Waiting: s.Waiting,
		GPUs: []jsonGPU{}, Holders: []jsonHold{}, Events: []jsonEvent{}}
	if s.Err != "" {
		e := s.Err
		j.Error = &e
	}
	if w := worstName(s.Worst); w != "" {
		j.Worst = &w
	}
	for _, g := range s.GPUs {
		j.GPUs = append(j.GPUs, jsonGPU{Index: g.Index, UsedMiB: g.UsedMiB, FreeMiB: g.FreeMiB, TotalMiB: g.TotalMiB})
	}
	for _, h := range s.Holders {
		jh := jsonHold{PID: h.PID, Program: h.Program, Leftover: h.Leftover, GPUMiB: map[string]int64{}}
		if h.Start != 0 {
			st := h.Start
			jh.Start = &st
		}
		for g, m := range h.MiB {
			jh.GPUMiB[strconv.Itoa(g)] = m
		}
		j.Holders = append(j.Holders, jh)
	}
	for _, e := range evs {
		j.Events = append(j.Events, jsonEventOf(e))
	}
	return j
}

func jsonEventOf(e Event) jsonEvent {
	secs := func(d time.Duration) *float64 { f := d.Seconds(); return &f }
	je := jsonEvent{Kind: string(e.Kind), Text: e.String(), GPU: e.GPU}
	if e.Holder != nil {
		pid := e.Holder.PID
		je.PID = &pid
	}
	switch e.Kind {
	case Released:
		m := e.MiB
		je.MiB, je.AfterSeconds, je.ResolutionSeconds = &m, secs(e.After), secs(e.Resolution)
	case Reconnected:
		je.GapSeconds = secs(e.Gap)
	}
	return je
}
