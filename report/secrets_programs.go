package report

import "strings"

// Credentials that only a program's own syntax announces: a password under a short or
// ambiguous name ("-p" is a port to most programs, a password to sshpass and to `docker
// login`), or a secret with no flag at all (`wandb login KEY`, `aws configure set
// aws_secret_access_key V`). They are all in one table, programs. A program's rules apply from
// the word that names it (its base name, as argv[0] or anywhere later: `sudo sshpass -p PW ssh
// h`, `bash -c "curl -u u:PW ..."`), once its subcommand words have followed (`login`,
// `configure set`), to the end of the argument vector, of the command in text (;, |, &&), or of
// a wrapper's own options.

// progFlag is a program's password option.
type progFlag struct {
	flag     string
	next     bool // the value may be the next word
	attached bool // the value may follow the flag in the same word
	keep     func(v string) int
}

// program is what one program's command line hides.
type program struct {
	names []string
	// sub are the words that bring the rules in, in order (a subcommand: "login"), with
	// anything between them (options, their values).
	sub   []string
	flags []progFlag
	// operand: the first operand after sub is a secret (`wandb login KEY`); an operand that
	// holds '=' is not (vault's `login -method=userpass username=u`), nor a value of one of
	// valueOpts (`wandb login --host URL KEY`).
	operand   bool
	valueOpts []string
	// setting: in NAME VALUE operands, VALUE is a secret when NAME names a credential (`aws
	// configure set aws_secret_access_key V`, `git config user.password V`).
	setting bool
	// wrapper: the program runs another command after its own options, where its rules end.
	wrapper bool
}

func keepNone(string) int { return 0 }

// keepUser keeps "user:" of user:password; a value with no ':' is a user alone.
func keepUser(v string) int { return keepUntil(v, ':') }

// keepUserPct keeps "user%" of Samba's user%password.
func keepUserPct(v string) int { return keepUntil(v, '%') }

// keepKey keeps "key=" of kubectl's --from-literal=key=value.
func keepKey(v string) int { return keepUntil(v, '=') }

