package report

import "strings"

// Credential options of particular programs: a password under a short or ambiguous name that
// the general rules cannot know ("-p" is a port to most programs, a password to sshpass). They
// apply from the word that names the program (its base name, as argv[0] or anywhere later:
// `sudo sshpass -p PW ssh h`, `bash -c "curl -u u:PW ..."`) to the end of the argument vector,
// of the command in text (;, |, &&), or of a wrapper's own options.
//
//   - sshpass -p PW, -pPW;
//   - mysql, mysqldump, mysqladmin, mariadb -pPW (attached only: "-p NAME" names a database);
//   - redis-cli -a PW, --pass PW;
//   - curl -u USER:PW, -uUSER:PW, --user USER:PW, -U and --proxy-user likewise (the user is kept);
//   - openssl -pass, -passin, -passout pass:PW (other forms name a file or a variable), -k PW.
type progFlag struct {
	flag     string
	next     bool // the value may be the next word
	attached bool // the value may follow the flag in the same word
	keep     func(v string) int
}

func keepNone(string) int { return 0 }

// keepUser keeps "user:" of user:password; a value with no ':' is a user alone.
func keepUser(v string) int {
	if i := strings.IndexByte(v, ':'); i >= 0 {
		return i + 1
	}
	return len(v)
}

// keepPassSource keeps openssl's "pass:" before an inline password; env:, file:, fd: and
// stdin name where the password is, not the password.
func keepPassSource(v string) int {
	if strings.HasPrefix(v, "pass:") {
		return len("pass:")
	}
	return len(v)
}

var (
	mysqlFlags = []progFlag{{flag: "-p", attached: true, keep: keepNone}}
	curlFlags  = []progFlag{{flag: "-u", next: true, attached: true, keep: keepUser},
		{flag: "--user", next: true, keep: keepUser}, {flag: "-U", next: true, attached: true, keep: keepUser},
		{flag: "--proxy-user", next: true, keep: keepUser}}
	opensslFlags = []progFlag{{flag: "-pass", next: true, keep: keepPassSource},
		{flag: "-passin", next: true, keep: keepPassSource}, {flag: "-passout", next: true, keep: keepPassSource},
		{flag: "-k", next: true, keep: keepNone}}
)

var programFlags = map[string][]progFlag{
	"sshpass": {{flag: "-p", next: true, attached: true, keep: keepNone}},
	"mysql":   mysqlFlags, "mysqldump": mysqlFlags, "mysqladmin": mysqlFlags, "mariadb": mysqlFlags,
	"redis-cli": {{flag: "-a", next: true, keep: keepNone}, {flag: "--pass", next: true, keep: keepNone}},
	"curl":      curlFlags,
	"openssl":   opensslFlags,
}

// wrappers run another command after their own options: their rules end at its name.
var wrappers = map[string]bool{"sshpass": true}

// progState follows a command line word by word: the rules of the program in force, if any.
type progState struct {
	rules []progFlag
	wraps bool
}

// mask masks w, prev the word before it; it returns w itself when no rule applies.
func (ps *progState) mask(prev, w string) string {
	if ps.rules == nil {
		return w
	}
	prev = strings.Trim(prev, `'"`)
	core := strings.Trim(w, `'"`)
	for _, r := range ps.rules {
		switch {
		case r.next && prev == r.flag && core != "" && !strings.HasPrefix(core, "-"):
			return maskFrom(w, core, r.keep(core))
		case r.attached && len(core) > len(r.flag) && strings.HasPrefix(core, r.flag) && !strings.HasPrefix(core, "--"):
			return maskFrom(w, core, len(r.flag)+r.keep(core[len(r.flag):]))
		}
	}
	return w
}

// step moves past w: a program's name brings in its rules; a wrapper's first operand (the
// command it runs), or in text the end of a command (;, |, &&), ends them.
func (ps *progState) step(prev, w string) {
	core := strings.Trim(w, `'"`)
	if r, ok := programFlags[core[strings.LastIndexByte(core, '/')+1:]]; ok {
		ps.rules, ps.wraps = r, wrappers[core[strings.LastIndexByte(core, '/')+1:]]
		return
	}
	switch {
	case ps.wraps && core != "" && core[0] != '-' && !ps.takesValue(strings.Trim(prev, `'"`)):
		ps.rules, ps.wraps = nil, false
	case strings.HasSuffix(core, ";") || core == "|" || core == "||" || core == "&&" || core == "&":
		ps.rules, ps.wraps = nil, false
	}
}

// takesValue reports whether flag is one of the rules' options followed by its value.
func (ps *progState) takesValue(flag string) bool {
	for _, r := range ps.rules {
		if r.next && r.flag == flag {
			return true
		}
	}
	return false
}

// maskFrom masks core, a part of w, after its first keep bytes.
func maskFrom(w, core string, keep int) string {
	if keep >= len(core) {
		return w
	}
	at := strings.Index(w, core) + keep
	return w[:at] + secretMask + w[at+len(core)-keep:]
}
