package parse

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ParseHost reads the host section's key=value lines. An empty value is unknown; a key it
// does not know is skipped. ClockTicks is 100 when unknown.
func ParseHost(r io.Reader) (HostFacts, error) {
	h, _, err := parseHost(r)
	return h, err
}

// parseHost is ParseHost that also returns the keys given more than once: the probe prints
// each once, so their values are left unknown.
func parseHost(r io.Reader) (HostFacts, []string, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	h := HostFacts{ClockTicks: 100}
	lines := splitLines(b)
	count := map[string]int{}
	var contested []string
	for _, l := range lines {
		k, _, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		if count[k]++; count[k] == 2 {
			contested = append(contested, k)
		}
	}
	for i, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok || v == "" || count[k] > 1 {
			continue
		}
		v = strings.Clone(v) // kept after the host is diagnosed: not the whole section
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
		case "boot_id":
			if id, ok := bootID(v); ok {
				h.BootID = id
			} else {
				bad = true
			}
		case "nvidia_smi":
			h.NvidiaSMIPath = v
		case "shm_dev":
			var ok bool
			h.ShmDev, ok = DevID(v)
			bad = !ok
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
	return h, contested, errs.err()
}

// ParsePasswd reads passwd lines ("name:x:uid:gid:gecos:home:shell") into names by uid; the
// first name given a uid wins (a version 1 users section may be all of /etc/passwd, where two
// names can share a uid).
func ParsePasswd(r io.Reader) (map[int]string, error) {
	names, _, err := parsePasswd(r)
	return names, err
}

// ParsePasswdV2 reads a version 2 users section: "NAME:x:UID" lines, one per uid. A uid named
// twice is left out and returned in contested.
func ParsePasswdV2(r io.Reader) (names map[int]string, contested []int, err error) {
	names, count, err := parsePasswd(r)
	for uid, n := range count {
		if n > 1 {
			delete(names, uid)
			contested = append(contested, uid)
		}
	}
	sort.Ints(contested)
	return names, contested, err
}

// parsePasswd returns the first name of each uid and how many lines named it.
func parsePasswd(r io.Reader) (map[int]string, map[int]int, error) {
	b, err := readInput(r)
	var errs errList
	errs.add(err)
	names := map[int]string{}
	count := map[int]int{}
	for i, l := range splitLines(b) {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.SplitN(l, ":", 4)
		if len(f) < 3 || f[0] == "" {
			errs.addf("passwd line %d: %s", i+1, q(l))
			continue
		}
		uid, ok := atoiNonNeg(f[2])
		if !ok {
			errs.addf("passwd line %d: uid: %s", i+1, q(l))
			continue
		}
		count[uid]++
		if _, dup := names[uid]; !dup {
			names[uid] = strings.Clone(f[0]) // kept: not the whole section
		}
	}
	return names, count, errs.err()
}

// ParseUnits reads systemctl show output: blank-line separated blocks of Key=Value lines
// (Id, LoadState, ActiveState, SubState, MainPID, Result). Lines without "=" (systemctl's own
// complaints, such as "System has not been booted with systemd") are skipped, and so is a
// block without Id. Two blocks of one Id that differ are both left out and the Id returned in
// contested; equal ones (two aliases of a unit) count once.
func ParseUnits(r io.Reader) (units []Unit, contested []string, err error) {
	b, rerr := readInput(r)
	var errs errList
	errs.add(rerr)
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
	units, contested = uniqueUnits(units)
	return units, contested, errs.err()
}

// uniqueUnits keeps one of equal blocks of an Id and drops every block of an Id whose blocks
// differ.
func uniqueUnits(units []Unit) ([]Unit, []string) {
	first := map[string]int{}
	bad := map[string]bool{}
	var contested []string
	out := units[:0]
	for _, u := range units {
		i, dup := first[u.Name]
		switch {
		case !dup:
			first[u.Name] = len(out)
			out = append(out, u)
		case !sameUnit(out[i], u) && !bad[u.Name]:
			bad[u.Name] = true
			contested = append(contested, u.Name)
		}
	}
	if len(bad) == 0 {
		return out, nil
	}
	keep := out[:0]
	for _, u := range out {
		if !bad[u.Name] {
			keep = append(keep, u)
		}
	}
	sort.Strings(contested)
	return keep, contested
}

func sameUnit(a, b Unit) bool {
	return a.Name == b.Name && a.LoadState == b.LoadState && a.ActiveState == b.ActiveState &&
		a.SubState == b.SubState && a.Result == b.Result && eqIntPtr(a.MainPID, b.MainPID) &&
		eqIntPtr(a.UserManagerUID, b.UserManagerUID)
}

func eqIntPtr(a, b *int) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// UserUnits is one line of the user-units section: the units of one user's manager.
type UserUnits struct {
	UID int
	// ExitCode is systemctl's exit status; nil when the probe did not ask (not root, no
	// name for the uid, no systemctl).
	ExitCode *int
	Units    []Unit // UserManagerUID set to UID
	// Output is systemctl's output when it failed, bounded.
	Output string
}

// ParseUserUnits reads the user-units section: "UID RC BASE64" lines, BASE64 the output of
// systemctl --user --machine=USER@ show for the units of uid UID's manager, RC its exit
// status or "-" when not asked. A uid given twice is left out and returned in contested, and
// so is an Id that one manager describes twice with different states.
func ParseUserUnits(r io.Reader) (out []UserUnits, contested []string, err error) {
	b, rerr := readInput(r)
	var errs errList
	errs.add(rerr)
	count := map[int]int{}
	for i, l := range splitLines(b) {
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Fields(l)
		uid, ok := -1, false
		if len(f) >= 2 {
			uid, ok = atoiNonNeg(f[0])
		}
		if !ok {
			errs.addf("user-units line %d: want UID RC BASE64: %s", i+1, q(l))
			continue
		}
		count[uid]++
		uu := UserUnits{UID: uid}
		if f[1] != "-" {
			rc, ok := atoiNonNeg(f[1])
			if !ok {
				errs.addf("user-units line %d: rc: %s", i+1, q(l))
				continue
			}
			uu.ExitCode = &rc
			var text []byte
			if len(f) > 2 {
				text, err = base64.StdEncoding.DecodeString(f[2])
				if err != nil {
					errs.addf("user-units line %d: bad base64", i+1)
					continue
				}
			}
			units, bad, err := ParseUnits(bytes.NewReader(text))
			errs.add(err)
			for _, name := range bad {
				contested = append(contested, fmt.Sprintf("%s of uid %d", name, uid))
			}
			for j := range units {
				units[j].UserManagerUID = ptr(uid)
			}
			uu.Units = units
			if rc != 0 {
				uu.Output = smiMessage(string(text))
			}
		}
		out = append(out, uu)
	}
	keep := out[:0]
	for _, uu := range out {
		if count[uu.UID] == 1 {
			keep = append(keep, uu)
		} else if count[uu.UID] > 1 {
			contested = append(contested, fmt.Sprintf("the units of uid %d", uu.UID))
			count[uu.UID] = 0
		}
	}
	return keep, contested, errs.err()
}

// bootID is a boot_id as 32 lower-case hex digits, its dashes dropped; ok is false for
// anything but the kernel's 8-4-4-4-12 form.
func bootID(v string) (string, bool) {
	parts := strings.Split(v, "-")
	if len(parts) != 5 || len(v) != 36 {
		return "", false
	}
	for i, n := range []int{8, 4, 4, 4, 12} {
		if len(parts[i]) != n || strings.Trim(parts[i], "0123456789abcdef") != "" {
			return "", false
		}
	}
	return strings.Join(parts, ""), true
}