func keepUntil(v string, sep byte) int {
	if i := strings.IndexByte(v, sep); i >= 0 {
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

// keepCookieFile keeps curl's -b FILE: a value without '=' names a cookie file (curl's own
// rule), one with '=' is the cookies.
func keepCookieFile(v string) int {
	if strings.Contains(v, "=") {
		return 0
	}
	return len(v)
}

// pw is a password option whose value is the next word or attached; pwNext one whose value is
// the next word only.
func pw(flag string) progFlag {
	return progFlag{flag: flag, next: true, attached: true, keep: keepNone}
}
func pwNext(flag string) progFlag { return progFlag{flag: flag, next: true, keep: keepNone} }

var loginP = []progFlag{pw("-p")}

// programs is the one table of programs whose command lines hide credentials their own way.
// Credential flags of the general rule (--password, --token, --api-key, ...) need no entry.
var programs = []program{
	{names: []string{"sshpass"}, flags: []progFlag{pw("-p")}, wrapper: true},
	// -p NAME names a database: attached only.
	{names: []string{"mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mariadb", "mariadb-dump"},
		flags: []progFlag{{flag: "-p", attached: true, keep: keepNone}}},
	{names: []string{"redis-cli", "valkey-cli"}, flags: []progFlag{pwNext("-a"), pwNext("--pass")}},
	{names: []string{"curl"}, flags: []progFlag{{flag: "-u", next: true, attached: true, keep: keepUser},
		{flag: "--user", next: true, keep: keepUser}, {flag: "-U", next: true, attached: true, keep: keepUser},
		{flag: "--proxy-user", next: true, keep: keepUser},
		{flag: "-b", next: true, attached: true, keep: keepCookieFile}, {flag: "--cookie", next: true, keep: keepCookieFile}}},
	{names: []string{"openssl"}, flags: []progFlag{{flag: "-pass", next: true, keep: keepPassSource},
		{flag: "-passin", next: true, keep: keepPassSource}, {flag: "-passout", next: true, keep: keepPassSource}, pwNext("-k")}},
	// Registries and clouds: `docker login -u U -p PW`, `az login -u U -p PW`.
	{names: []string{"docker", "podman", "nerdctl", "buildah", "skopeo", "oras", "oc", "az", "cf"}, sub: []string{"login"}, flags: loginP},
	{names: []string{"helm"}, sub: []string{"registry", "login"}, flags: loginP},
	{names: []string{"crane"}, sub: []string{"auth", "login"}, flags: loginP},
	{names: []string{"twine"}, sub: []string{"upload"}, flags: loginP},
	{names: []string{"mongosh", "mongo", "mongodump", "mongorestore", "mongoexport", "mongoimport", "mongostat", "mongotop", "mongofiles"},
		flags: []progFlag{pw("-p")}},
	{names: []string{"sqlcmd", "bcp"}, flags: []progFlag{pwNext("-P")}},
	{names: []string{"ldapsearch", "ldapadd", "ldapmodify", "ldapdelete", "ldapwhoami", "ldappasswd", "ldapcompare", "ldapmodrdn"},
		flags: []progFlag{pw("-w")}},
	{names: []string{"mosquitto_pub", "mosquitto_sub", "mosquitto_rr"}, flags: []progFlag{pwNext("-P")}},
	{names: []string{"smbclient", "rpcclient", "smbcacls"}, flags: []progFlag{{flag: "-U", next: true, attached: true, keep: keepUserPct},
		{flag: "--user", next: true, keep: keepUserPct}}},
	{names: []string{"keytool"}, flags: []progFlag{pwNext("-storepass"), pwNext("-keypass"), pwNext("-srcstorepass"),
		pwNext("-deststorepass"), pwNext("-srckeypass"), pwNext("-destkeypass")}},
	{names: []string{"zip", "unzip"}, flags: []progFlag{pwNext("-P")}},
	{names: []string{"7z", "7za", "7zz", "unrar", "rar"}, flags: []progFlag{{flag: "-p", attached: true, keep: keepNone}}},
	{names: []string{"kubectl"}, sub: []string{"create", "secret"},
		flags: []progFlag{{flag: "--from-literal=", attached: true, keep: keepKey}}},
	// Positional secrets.
	{names: []string{"wandb"}, sub: []string{"login"}, operand: true, valueOpts: []string{"--host"}},
	{names: []string{"vault", "bao"}, sub: []string{"login"}, operand: true},
	{names: []string{"ngrok"}, setting: true}, // ngrok authtoken T, ngrok config add-authtoken T
	{names: []string{"aws"}, sub: []string{"configure", "set"}, setting: true},
	{names: []string{"git"}, sub: []string{"config"}, setting: true},
	{names: []string{"npm", "pnpm", "yarn"}, sub: []string{"config", "set"}, setting: true},
}

// programByName indexes programs by base name.
var programByName = func() map[string]*program {
	m := map[string]*program{}
	for i := range programs {
		for _, n := range programs[i].names {
			m[n] = &programs[i]
		}
	}
	return m
}()

// progState follows a command line word by word: the program named, and whether its rules
// are in force.
type progState struct {
	prog    *program
	subs    int  // how many of prog.sub have been seen
	operand bool // prog's secret operand has been seen
}

func (ps *progState) active() bool { return ps.prog != nil && ps.subs == len(ps.prog.sub) }

// mask masks w, prev the word before it; it returns w itself when no rule applies.
func (ps *progState) mask(prev, w string) string {
	if !ps.active() {
		return w
	}
	prev = strings.Trim(prev, `'"`)
	core := strings.TrimRight(strings.Trim(w, `'"`), ";)") // a ';' ends the command in text, a ')' a sentence's aside
	for _, r := range ps.prog.flags {
		switch {
		case r.next && prev == r.flag && core != "" && !strings.HasPrefix(core, "-"):
			return maskFrom(w, core, r.keep(core))
		case r.attached && len(core) > len(r.flag) && strings.HasPrefix(core, r.flag) &&
			(!strings.HasPrefix(core, "--") || strings.HasPrefix(r.flag, "--")):
			return maskFrom(w, core, len(r.flag)+r.keep(core[len(r.flag):]))
		}
	}
	if ps.isOperand(prev, core) || ps.prog.setting && isOperandWord(core) && isOperandWord(prev) && isCredentialName(prev) {
		return maskFrom(w, core, 0)
	}
	return w
}

// isOperand reports whether core is the secret operand of a program that takes one.
func (ps *progState) isOperand(prev, core string) bool {
	p := ps.prog
	return p.operand && !ps.operand && isOperandWord(core) && !strings.Contains(core, "=") &&
		!ps.takesValue(prev)
}

func isOperandWord(w string) bool { return w != "" && w[0] != '-' }

// step moves past w: a program's name brings in its rules, once its subcommand words have
// followed; a wrapper's first operand (the command it runs), or in text the end of a command
// (;, |, &&), ends them.
func (ps *progState) step(prev, w string) {
	core := strings.Trim(w, `'"`)
	prevCore := strings.Trim(prev, `'"`)
	name := strings.TrimLeft(core, "([{") // a program named in a sentence's aside: (wandb login KEY)
	if p, ok := programByName[name[strings.LastIndexByte(name, '/')+1:]]; ok {
		*ps = progState{prog: p}
		return
	}
	switch {
	case ps.prog == nil:
	case strings.HasSuffix(core, ";") || core == "|" || core == "||" || core == "&&" || core == "&":
		*ps = progState{}
	case !ps.active():
		// Options may stand before the subcommand (docker --config D login), and in text
		// words of an argument with spaces (a script after -c): only the subcommand's words
		// bring the rules in, and only the end of the command ends the wait for them.
		if core == ps.prog.sub[ps.subs] {
			ps.subs++
		}
	case ps.prog.wrapper && isOperandWord(core) && !ps.takesValue(prevCore):
		*ps = progState{}
	case ps.isOperand(prevCore, core):
		ps.operand = true
	}
}

// takesValue reports whether flag is one of the program's options followed by its value.
func (ps *progState) takesValue(flag string) bool {
	for _, r := range ps.prog.flags {
		if r.next && r.flag == flag {
			return true
		}
	}
	for _, o := range ps.prog.valueOpts {
		if o == flag {
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
