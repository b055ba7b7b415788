package report

import (
	"bytes"
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/parse"
)

// Redaction, for reports that leave the company (Options.Redact).
//
// What is replaced, with placeholders numbered in order of first appearance and so the same in
// every format and every place of one report:
//
//   - hostnames: each host's name as the user gave it (without user@ and :port) and the
//     hostname its probe reported, FQDN and first label alike, become host-N; the domain of
//     an FQDN becomes domain-N, so other names in that domain keep only their first label;
//   - user names: user@ in host names, the probe's user, every process's user, and NAME in
//     /home/NAME and /Users/NAME anywhere, become user-N (so /home/alice/x becomes
//     /home/user-1/x). root and nobody are roles, not people, and stay, as does /root;
//   - IP addresses, IPv4 and IPv6, anywhere in any string, become ip-N; loopback and
//     unspecified addresses (127.0.0.1, 0.0.0.0, ::1, ::) identify nothing and stay.
//
// A name is replaced wherever it appears as a whole word (case-insensitively, between
// characters other than letters, digits and _), in every string of every host: argv, cwd,
// paths, unit names, messages, findings, errors. Raw captures are left out (set to nil): they
// are the probe's output in formats redaction cannot promise to understand fully. Stable
// identifiers the report itself defines (finding codes, kinds, phases) are not touched.
//
// Redaction works on deep copies; the caller's hosts are never changed. The mapping from
// placeholders back to names is not kept anywhere.

// redact returns redacted deep copies of hosts.
func redact(hosts []Host) []Host {
	r := &redactor{names: map[string]string{}, ips: map[netip.Addr]string{}}
	for _, h := range hosts {
		r.collect(h)
	}
	return rewriteValue(hosts, rewriter(r))
}

type redactor struct {
	names              map[string]string // lower-case name -> placeholder
	maxName            int               // the longest key of names
	hosts, users, doms int
	ips                map[netip.Addr]string
	// odd are user names that are not words (j$doe, "j doe"): replaced exactly, anywhere.
	odd [][2]string
}

// collect registers the names one host brings, in a fixed order so numbering is stable.
func (r *redactor) collect(h Host) {
	user, host := splitLabel(h.Name)
	r.addHost(host)
	r.addUser(user)
	if s := h.Snapshot; s != nil {
		r.addHost(s.Host.Hostname)
		r.addUser(s.Host.User)
		for _, p := range s.Processes {
			r.addUser(p.User)
		}
	}
	for _, p := range h.Result.Processes {
		r.addUser(p.User)
	}
	if s := h.Scheduler; s != nil {
		r.addUser(s.ReasonUser)
	}
	strs(reflect.ValueOf(h), func(s string) {
		for _, m := range homeDir.FindAllStringSubmatch(s, -1) {
			r.addUser(strings.TrimRight(m[1], ".-"))
		}
	})
}

// homeDir finds the user name in a path under a home directory.
var homeDir = regexp.MustCompile(`/(?:home|Users)/([A-Za-z0-9_][A-Za-z0-9_.-]*)`)

// splitLabel takes a host as the user named it, [user@]host[:port] or [user@][v6]:port, apart.
func splitLabel(label string) (user, host string) {
	if i := strings.LastIndexByte(label, '@'); i >= 0 {
		user, label = label[:i], label[i+1:]
	}
	if strings.HasPrefix(label, "[") {
		if i := strings.IndexByte(label, ']'); i > 0 {
			return user, label[1:i]
		}
	}
	if strings.Count(label, ":") == 1 {
		label = label[:strings.IndexByte(label, ':')]
	}
	return user, label
}

func (r *redactor) add(name, placeholder string) {
	k := strings.ToLower(name)
	if _, ok := r.names[k]; !ok {
		r.names[k] = placeholder
		r.maxName = max(r.maxName, len(k))
	}
}

