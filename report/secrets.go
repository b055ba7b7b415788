package report

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"github.com/gputriage/gputriage/parse"
)

// Secret masking, on by default in every format (Options.ShowSecrets turns it off; Redact
// always masks). Model servers are started with credentials on their command lines, and a
// report pasted into a ticket must not carry them. What is masked, its value replaced by
// secretMask:
//
//   - the value of a credential flag, "--api-key VALUE" (the next argument, unless it starts
//     with "--") and "--api-key=VALUE": a flag whose name, lower-cased with _ read as -, is one
//     of credentialWords or ends in "-" and one of them (--hf-token, --auth-token,
//     --access-token, --admin-api-key, --db-password, --client-secret, ...);
//   - NAME=VALUE where NAME (upper-cased) is one of those words or ends in "_" and one of them
//     (HF_TOKEN=, OPENAI_API_KEY=, AWS_SECRET_ACCESS_KEY=, DB_PASSWORD=, also in a URL's query);
//   - "NAME": VALUE and 'NAME': VALUE with such a NAME (JSON, Python's dict repr);
//   - "NAME: VALUE" and "NAME:VALUE" headers with such a NAME or a cookie's, in any case,
//     alone or after '=' or a quote (--header=, http.extraheader=), past a scheme
//     ("Authorization: Bearer VALUE"); "Bearer VALUE" anywhere (headerSecret);
//   - the password of a URL's user:password@;
//   - tokens of a well-known shape wherever they stand (knownToken);
//   - what the programs table says a program's command line hides: short password options,
//     login subcommands' -p, positional secrets, NAME VALUE settings (secrets_programs.go).
//
// In a list of strings (an argv) a credential flag masks the whole next element, and a
// flag=VALUE or NAME=VALUE element is masked to its end, spaces and all; in other text a value
// ends at the next space, NUL or line break. The raw capture shown in Markdown is masked the
// same way, its base64 argv fields and base64 sections decoded, masked and encoded again
// (see maskCapture). Captures saved with --save are the host's raw output and are not masked.

// secretMask replaces a secret: GitHub Actions' convention, recognizable in any format.
const secretMask = "***"

// credentialWords name a credential, in flags (lower case, -) and variables (upper case, _).
var credentialWords = []string{"api-key", "apikey", "token", "password", "passwd", "secret",
	"secret-key", "access-key", "private-key", "authorization", "credentials",
	"key", "pass", "auth", "jwt", "authtoken", "pgpassword", "mysql-pwd"}

// isHeaderName reports whether NAME in "NAME: VALUE" names a credential: a credential name,
// or a cookie (Cookie, Set-Cookie), whose values are sessions.
func isHeaderName(name string) bool {
	return isCredentialName(name) || isCredentialNameIn(name, "cookie")
}

// isCredentialName reports whether a flag, variable or header name names a credential.
func isCredentialName(name string) bool {
	for _, w := range credentialWords {
		if isCredentialNameIn(name, w) {
			return true
		}
	}
	return false
}

// isCredentialNameIn reports whether a name (leading dashes aside) is w, or ends in "-" and w.
func isCredentialNameIn(name, w string) bool {
	n := strings.TrimLeft(name, "-")
	k := len(n) - len(w)
	return k >= 0 && matchesNorm(n[k:], w) && (k == 0 || normByte(n[k-1]) == '-')
}

// normByte reads a name byte as credentialWords spell it: lower case, with _ and . as -.
func normByte(c byte) byte {
	if c == '_' || c == '.' {
		return '-'
	}
	return lower(c)
}

func matchesNorm(s, w string) bool {
	for i := 0; i < len(w); i++ {
		if normByte(s[i]) != w[i] {
			return false
		}
	}
	return true
}

// isCredentialFlag reports whether an argument is a credential flag that takes its value as
// the next argument: "--api-key", "-token".
func isCredentialFlag(arg string) bool {
	return strings.HasPrefix(arg, "-") && !strings.Contains(arg, "=") && nameBytes(arg) && isCredentialName(arg)
}

