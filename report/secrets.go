package report

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"regexp"
	"slices"
	"strings"
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
//   - "NAME: VALUE" headers with such a NAME, and "Authorization: [Bearer|Basic|Token] VALUE";
//     "Bearer VALUE" anywhere;
//   - the password of a URL's user:password@;
//   - tokens of a well-known shape wherever they stand: Hugging Face (hf_...), GitHub (ghp_...,
//     github_pat_...), OpenAI-style (sk-...), Slack (xox?-...), AWS access key ids (AKIA...).
//
// In a list of strings (an argv) a credential flag masks the whole next element, and a
// flag=VALUE or NAME=VALUE element is masked to its end, spaces and all; in other text a value
// ends at the next space, NUL or line break. The raw capture shown in Markdown is masked the
// same way, its base64 argv lines decoded, masked and encoded again. Captures saved with --save
// are the host's raw output and are not masked.

// secretMask replaces a secret: GitHub Actions' convention, recognizable in any format.
const secretMask = "***"

// credentialWords name a credential, in flags (lower case, -) and variables (upper case, _).
var credentialWords = []string{"api-key", "apikey", "token", "password", "passwd", "secret",
	"secret-key", "access-key", "private-key", "authorization", "credentials"}

// isCredentialName reports whether a flag, variable or header name names a credential.
func isCredentialName(name string) bool {
	n := strings.TrimLeft(name, "-")
	for _, w := range credentialWords {
		if k := len(n) - len(w); k >= 0 && matchesNorm(n[k:], w) && (k == 0 || normByte(n[k-1]) == '-') {
			return true
		}
	}
	return false
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

// knownToken matches credentials by their shape.
var knownToken = regexp.MustCompile(`\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|` +
	`sk-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})`)

// secretHints are what every rule above needs in its text (case-insensitively), by first
// byte: mayHoldSecret lets most strings through untouched without allocating.
var secretHints = [256][]string{
	'k': {"key"}, 't': {"token"}, 'p': {"pass"}, 's': {"secret", "sk-"}, 'a': {"auth", "akia"},
	'b': {"bearer"}, 'c': {"credential"}, ':': {"://"}, 'h': {"hf_"}, 'g': {"gh"}, 'x': {"xox"},
}

// hintPairs marks the first two bytes (lower case) of every hint: most text has few of them.
var hintPairs = func() (p [256][256]bool) {
	for _, hs := range secretHints {
		for _, h := range hs {
			p[h[0]][h[1]] = true
		}
	}
	return p
}()

// mayHoldSecret is a cheap test: false means no rule can match s.
func mayHoldSecret[T ~string | ~[]byte](s T) bool {
	for i := 0; i+1 < len(s); i++ {
		if !hintPairs[lower(s[i])][lower(s[i+1])] {
			continue
		}
		for _, h := range secretHints[lower(s[i])] {
			if hasPrefixFold(s[i:], h) {
				return true
			}
		}
	}
	return false
}

// maskText masks the secrets in free text: a message, an evidence line, one argument.
func maskText(s string) string {
	if !mayHoldSecret(s) {
		return s
	}
	var b strings.Builder
	done := 0        // s[:done] is in b
	pending := false // the previous word announced a secret: this word is one
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
		// A quote around a word does not change what it says: -H 'Bearer x'.
		switch lw := strings.Trim(strings.ToLower(w), `'"`); {
		case pending && lw != "" && !strings.HasPrefix(w, "--") && !authScheme(lw):
			core := strings.Trim(w, `'"`)
			open := strings.Index(w, core)
			m = w[:open] + secretMask + w[open+len(core):]
			pending = false
		default:
			pending = authScheme(lw) && (pending || lw == "bearer") ||
				isCredentialFlag(lw) || strings.HasSuffix(lw, ":") && isCredentialName(strings.TrimSuffix(lw, ":"))
			m = maskWord(w, false)
		}
		if m != w {
			b.WriteString(s[done:i])
			b.WriteString(m)
			done = j
		}
		i = j
	}
	if done == 0 {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
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
	w = maskAssignments(w, whole)
	w = maskURLPassword(w)
	return knownToken.ReplaceAllString(w, secretMask)
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

// maskArgv masks an argument vector: a credential flag's next argument whole, an assignment
// to its end, anything else as text. It returns argv itself when nothing changed.
func maskArgv(argv []string) []string {
	var out []string
	for i, a := range argv {
		m := a
		switch {
		case i > 0 && isCredentialFlag(argv[i-1]) && !strings.HasPrefix(a, "--") && a != "":
			m = secretMask
		case !strings.ContainsAny(a, " \t\n"):
			m = maskWord(a, true)
		default:
			// Text with spaces ("Authorization: Bearer x", a python -c script): its words, then
			// a leading assignment to the end ("PASSWORD=two words").
			m = maskText(maskAssignments(a, true))
		}
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

// maskCapture masks a raw capture line by line; an "argv BASE64" line (the procs section) is
// decoded, masked as an argument vector and encoded again. It returns raw itself when nothing
// changed, having allocated little: most lines hold no hint of a secret.
func maskCapture(raw []byte) []byte {
	var out []byte // nil until the first change
	var dec []byte
	for pos := 0; pos < len(raw); {
		end := len(raw)
		if k := bytes.IndexByte(raw[pos:], '\n'); k >= 0 {
			end = pos + k + 1
		}
		line := raw[pos:end]
		m := line
		if b64, ok := bytes.CutPrefix(line, []byte("argv ")); ok {
			b64 = bytes.TrimSuffix(b64, []byte("\n"))
			var err error
			dec, err = base64.StdEncoding.AppendDecode(dec[:0], b64)
			if err == nil && mayHoldSecret(dec) {
				m = maskArgvLine(line, dec)
			}
		} else if mayHoldSecret(line) {
			if t := maskText(string(line)); t != string(line) {
				m = []byte(t)
			}
		}
		if out == nil && !bytes.Equal(m, line) {
			out = append(make([]byte, 0, len(raw)+64), raw[:pos]...)
		}
		if out != nil {
			out = append(out, m...)
		}
		pos = end
	}
	if out == nil {
		return raw
	}
	return out
}

// maskArgvLine masks the argument vector dec that an "argv BASE64" line encodes.
func maskArgvLine(line, dec []byte) []byte {
	argv := strings.Split(string(dec), "\x00")
	m := maskArgv(argv)
	if slices.Equal(m, argv) {
		return line
	}
	enc := "argv " + base64.StdEncoding.EncodeToString([]byte(strings.Join(m, "\x00")))
	if bytes.HasSuffix(line, []byte("\n")) {
		enc += "\n"
	}
	return []byte(enc)
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
