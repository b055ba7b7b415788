package fix

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrPlan is wrapped by every error about a plan that cannot be applied as it is.
var ErrPlan = errors.New("bad plan")

// maxPlanBytes bounds a plan file: a plan names at most a few targets per host.
const maxPlanBytes = 16 << 20

// Write writes p as indented JSON.
func Write(w io.Writer, p Plan) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(p)
}

// Read reads a plan written by Write, refusing another version, unknown fields and any target
// that Validate refuses: a plan file is reviewed, and may have been edited since.
func Read(r io.Reader) (Plan, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
	if err != nil {
		return Plan{}, err
	}
	if len(b) > maxPlanBytes {
		return Plan{}, fmt.Errorf("%w: over %d bytes", ErrPlan, maxPlanBytes)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return Plan{}, fmt.Errorf("%w: %v", ErrPlan, err)
	}
	if p.Version != Version {
		return Plan{}, fmt.Errorf("%w: version %d, this gputriage reads version %d", ErrPlan, p.Version, Version)
	}
	if !isHex(p.ID, 16) {
		return Plan{}, fmt.Errorf("%w: id %q is not 16 hex digits", ErrPlan, p.ID)
	}
	hosts := map[string]bool{}
	for i, h := range p.Hosts {
		if h.Host == "" {
			return Plan{}, fmt.Errorf("%w: a host without a name", ErrPlan)
		}
		// Twice the same host, or the same PID twice on one, would be applied twice at once.
		if hosts[h.Host] {
			return Plan{}, fmt.Errorf("%w: host %q is in the plan twice", ErrPlan, h.Host)
		}
		hosts[h.Host] = true
		// What the operator named in the judge list ("include": true) is a target.
		h = h.Include(nil)
		p.Hosts[i] = h
		pids := map[int]bool{}
		for _, t := range h.Targets {
			if pids[t.PID] {
				return Plan{}, fmt.Errorf("%w: host %q: pid %d is a target twice", ErrPlan, h.Host, t.PID)
			}
			pids[t.PID] = true
		}
		if len(h.Targets) > 0 && !isHex(h.BootID, 32) {
			return Plan{}, fmt.Errorf("%w: host %q: boot id %q is not 32 hex digits", ErrPlan, h.Host, h.BootID)
		}
		for _, t := range h.Targets {
			if err := t.Validate(); err != nil {
				return Plan{}, fmt.Errorf("%w: host %q: %v", ErrPlan, h.Host, err)
			}
		}
	}
	return p, nil
}

// Validate refuses a target the apply script would refuse: every value it carries to the host
// is digits, lower-case hex, or a name of [A-Za-z0-9@._:-], in the form its kind needs.
func (t Target) Validate() error {
	switch {
	case t.PID <= 1 || t.PID > 1<<22:
		return fmt.Errorf("pid %d out of range", t.PID)
	case t.StartTicks < 0:
		return fmt.Errorf("pid %d: negative start time", t.PID)
	case t.UID < 0:
		return fmt.Errorf("pid %d: negative uid", t.PID)
	case !isHex(t.ArgvSHA256, 64):
		return fmt.Errorf("pid %d: argv hash %q is not 64 hex digits", t.PID, t.ArgvSHA256)
	case t.PodUID != "" && !isPodUID(t.PodUID):
		return fmt.Errorf("pid %d: pod uid %q is not a UID", t.PID, t.PodUID)
	}
	ok := false
	switch t.Kind {
	case KindKill:
		ok = t.Name == "" && t.Runtime == ""
	case KindStopUnit:
		ok = t.Runtime == "" && isName(t.Name) && strings.Contains(t.Name, ".") && t.Name[0] != '-'
	case KindStopContainer:
		ok = (t.Runtime == "docker" || t.Runtime == "podman" || t.Runtime == "crictl") && isHex(t.Name, -1)
	case KindCancelJob:
		ok = t.Runtime == "" && isDigits(t.Name)
	default:
		return fmt.Errorf("pid %d: unknown kind %q", t.PID, t.Kind)
	}
	if !ok {
		return fmt.Errorf("pid %d: %s: bad name %q or runtime %q", t.PID, t.Kind, t.Name, t.Runtime)
	}
	return nil
}

// isPodUID: a Kubernetes pod UID as a cgroup names it: lower-case hex digits and dashes, 36
// at most.
func isPodUID(s string) bool {
	return len(s) <= 36 && isHex(strings.ReplaceAll(s, "-", ""), -1)
}

// isHex: n lower-case hex digits; n < 0: 1 to 64 of them.
func isHex(s string, n int) bool {
	if (n >= 0 && len(s) != n) || (n < 0 && (len(s) == 0 || len(s) > 64)) {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

func isDigits(s string) bool {
	return len(s) > 0 && len(s) <= 20 && strings.Trim(s, "0123456789") == ""
}

// isName: a unit name as the apply script accepts it.
func isName(s string) bool {
	if len(s) == 0 || len(s) > 255 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@._:-", c)) {
			return false
		}
	}
	return true
}