func (r *redactor) addHost(name string) {
	name = strings.TrimSuffix(strings.ToLower(name), ".")
	if name == "" || name == "localhost" || !wordName(name) || allDigits(name) {
		return
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return // an address: the IP rule replaces it
	}
	short, domain, _ := strings.Cut(name, ".")
	ph, ok := r.names[short]
	if !ok {
		r.hosts++
		ph = "host-" + strconv.Itoa(r.hosts)
		r.add(short, ph)
	}
	r.add(name, ph)
	if strings.Contains(domain, ".") {
		if _, ok := r.names[domain]; !ok {
			r.doms++
			r.add(domain, "domain-"+strconv.Itoa(r.doms))
		}
	}
}

func (r *redactor) addUser(name string) {
	k := strings.ToLower(name)
	if len(k) < 2 || k == "root" || k == "nobody" || allDigits(k) {
		return
	}
	if !wordName(k) {
		if !slices.ContainsFunc(r.odd, func(o [2]string) bool { return o[0] == name }) {
			r.users++
			r.odd = append(r.odd, [2]string{name, "user-" + strconv.Itoa(r.users)})
		}
		return
	}
	if _, ok := r.names[k]; ok {
		return
	}
	r.users++
	r.add(k, "user-"+strconv.Itoa(r.users))
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isNameByte(c byte) bool { return isWordByte(c) || c == '.' || c == '-' }

// wordName reports whether s can be matched as a name: made of name bytes, starting and
// ending with a word byte. Others (a user name with $ or spaces) are rare enough that they are
// matched as they are, anywhere.
func wordName(s string) bool {
	if s == "" || !isWordByte(s[0]) || !isWordByte(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// span is a part of a string to replace.
type span struct {
	start, end int
	with       string
}

// str redacts one string.
func (r *redactor) str(s string) string {
	for _, o := range r.odd {
		s = strings.ReplaceAll(s, o[0], o[1])
	}
	spans := r.addrSpans(s)
	var b strings.Builder
	next := 0 // index into spans
	changed := false
	for i := 0; i < len(s); {
		if next < len(spans) && spans[next].start == i {
			b.WriteString(spans[next].with)
			i = spans[next].end
			next++
			changed = true
			continue
		}
		limit := len(s)
		if next < len(spans) {
			limit = spans[next].start
		}
		if end, ph, ok := r.nameAt(s, i, limit); ok {
			b.WriteString(ph)
			i = end
			changed = true
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	if !changed {
		return s
	}
	return b.String()
}

// nameAt finds the longest known name that starts at i as a whole word and ends by limit.
func (r *redactor) nameAt(s string, i, limit int) (end int, placeholder string, ok bool) {
	if !isWordByte(s[i]) || i > 0 && isWordByte(s[i-1]) {
		return 0, "", false
	}
	e := i
	for e < limit && e-i < r.maxName && isNameByte(s[e]) {
		e++
	}
	for j := e; j > i; j-- {
		if !isWordByte(s[j-1]) || j < len(s) && isWordByte(s[j]) {
			continue
		}
		if ph, ok := r.names[strings.ToLower(s[i:j])]; ok {
			return j, ph, true
		}
	}
	return 0, "", false
}

var ipv4 = regexp.MustCompile(`[0-9]{1,3}(?:\.[0-9]{1,3}){3}`)

// addrSpans finds the IP addresses in s, in order and not overlapping.
func (r *redactor) addrSpans(s string) []span {
	if !strings.ContainsAny(s, ".:") {
		return nil
	}
	var spans []span
	isHex := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	// IPv6 (and IPv4-mapped): a run of hex digits, colons and dots with two colons or more
	// that netip accepts, not inside a longer word. An address right after a '-' is part of a
	// name (and of our own placeholders: "user-1::0" must not become "user-ip-1").
	for i := 0; i < len(s); {
		c := s[i]
		if !(isHex(c) || c == ':') || i > 0 && (isWordByte(s[i-1]) || s[i-1] == ':' || s[i-1] == '.' || s[i-1] == '-') {
			i++
			continue
		}
		e := i
		for e < len(s) && (isHex(s[e]) || s[e] == ':' || s[e] == '.') {
			e++
		}
		run := strings.TrimSuffix(s[i:e], ".")
		if strings.Count(run, ":") >= 2 && (i+len(run) >= len(s) || !isWordByte(s[i+len(run)])) {
			if a, err := netip.ParseAddr(run); err == nil {
				spans = append(spans, span{i, i + len(run), r.ip(a)})
			}
		}
		i = e
	}
	for _, m := range ipv4.FindAllStringIndex(s, -1) {
		start, end := m[0], m[1]
		if start > 0 && (isWordByte(s[start-1]) || s[start-1] == '.' || s[start-1] == '-') ||
			end < len(s) && (isWordByte(s[end]) || s[end] == '.' && end+1 < len(s) && isWordByte(s[end+1])) {
			continue
		}
		a, ok := parseIPv4(s[start:end])
		if !ok || slices.ContainsFunc(spans, func(sp span) bool { return start < sp.end && sp.start < end }) {
			continue
		}
		spans = append(spans, span{start, end, r.ip(a)})
	}
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	// Loopback and unspecified addresses are kept: they are spans that replace with themselves.
	return slices.DeleteFunc(spans, func(sp span) bool { return sp.with == "" })
}

// parseIPv4 accepts leading zeros, which netip refuses but other tools print.
func parseIPv4(s string) (netip.Addr, bool) {
	var b [4]byte
	for i, part := range strings.Split(s, ".") {
		v, err := strconv.Atoi(part)
		if err != nil || v > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	return netip.AddrFrom4(b), true
}

// ip returns the placeholder for an address, "" for one that identifies nothing.
func (r *redactor) ip(a netip.Addr) string {
	a = a.WithZone("")
	if a.Is4In6() {
		a = a.Unmap()
	}
	if a.IsLoopback() || a.IsUnspecified() {
		return ""
	}
	ph, ok := r.ips[a]
	if !ok {
		ph = "ip-" + strconv.Itoa(len(r.ips)+1)
		r.ips[a] = ph
	}
	return ph
}

// verbatim lists the string fields that hold the report's own stable identifiers, not remote
// text: they are copied unchanged.
var verbatim = map[reflect.Type][]string{
	reflect.TypeFor[diagnose.Finding](): {"Code", "Kind"},
	reflect.TypeFor[diagnose.Reason]():  {"Code", "Note"},
	reflect.TypeFor[diagnose.Action]():  {"Kind"},
	reflect.TypeFor[diagnose.Process](): {"Verdict"},
	reflect.TypeFor[diagnose.Folded]():  {"What"},
	reflect.TypeFor[parse.Note]():       {"Code"},
	reflect.TypeFor[parse.SMIFailure](): {"Kind"},
	reflect.TypeFor[HostError]():        {"Phase", "Kind"},
	reflect.TypeFor[Scheduler]():        {"Name"},
}

// rewriter says what a deep copy (rewrite) does to the strings and raw bytes it copies.
type rewriter interface {
	text(s string) string
	// list rewrites a []string whole: an argv, where one element gives the next its meaning.
	list(ss []string) []string
	// raw rewrites raw output ([]byte); nil drops it.
	raw(b []byte) []byte
}

func (r *redactor) text(s string) string { return r.str(s) }

func (r *redactor) list(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = r.str(s)
	}
	return out
}

// raw drops raw output: it cannot be redacted reliably.
func (r *redactor) raw([]byte) []byte { return nil }

// rewriteValue returns a deep copy of v with every string, string list and byte slice
// rewritten by rw.
func rewriteValue[T any](v T, rw rewriter) T {
	return rewrite(reflect.ValueOf(&v).Elem(), rw).Interface().(T)
}

// rewrite returns a deep copy of v with every string, string list and byte slice rewritten by
// rw. It walks every exported field, so a string field added to a snapshot later is rewritten
// without anyone remembering to; the fields in verbatim are copied as they are. A string list
// or byte slice rw returns unchanged is shared with v, not copied: reports never modify them.
func rewrite(v reflect.Value, rw rewriter) reflect.Value {
	switch v.Kind() {
	case reflect.String:
		out := reflect.New(v.Type()).Elem()
		out.SetString(rw.text(v.String()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(rewrite(v.Elem(), rw))
		return out
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		switch {
		case v.Type().Elem().Kind() == reflect.Uint8:
			b := rw.raw(v.Bytes())
			if b == nil {
				return reflect.Zero(v.Type())
			}
			return reflect.ValueOf(b).Convert(v.Type())
		case v.Type().Elem().Kind() == reflect.String:
			ss := make([]string, v.Len())
			for i := range ss {
				ss[i] = v.Index(i).String()
			}
			return reflect.ValueOf(rw.list(ss)).Convert(v.Type())
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			out.Index(i).Set(rewrite(v.Index(i), rw))
		}
		return out
	case reflect.Array:
		out := reflect.New(v.Type()).Elem()
		for i := range v.Len() {
			out.Index(i).Set(rewrite(v.Index(i), rw))
		}
		return out
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			out.SetMapIndex(rewrite(it.Key(), rw), rewrite(it.Value(), rw))
		}
		return out
	case reflect.Struct:
		return rewriteStruct(v, rw)
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(rewrite(v.Elem(), rw))
		return out
	}
	return v // numbers, bools
}

func rewriteStruct(v reflect.Value, rw rewriter) reflect.Value {
	out := reflect.New(v.Type()).Elem()
	out.Set(v) // unexported fields (a time.Time's) are values with nothing to rewrite
	keep := verbatim[v.Type()]
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() || slices.Contains(keep, f.Name) {
			continue
		}
		out.Field(i).Set(rewrite(v.Field(i), rw))
	}
	return out
}

// textFieldsOf caches textFields: changes visits the same few types many times per host.
var textFieldsOf sync.Map // reflect.Type -> []int

// textFields lists the exported fields of struct type t that can hold text (holdsText), but
// for those verbatim names.
func textFields(t reflect.Type) []int {
	if f, ok := textFieldsOf.Load(t); ok {
		return f.([]int)
	}
	var fields []int
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && !slices.Contains(verbatim[t], f.Name) && holdsText(f.Type, map[reflect.Type]bool{}) {
			fields = append(fields, i)
		}
	}
	textFieldsOf.Store(t, fields)
	return fields
}

// holdsText reports whether a value of type t can hold a string or bytes; seen guards against
// recursive types (taken to hold text).
func holdsText(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		return true
	case reflect.Slice, reflect.Array:
		return t.Elem().Kind() == reflect.Uint8 || holdsText(t.Elem(), seen) // bytes are raw text
	case reflect.Pointer:
		return holdsText(t.Elem(), seen)
	case reflect.Map:
		return holdsText(t.Key(), seen) || holdsText(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && holdsText(f.Type, seen) {
				return true
			}
		}
	}
	return false
}

// changes reports whether rewrite(v, rw) would differ from v, without copying anything.
func changes(v reflect.Value, rw rewriter) bool {
	switch v.Kind() {
	case reflect.String:
		return rw.text(v.String()) != v.String()
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil() && changes(v.Elem(), rw)
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			return false
		}
		switch v.Type().Elem().Kind() {
		case reflect.Uint8:
			return !bytes.Equal(rw.raw(v.Bytes()), v.Bytes())
		case reflect.String:
			ss := make([]string, v.Len())
			for i := range ss {
				ss[i] = v.Index(i).String()
			}
			return !slices.Equal(rw.list(ss), ss)
		}
		for i := range v.Len() {
			if changes(v.Index(i), rw) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if changes(it.Key(), rw) || changes(it.Value(), rw) {
				return true
			}
		}
	case reflect.Struct:
		for _, i := range textFields(v.Type()) {
			if changes(v.Field(i), rw) {
				return true
			}
		}
	}
	return false
}

// strs calls fn with every string reachable from v, in a fixed order (map keys sorted).
func strs(v reflect.Value, fn func(string)) {
	switch v.Kind() {
	case reflect.String:
		fn(v.String())
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			strs(v.Elem(), fn)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			strs(v.Index(i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		for _, k := range keys {
			strs(k, fn)
			strs(v.MapIndex(k), fn)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				strs(v.Field(i), fn)
			}
		}
	}
}
