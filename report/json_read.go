package report

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/gputriage/gputriage/diagnose"
)

// HostFindings are the findings of one host of a JSON report.
type HostFindings struct {
	Host     string
	Findings []diagnose.Finding
}

// ReadFindings decodes the findings of a JSON report (docs/json.md), host by host in its
// order, as diagnose holds them: the facts JSON carries and the words the report gave them.
// JSON carries every fact the words say: diagnose.ComposeWords composes each finding's words
// again from its facts alone, the same words.
func ReadFindings(doc []byte) ([]HostFindings, error) {
	var d struct {
		Hosts []struct {
			Host     string        `json:"host"`
			Findings []jsonFinding `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	var out []HostFindings
	for _, h := range d.Hosts {
		hf := HostFindings{Host: h.Host}
		for _, j := range h.Findings {
			f, err := findingOfJSON(j)
			if err != nil {
				return nil, err
			}
			hf.Findings = append(hf.Findings, f)
		}
		out = append(out, hf)
	}
	return out, nil
}

// findingOfJSON is the finding j is: its facts and its words.
func findingOfJSON(j jsonFinding) (diagnose.Finding, error) {
	f := diagnose.Finding{Code: j.Code, Kind: deref(j.Kind), GPUs: j.GPUs, PIDs: j.PIDs, Files: j.Files,
		Checks: commandsOfJSON(j.Checks), Actions: actionsOfJSON(j.Actions), IfAbandoned: actionsOfJSON(j.IfAbandoned),
		Named: j.Named, Imbalance: j.Imbalance, Check: j.Check, Omitted: j.Omitted, Job: j.Job, Memory: j.Memory,
		ShmUse: j.ShmUse, ShmTruncated: j.ShmTruncated, HoldersUnknown: j.HoldersUnknown, ServedBy: deref(j.ServedBy),
		OthersMay: othersMayOfJSON(j.OthersMay), SMI: j.SMI, NotRoot: j.NotRoot, Folded: j.Folded}
	if err := f.Severity.UnmarshalText([]byte(j.Severity)); err != nil {
		return f, err
	}
	f.Title, f.Explanation, f.Evidence, f.Fix = j.Title, j.Explanation, j.Evidence, j.Fix
	for _, r := range j.Reasons {
		f.Reasons = append(f.Reasons, diagnose.Reason{Code: diagnose.ReasonCode(r.Code), Strong: r.Strong, PID: deref(r.PID),
			Unit: deref(r.Unit), State: deref(r.State), Result: deref(r.Result), Paths: r.Paths,
			Age: seconds(r.AgeSeconds), Than: seconds(r.ThanSeconds), Older: r.Older, ServedBy: deref(r.ServedBy),
			OthersMay: othersMayOfJSON(r.OthersMay), Orphaned: r.Orphaned, Note: deref(r.Note), Detail: deref(r.Detail),
			MiB: deref(r.MiB), Held: r.Held, Purged: r.Purged, Ended: r.Ended, Bytes: deref(r.Bytes),
			Job: deref(r.Job), User: deref(r.JobUser), Node: deref(r.Node), GPUs: r.GPUs,
			ConstrainDevices: r.ConstrainDevices, TaskCgroup: r.TaskCgroup, Folded: deref(r.Folded),
			Parent: deref(r.Parent), ParentName: deref(r.ParentName), Other: deref(r.Other),
			Links: deref(r.Links), PIDs: r.PIDs, AsRoot: r.AsRoot, Pod: r.Pod})
	}
	for _, s := range j.Shm {
		sf := diagnose.ShmFile{Path: s.Path, Bytes: s.Bytes, Dir: s.Dir, Deleted: s.Deleted, Mapped: s.Mapped, Open: s.Open,
			PIDs: s.PIDs, MorePIDs: s.MorePIDs, ByName: s.ByName, Owner: deref(s.Owner)}
		if s.Modified != nil {
			m, err := time.Parse(time.RFC3339, *s.Modified)
			if err != nil {
				return f, err
			}
			age := seconds(s.AgeSeconds)
			sf.Modified, sf.Age = &m, &age
		}
		f.Shm = append(f.Shm, sf)
	}
	return f, nil
}

func actionsOfJSON(js []jsonAction) []diagnose.Action {
	var out []diagnose.Action
	for _, a := range js {
		frees := diagnose.Impact{GPUMiB: map[int]int64{}, ShmBytes: a.Frees.ShmBytes}
		for g, m := range a.Frees.GPUMiB {
			if i, err := strconv.Atoi(g); err == nil {
				frees.GPUMiB[i] = m
			}
		}
		out = append(out, diagnose.Action{Kind: diagnose.ActionKind(a.Kind), Target: a.Target, PIDs: a.PIDs,
			Frees: frees, Steps: commandsOfJSON(a.Steps)})
	}
	return out
}

func commandsOfJSON(js []jsonCommand) []diagnose.Command {
	var out []diagnose.Command
	for _, c := range js {
		out = append(out, diagnose.Command{Line: c.Line, Note: deref(c.Note)})
	}
	return out
}

func othersMayOfJSON(o *jsonOthersMay) *diagnose.OthersMay {
	if o == nil {
		return nil
	}
	return &diagnose.OthersMay{Code: diagnose.OthersCode(o.Code), Dir: deref(o.Dir), UID: o.UID, GID: o.GID}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func seconds(s *int64) time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(*s) * time.Second
}
