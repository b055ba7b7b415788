package explain

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// smiForm is one of nvidia-smi's own failure messages.
type smiForm struct {
	variant string
	match   func(l string) (cause string, ok bool)
}

var smiForms = []smiForm{
	{"no-driver", contains("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")},
	{"version-mismatch", contains("Failed to initialize NVML: Driver/library version mismatch")},
	{"version-mismatch", contains("NVRM: API mismatch: the client has the version")},
	{"nvml-init", func(l string) (string, bool) {
		j := strings.Index(l, "Failed to initialize NVML: ")
		if j < 0 || strings.Contains(l, "Driver/library version mismatch") {
			return "", false
		}
		return strings.TrimSpace(l[j+len("Failed to initialize NVML: "):]), true
	}},
	{"gpu-lost", func(l string) (string, bool) {
		return "", strings.Contains(l, "Unable to determine the device handle for GPU") && strings.Contains(l, "GPU is lost")
	}},
	{"device-handle", func(l string) (string, bool) {
		j := strings.Index(l, "Unable to determine the device handle for GPU")
		if j < 0 || strings.Contains(l, "GPU is lost") {
			return "", false
		}
		rest := l[j+len("Unable to determine the device handle for GPU"):]
		if k := strings.Index(rest, ": "); k >= 0 {
			return strings.TrimSpace(rest[k+2:]), true
		}
		return "", true
	}},
	{"no-devices", func(l string) (string, bool) {
		return "", strings.TrimSpace(stripPrefix(l)) == "No devices were found"
	}},
}

// apiVersions reads the kernel log's "NVRM: API mismatch: the client has the version X, but
// NVRM: this kernel module has the version Y." into words.
func apiVersions(text string) string {
	client := versionAfter(text, "the client has the version ")
	module := versionAfter(text, "this kernel module has the version ")
	if client == "" || module == "" {
		return ""
	}
	return "The kernel log says: the library is " + client + ", the loaded kernel module " + module
}

// libraryVersion reads the line nvidia-smi prints after "Driver/library version mismatch",
// "NVML library version: 550.144", into words: it is the version the loaded kernel module
// must have.
func libraryVersion(text string) string {
	v := versionAfter(text, "NVML library version: ")
	if v == "" {
		return ""
	}
	return "nvidia-smi says the NVML library is " + v + ": the loaded kernel module is another version, and must be " + v + " too"
}

// versionNumbers decodes the driver versions text names after each key as numbers: the major
// version ("550" of "550.144") under name+"_major", the rest under name+"_minor" and
// name+"_patch" when present. keyNames alternates key, name.
func versionNumbers(text string, keyNames ...string) []Number {
	var nums []Number
	for k := 0; k+1 < len(keyNames); k += 2 {
		v := versionAfter(text, keyNames[k])
		for p, part := range strings.SplitN(v, ".", 3) {
			n, rest, ok := leadingInt(part)
			if !ok || rest != "" {
				break
			}
			nums = append(nums, Number{Name: keyNames[k+1] + []string{"_major", "_minor", "_patch"}[p], Value: float64(n), Unit: "version"})
		}
	}
	return nums
}

func versionAfter(text, key string) string {
	j := strings.Index(text, key)
	if j < 0 {
		return ""
	}
	v := text[j+len(key):]
	k := 0
	for k < len(v) && k < 32 && (isDigit(v[k]) || v[k] == '.' || v[k] == '-') {
		k++
	}
	return quote(strings.TrimRight(v[:k], ".-"))
}

func contains(phrase string) func(string) (string, bool) {
	return func(l string) (string, bool) { return "", strings.Contains(l, phrase) }
}

func explainSMI(d *doc) []found {
	type group struct {
		variant, cause, bus string
		nums                []Number
		lines               lineSet
	}
	var groups []*group
	byKey := map[string]*group{}
	for i, l := range d.lines {
		for _, f := range smiForms {
			cause, ok := f.match(l)
			if !ok {
				continue
			}
			bus := busAfter(l, "device handle for GPU ")
			used := []int{i}
			var nums []Number
			if j := strings.Index(l, "NVRM: API mismatch: "); j >= 0 {
				var text string
				text, used = d.window(i, j, []string{"NVRM: this kernel module", "this kernel module"}, "API mismatch")
				cause = apiVersions(text)
				nums = versionNumbers(text, "the client has the version ", "library_version", "this kernel module has the version ", "module_version")
			}
			if j := strings.Index(l, "Driver/library version mismatch"); j >= 0 {
				var text string
				text, used = d.window(i, j, []string{"NVML library version"}, "Failed to initialize NVML")
				cause = libraryVersion(text)
				nums = versionNumbers(text, "NVML library version: ", "library_version")
			}
			key := f.variant + "|" + bus + "|" + cause
			g := byKey[key]
			if g == nil {
				if len(groups) >= maxPerFamily {
					break
				}
				g = &group{variant: f.variant, cause: quote(clip(cause, 200)), bus: bus, nums: nums}
				byKey[key] = g
				groups = append(groups, g)
			}
			for _, u := range used {
				g.lines.add(u)
			}
			break
		}
	}
	out := make([]found, 0, len(groups))
	for _, g := range groups {
		ex := smiExplanation(g.variant, g.cause, g.bus)
		ex.Numbers = g.nums
		ex.Lines, ex.MoreLines = g.lines.quoted(d), g.lines.more
		out = append(out, found{first: g.lines.first(), ex: ex})
	}
	return out
}

