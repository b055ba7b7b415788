package parse

import (
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseHost reads the host section's key=value lines. An empty value is unknown; a key it
// does not know is skipped. ClockTicks is 100 when unknown.
func ParseHost(r io.Reader) (HostFacts, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	h := HostFacts{ClockTicks: 100}
	for i, l := range splitLines(b) {
		k, v, ok := strings.Cut(l, "=")
		if !ok || v == "" {
			continue
		}
		bad := false
		switch k {
		case "probe_version":
			h.ProbeVersion = v
		case "hostname":
			h.Hostname = v
		case "kernel":
			h.Kernel = v
		case "user":
			h.User = v
		case "nvidia_smi":
			h.NvidiaSMIPath = v
		case "timeout":
			h.HasTimeout = v == "1"
		case "time", "btime":
			n, ok := parseInt64NonNeg(v)
			if bad = !ok || n > 1<<40; !bad {
				t := time.Unix(n, 0).UTC()
				if k == "time" {
					h.Time = &t
				} else {
					h.BootTime = &t
				}
			}
		case "uptime":
			f, err := strconv.ParseFloat(v, 64)
			if bad = err != nil || !(f >= 0 && f < math.MaxInt32*100.0); !bad {
				h.UptimeSeconds = &f
			}
		case "clk_tck":
			n, ok := atoiNonNeg(v)
			if bad = !ok || n == 0; !bad {
				h.ClockTicks = n
			}
		case "uid":
			n, ok := atoiNonNeg(v)
			if bad = !ok; !bad {
				h.UID = &n
			}
		}
		if bad {
			errs.addf("host line %d: %s", i+1, q(l))
		}
	}
	return h, errs.err()
}

// ParsePasswd reads passwd lines ("name:x:uid:gid:gecos:home:shell") into names by uid; the
// first name given a uid wins.
func ParsePasswd(r io.Reader) (map[int]string, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	names := map[int]string{}
	for i, l := range splitLines(b) {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, ":")
		if len(f) < 3 || f[0] == "" {
			errs.addf("passwd line %d: %s", i+1, q(l))
			continue
		}
		uid, ok := atoiNonNeg(f[2])
		if !ok {
			errs.addf("passwd line %d: uid: %s", i+1, q(l))
			continue
		}
		if _, dup := names[uid]; !dup {
			names[uid] = f[0]
		}
	}
	return names, errs.err()
}

// ParseUnits reads systemctl show output: blank-line separated blocks of Key=Value lines
// (Id, LoadState, ActiveState, SubState, MainPID, Result). Lines without "=" (systemctl's own
// complaints, such as "System has not been booted with systemd") are skipped, and so is a
// block without Id.
func ParseUnits(r io.Reader) ([]Unit, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	var units []Unit
	var u Unit
	seen := false
	flush := func() {
		if seen && u.Name != "" {
			units = append(units, u)
		}
		u, seen = Unit{}, false
	}
	for i, l := range splitLines(b) {
		if strings.TrimSpace(l) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		seen = true
		switch k {
		case "Id":
			if u.Name != "" { // a block without a blank line before it
				flush()
				seen = true
			}
			u.Name = v
		case "LoadState":
			u.LoadState = v
		case "ActiveState":
			u.ActiveState = v
		case "SubState":
			u.SubState = v
		case "Result":
			u.Result = v
		case "MainPID":
			n, ok := atoiNonNeg(v)
			if !ok {
				errs.addf("units line %d: %s", i+1, q(l))
				continue
			}
			u.MainPID = &n
		}
	}
	flush()
	return units, errs.err()
}