func nameBytes(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// knownToken matches credentials by their shape: tokens with a prefix of their own, the
// prefixes taken from gitleaks' rule set (v8.30.1), for the services a GPU host's command
// lines and logs meet (model hubs, forges, clouds, registries, AI APIs, observability). Its
// detector itself is not linked: it adds 4.1 MB (+32%) to the binary and 30-90 ms to every
// start, to mask what a prefix finds in microseconds (see TestTokenShapes, BenchmarkMask64K).
var knownToken = regexp.MustCompile(`\b(?:hf_[A-Za-z0-9]{20,}|api_org_[A-Za-z]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|` +
	`sk-[A-Za-z0-9_-]{20,}|(?:sk|rk)_(?:test|live|prod)_[A-Za-z0-9]{10,}|xox[abprs]-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,}|` +
	`(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}|nvapi-[A-Za-z0-9_-]{20,}|` +
	`gl(?:pat|dt|rt|ptt|ft|imt|agent|oas|soat)-[A-Za-z0-9_-]{20,}|gl(?:sa|c)_[A-Za-z0-9_+/]{32,}={0,3}|` +
	`npm_[A-Za-z0-9]{36}|pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{20,}|dapi[a-f0-9]{32}|dop_v1_[a-f0-9]{64}|pplx-[A-Za-z0-9]{40,}|` +
	`pul-[a-f0-9]{40}|lin_api_[A-Za-z0-9]{40}|shpat_[a-fA-F0-9]{32}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}|` +
	`dp\.pt\.[A-Za-z0-9]{40,}|AGE-SECRET-KEY-1[0-9A-Z]{58}|` +
	`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)`)

// secretHint is a piece of text a rule needs: anywhere, or at the start of a word (a token's
// prefix, which its expression wants after \b), or as a whole word (a program's name: a
// "docker-ID.scope" names no program).
type secretHint struct {
	s     string
	whole bool
}

// hintTable holds hints by first byte (lower case), and marks the first two bytes of each:
// most text has few of them.
type hintTable struct {
	by    [256][]secretHint
	pairs [256][256]bool
}

func (t *hintTable) add(h secretHint) {
	t.by[lower(h.s[0])] = append(t.by[lower(h.s[0])], h)
	t.pairs[lower(h.s[0])][lower(h.s[1])] = true
}

// anywhereHints and wordHints are what every rule above needs in its text
// (case-insensitively): mayHoldSecret lets most strings through untouched without
// allocating. wordHints are tried only at the start of a word: the prefixes of token shapes,
// and the names of the programs table.
var anywhereHints, wordHints = func() (any, word *hintTable) {
	any, word = &hintTable{}, &hintTable{}
	for _, s := range []string{"key", "token", "pass", "secret", "sk-", "auth", "akia", "bearer", "credential",
		"cookie", "_pwd", "://", "hf_", "gh", "glpat-", "xox", "nvapi-", "eyj", "jwt"} {
		any.add(secretHint{s: s})
	}
	for _, s := range []string{"github_pat_", "api_org_", "sk_", "rk_", "xapp-", "a3t", "asia", "abia", "acca", "aiza",
		"gldt-", "glrt-", "glptt-", "glft-", "glimt-", "glagent-", "gloas-", "glsoat-", "glsa_", "glc_", "npm_", "pypi-",
		"dapi", "dop_v1_", "pplx-", "pul-", "lin_api_", "shpat_", "sg.", "dp.pt.", "age-secret-key-"} {
		word.add(secretHint{s: s})
	}
	for n := range programByName {
		word.add(secretHint{s: n, whole: true})
	}
	return any, word
}()

// mayHoldSecret is a cheap test: false means no rule can match s.
func mayHoldSecret[T ~string | ~[]byte](s T) bool {
	for i := 0; i+1 < len(s); i++ {
		a, b := lower(s[i]), lower(s[i+1])
		if anywhereHints.pairs[a][b] && hintAt(s, i, anywhereHints.by[a]) {
			return true
		}
		if wordHints.pairs[a][b] && (i == 0 || !isNameByte(s[i-1])) && hintAt(s, i, wordHints.by[a]) {
			return true
		}
	}
	return false
}

// hintAt reports whether one of hints starts at s[i:] (a whole one ending a word).
func hintAt[T ~string | ~[]byte](s T, i int, hints []secretHint) bool {
	for _, h := range hints {
		if hasPrefixFold(s[i:], h.s) && (!h.whole || i+len(h.s) == len(s) || !isNameByte(s[i+len(h.s)])) {
			return true
		}
	}
	return false
}

// maskText masks the secrets in free text: a message, an evidence line, one argument.
func maskText(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	s = maskQuotedKeys(s)
	var b strings.Builder
	done := 0        // s[:done] is in b
	pending := false // the previous word announced a secret: this word is one
	var ps progState
	prev := ""
	for i := 0; i < len(s); {
		if isSep(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && !isSep(s[j]) {
			j++
		}
		w, m := s[i:j], s[i:j]
		switch {
		case ps.mask(prev, w) != w:
			m, pending = ps.mask(prev, w), false // the value a credential flag announced, masked
		case pending && isAnnounced(w):
			m, pending = maskAnnounced(w)
		default:
			pending = announces(pending, w)
			m = maskWord(w, false)
		}
		if m != w {
			b.WriteString(s[done:i])
			b.WriteString(m)
			done = j
		}
		ps.step(prev, w)
		prev, i = w, j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// announces reports whether word w announces that the next word is a secret: a credential
// flag, a credential header's name, or an authorization scheme after one (or Bearer anywhere).
// pending says the word before w announced one. A quote around a word does not change what it
// says: -H 'Bearer x'.
func announces(pending bool, w string) bool {
	lw := strings.Trim(strings.ToLower(w), `'"`)
	at, _, header := headerSecret(w)
	return authScheme(lw) && (pending || lw == "bearer") || isCredentialFlag(lw) ||
		header && at == len(strings.TrimRight(w, `'"`))
}

// isAnnounced reports whether w can be the secret a word before it announced: not a flag,
// not a scheme, not masked already.
func isAnnounced(w string) bool {
	lw := strings.Trim(strings.ToLower(w), `'"`)
	return lw != "" && !strings.HasPrefix(w, "--") && !authScheme(lw) && !strings.HasPrefix(lw, secretMask)
}

// maskAnnounced masks w, a secret a word before it announced, its quotes and a ';' that ends
// a command kept; a cookie's value runs on over "; " (Cookie: a=1; b=2): pending says so.
func maskAnnounced(w string) (m string, pending bool) {
	core := strings.TrimRight(strings.Trim(w, `'"`), ";")
	if core == "" {
		return w, false
	}
	return maskFrom(w, core, 0), len(core) < len(strings.Trim(w, `'"`)) && strings.Contains(core, "=")
}

func isSep(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == 0
}

// authScheme reports an HTTP authorization scheme, which the credential follows.
func authScheme(lw string) bool {
	return lw == "bearer" || lw == "basic" || lw == "token" || lw == "digest"
}

// maskWord masks the secrets inside one word: assignments (--flag=V, NAME=V, ?name=V&...),
// a URL's password and tokens of known shape. whole says the word is a whole argument, whose
// assignment value runs to its end.
func maskWord(w string, whole bool) string {
	if !mayHoldSecret(w) {
		return w
	}
	w = maskQuotedKeys(w)
	w = maskHeader(w)
	w = maskAssignments(w, whole)
	w = maskURLPassword(w)
	return knownToken.ReplaceAllString(w, secretMask)
}

// headerSecret finds a credential header in w: "NAME:VALUE" or "NAME: [SCHEME ]VALUE", NAME
// (see isHeaderName) at w's start or after '=' or a quote (-H'X-Api-Key: k', --header=Cookie:
// a=1, http.extraheader=Authorization: Bearer t), in any case. It returns where the value
// starts, past the scheme when one follows: len(w), quotes aside, when w ends before it; and
// the quote before NAME, if any, which ends the value too.
func headerSecret(w string) (at int, quote byte, ok bool) {
	for c := strings.IndexByte(w, ':'); c >= 0; c = nextByte(w, ':', c+1) {
		start := c
		for start > 0 && isNameByte(w[start-1]) {
			start--
		}
		if start > 0 && !strings.ContainsRune(`='"`, rune(w[start-1])) || strings.HasPrefix(w[c:], "://") ||
			!isHeaderName(w[start:c]) {
			continue
		}
		at = skipSpaces(w, c+1)
		e := at
		for e < len(w) && !isSep(w[e]) {
			e++
		}
		if authScheme(strings.ToLower(strings.TrimRight(w[at:e], `'"`))) {
			at = skipSpaces(w, e)
		}
		if start > 0 && w[start-1] != '=' {
			quote = w[start-1]
		}
		return at, quote, true
	}
	return 0, 0, false
}

func nextByte(s string, b byte, from int) int {
	if k := strings.IndexByte(s[from:], b); k >= 0 {
		return from + k
	}
	return -1
}

// maskHeader masks the value of a credential header in w to w's end or to the quote that
// closes it ('Authorization: Bearer t' in a script), a closing quote kept.
func maskHeader(w string) string {
	at, quote, ok := headerSecret(w)
	if !ok {
		return w
	}
	end := len(strings.TrimRight(w, `'"`))
	if k := strings.IndexByte(w[at:], quote); quote != 0 && k >= 0 {
		end = at + k
	}
	if at >= end || w[at:end] == secretMask {
		return w
	}
	return w[:at] + secretMask + w[end:]
}

// maskAssignments masks the value after every "NAME=" whose NAME is a credential. NAME is
// the run of name bytes before the '='; the value ends at '&' (a URL query), ',' or ';', or
// with whole at the end of w.
func maskAssignments(w string, whole bool) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(w); i++ {
		if w[i] != '=' {
			continue
		}
		start := i
		for start > last && isNameByte(w[start-1]) {
			start--
		}
		if !isCredentialName(w[start:i]) {
			continue
		}
		end := len(w)
		if !whole {
			if k := strings.IndexAny(w[i+1:], "&,;"); k >= 0 {
				end = i + 1 + k
			}
		}
		if end == i+1 {
			continue // an empty value hides nothing
		}
		b.WriteString(w[last : i+1])
		b.WriteString(secretMask)
		last, i = end, end-1
	}
	if last == 0 {
		return w
	}
	b.WriteString(w[last:])
	return b.String()
}

// maskQuotedKeys masks the values of quoted credential keys, as JSON and Python's dict repr
// write them: {"api_key": "v"}, {'password':'v'}, "token": v. A quoted value ends at its
// closing quote (JSON's \" escapes skipped), another at ',', '}', ']' or a space.
func maskQuotedKeys(s string) string {
	var b strings.Builder
	done := 0 // s[:done] is in b
	for i := 0; i < len(s); i++ {
		q := s[i]
		if q != '"' && q != '\'' {
			continue
		}
		j := i + 1
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		if j == len(s) || s[j] != q || !isCredentialName(s[i+1:j]) {
			continue
		}
		k := skipSpaces(s, j+1)
		if k == len(s) || s[k] != ':' {
			continue
		}
		from, to := quotedKeyValue(s, skipSpaces(s, k+1))
		if from == to || s[from:to] == secretMask {
			i = j
			continue
		}
		b.WriteString(s[done:from])
		b.WriteString(secretMask)
		done, i = to, to-1
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// quotedKeyValue is where the value at s[k:] lies: inside its quotes, or up to the next ',',
// '}', ']' or space.
func quotedKeyValue(s string, k int) (from, to int) {
	if k < len(s) && (s[k] == '"' || s[k] == '\'') {
		q := s[k]
		for e := k + 1; e < len(s); e++ {
			switch s[e] {
			case '\\':
				e++
			case q:
				return k + 1, e
			}
		}
		return k + 1, len(s)
	}
	e := k
	for e < len(s) && !strings.ContainsRune(",}] \t\n\r\x00", rune(s[e])) {
		e++
	}
	return k, e
}

func skipSpaces(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	return i
}

// maskURLPassword masks the password of every scheme://user:password@host in w.
func maskURLPassword(w string) string {
	var b strings.Builder
	done := 0 // w[:done] is in b
	for from := 0; ; {
		k := strings.Index(w[from:], "://")
		if k < 0 {
			break
		}
		auth := from + k + 3
		end := auth
		for end < len(w) && !strings.ContainsRune("/?#@", rune(w[end])) {
			end++
		}
		from = end
		if end == len(w) || w[end] != '@' {
			continue
		}
		if c := strings.IndexByte(w[auth:end], ':'); c >= 0 && auth+c+1 < end {
			b.WriteString(w[done : auth+c+1])
			b.WriteString(secretMask)
			done = end
		}
	}
	if done == 0 {
		return w
	}
	b.WriteString(w[done:])
	return b.String()
}

// maskArgv masks an argument vector: a program's own credential options (programFlags), a
// credential flag's next argument whole, an assignment to its end, anything else as text. It returns argv itself when nothing changed.
func maskArgv(argv []string) []string {
	var out []string
	var ps progState
	pending := false // the argument before announced a secret: this one is one
	for i, a := range argv {
		m, prev := a, ""
		if i > 0 {
			prev = argv[i-1]
		}
		switch {
		case ps.mask(prev, a) != a:
			m, pending = ps.mask(prev, a), false
		case pending && isAnnounced(a):
			m, pending = maskAnnounced(a)
		case !strings.ContainsAny(a, " \t\n"):
			pending = announces(pending, a)
			m = maskWord(a, true)
		default:
			// Text with spaces: a header's value to the end ("Authorization: Bearer t o k",
			// "Cookie: a=1; b=2"), a leading assignment to the end ("PASSWORD=two words"),
			// then its words (a python -c script).
			m = maskText(maskAssignments(maskHeader(a), true))
			pending = announces(false, a)
		}
		ps.step(prev, a)
		if m != a && out == nil {
			out = append([]string(nil), argv...)
		}
		if out != nil {
			out[i] = m
		}
	}
	if out == nil {
		return argv
	}
	return out
}

// maskCapture masks a raw capture: text line by line; an argv field ("argv BASE64", on its
// own line in version 1, NUL-terminated and wrapped over lines in version 2) decoded, masked
// as an argument vector and encoded again; a section that travels base64-encoded (fds: the
// names of the files processes hold open) decoded, masked as text and encoded again. It
// returns raw itself when nothing changed, having allocated little: most lines hold no hint
// of a secret.
func maskCapture(raw []byte) []byte {
	c := captureMasker{raw: raw}
	for pos := 0; pos < len(raw); {
		end := len(raw)
		if k := bytes.IndexByte(raw[pos:], '\n'); k >= 0 {
			end = pos + k + 1
		}
		line := raw[pos:end]
		if base64SectionBegins(line) {
			c.put(pos, line)
			pos = c.base64Body(end)
			continue
		}
		if at, v2 := argvField(line); at >= 0 {
			c.text(pos, line[:at+len("argv ")])
			pos = c.argv(pos+at+len("argv "), v2)
			continue
		}
		c.text(pos, line)
		pos = end
	}
	if c.out == nil {
		return raw
	}
	return c.out
}

// captureMasker builds a masked copy of raw only once something changes.
type captureMasker struct {
	raw, out, dec []byte
}

// put appends m, the masked form of raw[at:at+len(orig)] (m is orig when unchanged).
func (c *captureMasker) put(at int, m []byte, orig ...[]byte) {
	if c.out == nil && len(orig) > 0 && !bytes.Equal(m, orig[0]) {
		c.out = append(make([]byte, 0, len(c.raw)+64), c.raw[:at]...)
	}
	if c.out != nil {
		c.out = append(c.out, m...)
	}
}

func (c *captureMasker) text(at int, b []byte) {
	if !mayHoldSecret(b) {
		c.put(at, b)
		return
	}
	c.put(at, []byte(maskText(string(b))), b)
}

// argvField finds where an argv field starts in a line: at its start (version 1) or after a
// NUL (version 2, whose value runs to the next NUL); -1 when it has none.
func argvField(line []byte) (at int, v2 bool) {
	if bytes.HasPrefix(line, []byte("argv ")) {
		return 0, false
	}
	if k := bytes.Index(line, []byte("\x00argv ")); k >= 0 {
		return k + 1, true
	}
	return -1, false
}

// argv masks the base64 argv value at raw[from:], which ends at the line's end (version 1) or
// at the next NUL (version 2), and returns where it ended.
func (c *captureMasker) argv(from int, v2 bool) int {
	stop := byte('\n')
	if v2 {
		stop = 0
	}
	end := len(c.raw)
	if k := bytes.IndexByte(c.raw[from:], stop); k >= 0 {
		end = from + k
	}
	val := c.raw[from:end]
	dec, ok := c.decode(val)
	if !ok || !mayHoldSecret(dec) {
		c.put(from, val)
		return end
	}
	argv := strings.Split(string(dec), "\x00")
	m := maskArgv(argv)
	if slices.Equal(m, argv) {
		c.put(from, val)
		return end
	}
	c.put(from, encodeLike(val, []byte(strings.Join(m, "\x00"))), val)
	return end
}

// base64Body masks the body of a base64-encoded section, which runs from raw[from:] to the
// next marker line, and returns where it ended. What does not decode is kept as it is.
func (c *captureMasker) base64Body(from int) int {
	end := len(c.raw)
	if k := bytes.Index(c.raw[from:], []byte("\n@@gputriage ")); k >= 0 {
		end = from + k + 1
	}
	body := c.raw[from:end]
	text := bytes.TrimRight(body, "\r\n")
	whole := (len(text) - bytes.Count(text, []byte("\n")) - bytes.Count(text, []byte("\r"))) / 4 * 4
	cut := len(text) // text[:cut] holds the first whole quanta
	for n, i := 0, 0; i < len(text); i++ {
		if text[i] != '\n' && text[i] != '\r' {
			n++
		}
		if n == whole {
			cut = i + 1
			break
		}
	}
	dec, ok := c.decode(text[:cut])
	if !ok || !mayHoldSecret(dec) {
		c.put(from, body)
		return end
	}
	m := []byte(maskText(string(dec)))
	if bytes.Equal(m, dec) {
		c.put(from, body)
		return end
	}
	masked := append(encodeLike(text[:cut], m), body[cut:]...)
	c.put(from, masked, body)
	return end
}

// decode decodes base64 that may be wrapped over lines.
func (c *captureMasker) decode(b []byte) ([]byte, bool) {
	flat := bytes.ReplaceAll(bytes.ReplaceAll(b, []byte("\n"), nil), []byte("\r"), nil)
	var err error
	c.dec, err = base64.StdEncoding.AppendDecode(c.dec[:0], flat)
	return c.dec, err == nil
}

// encodeLike encodes b in base64 shaped like orig: wrapped in lines of 76 when orig was
// wrapped, ending in a newline when orig did.
func encodeLike(orig, b []byte) []byte {
	enc := base64.StdEncoding.EncodeToString(b)
	if !bytes.Contains(bytes.TrimRight(orig, "\n"), []byte("\n")) {
		if bytes.HasSuffix(orig, []byte("\n")) {
			enc += "\n"
		}
		return []byte(enc)
	}
	var out []byte
	for len(enc) > 76 {
		out = append(append(out, enc[:76]...), '\n')
		enc = enc[76:]
	}
	out = append(out, enc...)
	if bytes.HasSuffix(orig, []byte("\n")) {
		out = append(out, '\n')
	}
	return out
}

// base64SectionBegins reports whether a line is the begin marker of a section that travels
// base64-encoded: "@@gputriage NONCE begin fds limit=...".
func base64SectionBegins(line []byte) bool {
	rest, ok := bytes.CutPrefix(line, []byte("@@gputriage "))
	if !ok {
		return false
	}
	_, rest, _ = bytes.Cut(rest, []byte(" "))
	rest, ok = bytes.CutPrefix(rest, []byte("begin "))
	name, _, _ := bytes.Cut(bytes.TrimRight(rest, "\r\n"), []byte(" "))
	return ok && parse.IsBase64Section(string(name))
}

// secretMasker is the rewriter that masks secrets (see rewrite). Raw captures are masked only
// with captures set: for the formats that show them (Markdown); the others never read them.
type secretMasker struct{ captures bool }

func (secretMasker) text(s string) string      { return maskText(s) }
func (secretMasker) list(ss []string) []string { return maskArgv(ss) }

func (m secretMasker) raw(b []byte) []byte {
	if !m.captures {
		return b
	}
	return maskCapture(b)
}

// maskSecrets returns hosts with their secrets masked: a masked copy of each host that holds
// one, the host itself otherwise. Their raw captures are masked only with captures.
func maskSecrets(hosts []Host, captures bool) []Host {
	m := secretMasker{captures: captures}
	out := hosts
	for i, h := range hosts {
		if !changes(reflect.ValueOf(h), m) {
			continue
		}
		if len(out) > 0 && &out[0] == &hosts[0] {
			out = slices.Clone(hosts)
		}
		out[i] = rewriteValue(h, rewriter(m))
	}
	return out
}

// MaskSecrets masks the credentials in one line of remote text, for messages the CLI prints
// outside a report (a login banner named on stderr).
func MaskSecrets(s string) string { return maskText(s) }

// MaskSecretsIn returns a deep copy of v with the credentials in every string it holds masked,
// as in every report: for host data shown outside one (watch's rounds).
func MaskSecretsIn[T any](v T) T { return rewriteValue(v, rewriter(secretMasker{})) }