// busAfter reads a PCI bus id ("0000:02:00.0") that follows key in l.
func busAfter(l, key string) string {
	j := strings.Index(l, key)
	if j < 0 {
		return ""
	}
	s := l[j+len(key):]
	k := 0
	for k < len(s) && k < 24 && (isDigit(s[k]) || isHex(s[k]) || s[k] == ':' || s[k] == '.') {
		k++
	}
	return strings.TrimRight(s[:k], ":.")
}

func isHex(c byte) bool { return c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func smiExplanation(variant, cause, bus string) Explanation {
	ex := Explanation{Family: FamilySMIFailed, Variant: variant, BusID: bus}
	gpu := "a GPU"
	if bus != "" {
		gpu = "GPU " + bus
	}
	switch variant {
	case "no-driver":
		ex.Title = "nvidia-smi cannot reach the NVIDIA driver"
		ex.Meaning = "nvidia-smi could not talk to the NVIDIA kernel driver: the driver is not loaded. Usual causes: " +
			"the kernel was updated and the driver module was not built for it (DKMS), the module failed to load " +
			"(the kernel log says why, e.g. another driver such as nouveau holds the GPUs), or, in a container, the " +
			"GPUs and driver were not passed in."
		ex.Next = []string{
			"lsmod | grep nvidia   # on HOST: is the module loaded?",
			"dmesg -T | grep -i -e nvrm -e nvidia",
			"uname -r; dkms status   # a driver module built for the running kernel?",
		}
	case "version-mismatch":
		ex.Title = "NVIDIA driver library and kernel module versions differ"
		ex.Meaning = "The NVIDIA user-space library (NVML) and the loaded kernel module are of different versions. " +
			"Almost always the driver package was upgraded (often by unattended upgrades) while the old kernel module " +
			"stayed loaded. New GPU programs fail until the two match again."
		if cause != "" {
			ex.Meaning += " " + cause + "."
		}
		ex.Next = []string{
			"cat /proc/driver/nvidia/version   # on HOST: the version of the loaded kernel module",
			"gputriage HOST   # what still runs on the GPUs before you restart anything",
			"# then reboot HOST, or stop every GPU process and reload the nvidia kernel modules",
		}
	case "nvml-init":
		ex.Title = "nvidia-smi could not initialize NVML"
		ex.Meaning = "nvidia-smi could not initialize the NVIDIA management library: " + orUnknown(cause) + ". " +
			"In a container this usually means the GPU devices or driver libraries were not passed in correctly; on a " +
			"host, the kernel log says more."
		ex.Next = []string{
			"dmesg -T | grep -i -e nvrm -e nvidia   # on HOST",
			"ls -l /dev/nvidia*   # the device files the library opens",
		}
	case "gpu-lost":
		ex.Title = "A GPU is lost: the driver can no longer reach it"
		ex.Meaning = "The driver lost " + gpu + ": it stopped answering on the PCIe bus (the kernel log usually shows " +
			"Xid 79, \"GPU has fallen off the bus\"). nvidia-smi itself says only a reboot brings it back. If it " +
			"happens again, the GPU, its riser or its power supply is failing."
		ex.Next = []string{
			"dmesg -T | grep -i -e xid -e 'fallen off'   # on HOST",
			"# drain HOST, then reboot it",
			"# if it repeats, report the GPU by bus id" + busSuffix(bus) + " for hardware service",
		}
	case "device-handle":
		ex.Title = "nvidia-smi cannot open a GPU"
		ex.Meaning = "nvidia-smi could not open " + gpu + ": " + orUnknown(cause) + ". The driver cannot talk to that " +
			"GPU; the kernel log (Xid lines) usually says why."
		ex.Next = []string{
			"dmesg -T | grep -i xid   # on HOST",
			"nvidia-smi -L   # which GPUs still answer",
			"# drain HOST and reset that GPU or reboot; if it repeats, the GPU needs service",
		}
	case "no-devices":
		ex.Title = "nvidia-smi found no GPU"
		ex.Meaning = "The NVIDIA driver answered but reports no GPU. In a container the GPUs were not passed in " +
			"(docker --gpus, the Kubernetes device plugin); on a host the GPUs are not visible on the PCIe bus, are " +
			"bound to another driver, or fell off the bus."
		ex.Next = []string{
			"lspci -nnk | grep -i -A3 nvidia   # on HOST: are the GPUs there, and which driver has them?",
			"dmesg -T | grep -i -e nvrm -e xid",
		}
	}
	return ex
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func busSuffix(bus string) string {
	if bus == "" {
		return ""
	}
	return " (" + bus + ")"
}

// explainNVRMProbe recognizes the kernel log of an NVIDIA module that loaded but did not take
// the GPUs because another driver (nouveau, ...) already had them.
func explainNVRMProbe(d *doc) []found {
	var lines lineSet
	hit := false
	devices := -1
	for i, l := range d.lines {
		switch {
		case strings.Contains(l, "NVRM: No NVIDIA graphics adapter probed"):
			hit = true
		case strings.Contains(l, "NVRM: The NVIDIA probe routine was not called for "):
			hit = true
			if n, _, ok := leadingInt(l[strings.Index(l, "was not called for ")+len("was not called for "):]); ok {
				devices = n
			}
		case strings.Contains(l, "NVRM:") && (strings.Contains(l, "nouveau") || strings.Contains(l, "obtained ownership of the NVIDIA device") ||
			strings.Contains(l, "conflicting kernel module") || strings.Contains(l, "This can occur when a driver such as")):
		default:
			continue
		}
		lines.add(i)
	}
	if !hit {
		return nil
	}
	ex := Explanation{
		Family:    FamilyNVRMProbe,
		Title:     "The NVIDIA driver did not take the GPUs: another driver holds them",
		Lines:     lines.quoted(d),
		MoreLines: lines.more,
		Meaning: "The NVIDIA kernel module loaded but did not bind to the GPUs, because another driver (nouveau, " +
			"the open-source one, in most cases) had claimed them first. Until that driver is kept from loading, " +
			"nvidia-smi and CUDA see no GPU.",
		Next: []string{
			"lspci -nnk | grep -i -A3 nvidia   # on HOST: 'Kernel driver in use' for each GPU",
			"lsmod | grep nouveau",
			"# blacklist nouveau (a file in /etc/modprobe.d with 'blacklist nouveau' and 'options nouveau modeset=0'), rebuild the initramfs, reboot",
		},
	}
	if devices >= 0 {
		ex.Meaning += fmt.Sprintf(" The driver names %d device(s) it was not given.", devices)
		ex.Numbers = []Number{{Name: "devices_not_probed", Value: float64(devices), Unit: "count"}}
	}
	return []found{{first: lines.first(), ex: ex}}
}

// xidMeanings holds only what NVIDIA's own documents say (the Xid catalog at
// docs.nvidia.com/deploy/xid-errors, the Dynamic Page Retirement guide, the Health Validation
// check list and the GPU Operational Events notes). Other Xids are shown with the driver's own
// text from the log line, not with a meaning from elsewhere.
var xidMeanings = map[int]string{
	8:  "GPU stopped processing",
	11: "invalid or corrupted push buffer stream",
	13: "Graphics Engine Exception",
	46: "GPU stopped processing",
	48: "double bit ECC error (DBE): an uncorrectable memory error was detected",
	63: "ECC page retirement: a page was retired (takes effect when the driver is reloaded)",
	64: "ECC page retirement failed: the driver could not retire a page",
	79: "GPU has fallen off the bus",
}

type xidStat struct {
	num     int
	count   int
	buses   []string
	names   []string
	pids    []int
	text    string // the driver's own words on the first line
	firstAt int
}

// xidLine reads what follows "NVRM: Xid ": an optional "(PCI:BUS)", then the Xid number and
// the rest of the line, which is empty or starts with a comma.
func xidLine(s string) (bus string, num int, rest string, ok bool) {
	if strings.HasPrefix(s, "(") {
		k := strings.IndexByte(clip(s, 64), ')')
		if k < 0 {
			return "", 0, "", false
		}
		bus = strings.TrimPrefix(s[1:k], "PCI:")
		s = s[k+1:]
	}
	num, rest, ok = leadingInt(strings.TrimLeft(s, ": "))
	if !ok || (rest != "" && rest[0] != ',') {
		return "", 0, "", false
	}
	return bus, num, rest, true
}

// addFields takes the "pid=N, name=X, " fields that lead an Xid line's text, then keeps the
// text of the first line of this Xid.
func (st *xidStat) addFields(text string) {
	for _, key := range []string{"pid=", "name="} {
		if strings.HasPrefix(text, key) {
			v, r := text[len(key):], ""
			if k := strings.Index(v, ", "); k >= 0 {
				v, r = v[:k], v[k+2:]
			}
			if key == "name=" && len(st.names) < 8 && !slices.Contains(st.names, v) {
				st.names = append(st.names, quote(clip(v, 64)))
			}
			if pid, rest, ok := leadingInt(v); key == "pid=" && ok && rest == "" && len(st.pids) < 8 && !slices.Contains(st.pids, pid) {
				st.pids = append(st.pids, pid)
			}
			text = r
		}
	}
	if st.text == "" {
		st.text = quote(clip(text, 240))
	}
}

// words says one Xid for people, and whether its meaning is known.
func (st *xidStat) words() (string, bool) {
	p := fmt.Sprintf("Xid %d (%d×", st.num, st.count)
	if len(st.buses) > 0 {
		p += " on " + strings.Join(st.buses, ", ")
	}
	if len(st.names) > 0 {
		p += ", by " + strings.Join(st.names, ", ")
	}
	if len(st.pids) > 0 {
		p += ", PID " + strings.Trim(fmt.Sprint(st.pids), "[]")
	}
	p += ")"
	m, known := xidMeanings[st.num]
	if known {
		p += ": " + m + " (NVIDIA)"
	}
	if st.text != "" {
		p += "; the driver says: \"" + st.text + "\""
	}
	return p, known
}

// explainXid recognizes NVRM Xid lines from the kernel log:
//
//	NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting ...
//	NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 ...
//
// scanXid gathers the Xid lines of d, per Xid number in the order they first appear, with the
// lines that quote them.
func scanXid(d *doc) (all []*xidStat, lines lineSet) {
	stats := map[int]*xidStat{}
	total := 0
	for i, l := range d.lines {
		j := strings.Index(l, "NVRM: Xid ")
		if j < 0 {
			if strings.Contains(l, "NVRM:") && strings.Contains(l, "needs to be reset") && total > 0 {
				lines.add(i)
			}
			continue
		}
		bus, num, rest, ok := xidLine(l[j+len("NVRM: Xid "):])
		if !ok {
			continue
		}
		st := stats[num]
		if st == nil {
			if len(stats) >= 64 {
				continue
			}
			st = &xidStat{num: num, firstAt: i}
			stats[num] = st
		}
		st.count++
		total++
		lines.add(i)
		if bus != "" && len(st.buses) < 8 && !slices.Contains(st.buses, bus) {
			st.buses = append(st.buses, quote(bus))
		}
		st.addFields(strings.TrimLeft(rest, ", "))
	}
	all = make([]*xidStat, 0, len(stats))
	for _, st := range stats {
		all = append(all, st)
	}
	slices.SortFunc(all, func(a, b *xidStat) int { return cmp.Compare(a.firstAt, b.firstAt) })
	return all, lines
}

func explainXid(d *doc) []found {
	all, lines := scanXid(d)
	if len(all) == 0 {
		return nil
	}

	ex := Explanation{
		Family:    FamilyXid,
		Title:     "The NVIDIA driver reported Xid errors",
		Lines:     lines.quoted(d),
		MoreLines: lines.more,
	}
	var parts []string
	var buses []string
	unknown := false
	for _, st := range all {
		p, known := st.words()
		unknown = unknown || !known
		parts = append(parts, p)
		ex.Numbers = append(ex.Numbers, Number{Name: "xid_" + strconv.Itoa(st.num), Value: float64(st.count), Unit: "count"})
		for _, pid := range st.pids {
			ex.Numbers = append(ex.Numbers, Number{Name: "xid_" + strconv.Itoa(st.num) + "_pid", Value: float64(pid), Unit: "pid"})
		}
		for _, b := range st.buses {
			if !slices.Contains(buses, b) {
				buses = append(buses, b)
			}
		}
	}
	if len(buses) == 1 {
		ex.BusID = buses[0]
	}
	ex.Meaning = "Xid messages are the NVIDIA driver's error reports in the kernel log; the number says what kind. " +
		strings.Join(parts, ". ") + "."
	ex.Notes = append(ex.Notes, "The process named on an Xid line is the one that was using the GPU when it happened, "+
		"not necessarily its cause.")
	if unknown {
		ex.Notes = append(ex.Notes, "For Xid numbers shown without a meaning, look them up in NVIDIA's Xid catalog "+
			"(docs.nvidia.com/deploy/xid-errors), which also gives the recommended action for each.")
	}
	ex.Next = []string{
		"dmesg -T | grep -i xid   # on HOST: since when, on which GPUs, how often",
		"gputriage HOST",
		"# check each Xid number's recommended action in NVIDIA's Xid catalog: docs.nvidia.com/deploy/xid-errors",
	}
	return []found{{first: lines.first(), ex: ex}}
}
