package sshconf

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sshOrSkip finds the OpenSSH client the resolver is compared with. Without
// it the comparison is skipped loudly, except in CI where it must run.
func sshOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("ssh")
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("ssh not found but CI=true: install openssh-client; the ssh -G comparison must run in CI")
	}
	t.Skip("!!! SKIPPING the comparison with OpenSSH's ssh -G: no ssh on PATH (install openssh-client) !!!")
	return ""
}

// oracleEnv is the local identity both ssh and Resolve see. ssh takes ~
// and %d from the password database, not $HOME, so Resolve gets that home.
type oracleEnv struct {
	home, localUser, localHost string
	env                        map[string]string
}

func newOracleEnv(t *testing.T) oracleEnv {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skipf("!!! SKIPPING: no passwd entry for the current user: %v", err)
	}
	hn, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return oracleEnv{home: u.HomeDir, localUser: u.Username, localHost: hn,
		env: map[string]string{"GPUTRIAGE_TEST_KEYDIR": "/srv/keys"}}
}

func (e oracleEnv) options(cfg string) Options {
	return Options{ConfigFile: cfg, Home: e.home, LocalUser: e.localUser, LocalHost: e.localHost,
		Getenv: func(k string) string { return e.env[k] }}
}

// sshG is what `ssh -G` (and, for the expanded identity files, `ssh -v`)
// says about a host.
type sshG struct {
	hostName, user, proxyJump, hostKeyAlias, strict string
	proxyCommand                                    string
	port                                            int
	identities, userKnownHosts, globalKnownHosts    []string
	identitiesOnly                                  bool
	connectTimeout                                  time.Duration
}

type cmdline struct {
	user     string
	port     int
	identity []string
	jump     string
	options  []string // -o
}

func (c cmdline) args() []string {
	var a []string
	if c.user != "" {
		a = append(a, "-l", c.user)
	}
	if c.port != 0 {
		a = append(a, "-p", strconv.Itoa(c.port))
	}
	for _, i := range c.identity {
		a = append(a, "-i", i)
	}
	for _, o := range c.options {
		a = append(a, "-o", o)
	}
	return a
}

// runSSH returns ssh's output; it takes no *testing.T because it runs in
// a goroutine too.
func runSSH(ssh string, e oracleEnv, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ssh, args...)
	cmd.Env = []string{"HOME=" + e.home, "PATH=" + os.Getenv("PATH")}
	for k, v := range e.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = nil
	out, _ := cmd.CombinedOutput() // ssh -v exits non-zero by design
	return string(out)
}

func askSSH(t *testing.T, ssh string, e oracleEnv, cfg, alias string, cl cmdline) sshG {
	t.Helper()
	args := append([]string{"-G", "-F", cfg}, cl.args()...)
	if cl.jump != "" {
		args = append(args, "-J", cl.jump)
	}
	// ssh -G prints identity files unexpanded; ssh -v names them expanded
	// when it loads them, which a ProxyCommand that exits at once reaches
	// without any network. Both run at once to keep the test quick.
	vargs := append([]string{"-v", "-F", cfg, "-o", "ProxyCommand=false", "-o", "BatchMode=yes"}, cl.args()...)
	vout := make(chan string, 1)
	go func() { vout <- runSSH(ssh, e, append(vargs, alias)...) }()
	out := runSSH(ssh, e, append(args, alias)...)
	var g sshG
	seen := false
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		switch k {
		case "hostname":
			g.hostName, seen = v, true
		case "user":
			g.user = v
		case "port":
			g.port, _ = strconv.Atoi(v)
		case "proxyjump":
			g.proxyJump = v
		case "proxycommand":
			g.proxyCommand = v
		case "hostkeyalias":
			g.hostKeyAlias = v
		case "stricthostkeychecking":
			g.strict = map[string]string{"true": "yes", "false": "no"}[v]
			if g.strict == "" {
				g.strict = v
			}
		case "identitiesonly":
			g.identitiesOnly = v == "yes"
		case "connecttimeout":
			if v != "none" {
				n, _ := strconv.Atoi(v)
				g.connectTimeout = time.Duration(n) * time.Second
			}
		case "userknownhostsfile":
			g.userKnownHosts = noneless(strings.Fields(v))
		case "globalknownhostsfile":
			g.globalKnownHosts = noneless(strings.Fields(v))
		}
	}
	if !seen {
		<-vout
		t.Fatalf("ssh -G %s: no hostname in output:\n%s", strings.Join(args, " "), out)
	}
	for _, line := range strings.Split(<-vout, "\n") {
		rest, ok := strings.CutPrefix(line, "debug1: identity file ")
		if !ok {
			continue
		}
		i := strings.LastIndex(rest, " type ")
		if i < 0 {
			continue
		}
		p := rest[:i]
		if n := len(g.identities); n > 0 && p == g.identities[n-1]+"-cert" {
			continue
		}
		g.identities = append(g.identities, p)
	}
	return g
}

func noneless(fs []string) []string {
	var out []string
	for _, f := range fs {
		if !strings.EqualFold(f, "none") {
			out = append(out, f)
		}
	}
	return out
}

// withoutDSA drops id_dsa, which OpenSSH 9.8 removed from its defaults, so
// the comparison holds for older and newer clients alike.
func withoutDSA(ids []string) []string {
	var out []string
	for _, id := range ids {
		if filepath.Base(id) != "id_dsa" {
			out = append(out, id)
		}
	}
	return out
}

func compare(t *testing.T, what string, h Host, g sshG) {
	t.Helper()
	eq := func(field string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s = %#v, ssh says %#v", what, field, got, want)
		}
	}
	eq("hostname", h.HostName, g.hostName)
	eq("port", h.Port, g.port)
	eq("user", h.User, g.user)
	eq("identityfile", withoutDSA(h.IdentityFiles), withoutDSA(noneless(g.identities)))
	eq("identitiesonly", h.IdentitiesOnly, g.identitiesOnly)
	eq("proxyjump", h.ProxyJumpSpec, g.proxyJump)
	eq("proxycommand", h.ProxyCommand, g.proxyCommand)
	eq("userknownhostsfile", h.UserKnownHostsFiles, g.userKnownHosts)
	eq("globalknownhostsfile", h.GlobalKnownHostsFiles, g.globalKnownHosts)
	eq("hostkeyalias", h.HostKeyAlias, g.hostKeyAlias)
	eq("stricthostkeychecking", h.StrictHostKeyChecking, g.strict)
	eq("connecttimeout", h.ConnectTimeout, g.connectTimeout)
}

type sshCase struct {
	name    string
	config  string            // {{dir}} is the test's directory
	files   map[string]string // more files under {{dir}}, e.g. for Include
	aliases []string
	cl      cmdline
	// chains gives, per alias, the hops expected as user@hostname:port in
	// connection order; ssh -G only prints the first level, so the order
	// through a first hop's own ProxyJump is written out by hand.
	chains map[string][]string
}

var sshCases = []sshCase{
	{
		name: "alias with hostname user port identity",
		config: `Host gpu01
    HostName 10.0.0.11
    User ops
    Port 2222
    IdentityFile ~/.ssh/gpu_ed25519
`,
		aliases: []string{"gpu01", "gpu02"},
	},
	{
		name: "several identity files accumulate across blocks, duplicates once",
		config: `Host gpu*
  IdentityFile ~/.ssh/a
  IdentityFile ~/.ssh/b
  IdentitiesOnly yes
Host *
  IdentityFile ~/.ssh/a
  IdentityFile /abs/c
  IdentitiesOnly no
`,
		aliases: []string{"gpu01", "login"},
	},
	{
		name: "tokens",
		config: `Host gpu* GPU*
  HostName %h.cluster.example
  User r%%x
  HostKeyAlias key-%h
  IdentityFile %d/.ssh/%h_%r_%u_%p_%n_%%
  IdentityFile ~/.ssh/%l_%L_%k_%C
  IdentityFile ${GPUTRIAGE_TEST_KEYDIR}/id
  UserKnownHostsFile ~/.ssh/kh_%h %d/kh_%n_%k
`,
		aliases: []string{"gpu07", "GPU08"},
	},
	{
		name: "wildcards and negation",
		config: `Host gpu* !gpu13
  User cluster
Host gpu? login-*
  Port 2200
Host *
  User fallback
`,
		aliases: []string{"gpu01", "gpu13", "gpu1", "gpu", "GPU01", "login-a", "other"},
	},
	{
		name: "first value wins and Host * defaults last",
		config: `Host gpu01
  Port 1001
  ConnectTimeout 5
Host gpu*
  Port 1002
  User gpuuser
  StrictHostKeyChecking accept-new
Host *
  Port 1003
  User everyone
  ConnectTimeout 1m30s
  StrictHostKeyChecking no
`,
		aliases: []string{"gpu01", "gpu02", "elsewhere"},
	},
	{
		name: "include a file and a glob",
		config: `Include {{dir}}/one.conf
Host *
  User last
Include {{dir}}/conf.d/*.conf
`,
		files: map[string]string{
			"one.conf":        "Host a\n  HostName one-a\nHost b\n  Port 2\n",
			"conf.d/10.conf":  "Host b c\n  HostName ten-%h\n  User ten\n",
			"conf.d/20.conf":  "Host c\n  HostName twenty\n  Port 20\n",
			"conf.d/skip.txt": "Host *\n  Port 99\n",
		},
		aliases: []string{"a", "b", "c", "d"},
	},
	{
		name: "include in an inactive block and active state restored after include",
		config: `Host nomatch
  Include {{dir}}/inc.conf
Host x
  Include {{dir}}/inc.conf
  Port 6
  User after
`,
		files:   map[string]string{"inc.conf": "User incuser\nHost zz\n  Port 99\n"},
		aliases: []string{"x", "y"},
	},
	{
		name: "proxyjump single chain none",
		config: `Host bastion
  HostName bastion.example
  User jump
  Port 2022
  ProxyJump none
Host inner
  HostName inner.example
  ProxyJump bastion
Host gpu*
  ProxyJump ops@bastion:2200,inner
Host direct
  ProxyJump none
Host *
  ProxyJump bastion
`,
		aliases: []string{"inner", "gpu01", "direct", "bastion", "other"},
		chains: map[string][]string{
			"inner": {"jump@bastion.example:2022"},
			"gpu01": {"ops@bastion.example:2200", "root@inner.example:22"},
			"other": {"jump@bastion.example:2022"},
		},
	},
	{
		name: "proxyjump of the first hop is followed",
		config: `Host outer
  HostName outer.example
  ProxyJump jumpa
Host jumpa
  HostName a.example
  ProxyJump jumpb
Host jumpb
  HostName b.example
`,
		aliases: []string{"outer"},
		chains: map[string][]string{
			"outer": {"root@b.example:22", "root@a.example:22"},
		},
	},
	{
		name: "proxycommand and proxyjump compete, first wins",
		config: `Host pc
  ProxyCommand nc %h %p
  ProxyJump bastion
Host pcnone
  ProxyCommand none
  ProxyJump bastion
Host pj
  ProxyJump bastion
  ProxyCommand nc %h %p
Host pjnone
  ProxyJump none
  ProxyCommand ssh -W %h:%p bastion
  ProxyJump other
Host pcNONE
  ProxyCommand NONE
  ProxyCommand nc %h %p
Host pcquoted
  ProxyCommand "none"
Host pcraw
  ProxyCommand == sh -c 'exec nc "$1" "$2"'   sh %h  %p # comment kept
Host pcfirst
  ProxyCommand nc %h %p
  ProxyCommand ssh -W %h:%p bastion
`,
		aliases: []string{"pc", "pcnone", "pj", "pjnone", "pcNONE", "pcquoted", "pcraw", "pcfirst"},
		chains:  map[string][]string{"pj": {"root@bastion:22"}},
	},
	{
		name: "a ProxyJump of -J none leaves the config's ProxyCommand",
		config: `Host gpu01
  ProxyCommand nc %h %p
`,
		cl:      cmdline{jump: "none"},
		aliases: []string{"gpu01"},
	},
	{
		name: "-J wins over the config's ProxyCommand",
		config: `Host gpu01
  ProxyCommand nc %h %p
`,
		cl:      cmdline{jump: "hop"},
		aliases: []string{"gpu01"},
		chains:  map[string][]string{"gpu01": {"root@hop:22"}},
	},
	{
		name: "known hosts files and host key alias",
		config: `Host two
  UserKnownHostsFile ~/.ssh/kh1 /etc/gputriage/kh2
  GlobalKnownHostsFile /etc/ssh/cluster_known_hosts
  HostKeyAlias gpu-cluster
Host none
  UserKnownHostsFile none
  GlobalKnownHostsFile none
Host mixed
  HostKeyAlias GPU-Cluster.Example
  UserKnownHostsFile ~/.ssh/kh_%k
Host *
  UserKnownHostsFile ~/.ssh/ignored
`,
		aliases: []string{"two", "none", "other", "mixed"},
	},
	{
		name: "syntax variants",
		config: `# comment
HOST quoted
  hostname=quoted.example
  USER = "some user"
  IdentityFile "~/.ssh/with space"   # trailing comment
  port	2222
  StrictHostKeyChecking=Accept-New
  ConnectTimeout=10s
Host   spaced   other
  IdentityFile ~/.ssh/a\ b
`,
		aliases: []string{"quoted", "spaced"},
	},
	{
		name: "identityfile none, ssh URI jump, Host=",
		config: `Host=eq
  IdentityFile none
  IdentityFile ~/.ssh/after_none
  ProxyJump ssh://ops@bastion:2201
Host noid
  IdentityFile none
`,
		aliases: []string{"eq", "noid"},
		chains:  map[string][]string{"eq": {"ops@bastion:2201"}},
	},
	{
		name: "match criteria",
		config: `Match host foo.*,!bar originalhost Jj user root
  Port 7
Host Jj
  HostName Foo.%h
Match host foo.jj
  User m
Match originalhost jj !localuser nobody-here
  ConnectTimeout 4
Match final
  HostKeyAlias final-alias
Match canonical
  Port 9
Match exec "false"
  User never
Match all
  IdentityFile ~/.ssh/all
`,
		aliases: []string{"Jj", "other"},
	},
	{
		name: "command-line overrides",
		config: `Host gpu01
  HostName 10.0.0.1
  User cfguser
  Port 2222
  IdentityFile ~/.ssh/cfg_key
  ProxyJump cfgjump
`,
		cl:      cmdline{user: "cliuser", port: 2200, identity: []string{"{{dir}}/cli_key"}, jump: "hop1,u@hop2:2"},
		files:   map[string]string{"cli_key": "not a real key\n"},
		aliases: []string{"gpu01"},
		chains: map[string][]string{
			"gpu01": {"root@hop1:22", "u@hop2:2"},
		},
	},
	{
		// -o is read before the config file and the first value wins, -l over
		// a later -o User; jump hops do not inherit the -o options.
		name: "-o options",
		config: `Host gpu01 hop
  HostName 10.0.0.1
  User cfguser
  Port 2222
  IdentityFile ~/.ssh/cfg_key
  StrictHostKeyChecking yes
  ConnectTimeout 30
Host gpu02
  ProxyJump hop
`,
		cl: cmdline{user: "cliuser", options: []string{"User=ouser", "Port 2022", "hostname=10.9.9.9", "Port=1",
			"IdentityFile={{dir}}/o_key", "StrictHostKeyChecking=accept-new", "ConnectTimeout = 7",
			"UserKnownHostsFile={{dir}}/kh1 {{dir}}/kh2", "HostKeyAlias=Alias01", "IdentitiesOnly=yes"}},
		files:   map[string]string{"o_key": "not a real key\n"},
		aliases: []string{"gpu01", "gpu02"},
		chains: map[string][]string{
			"gpu02": {"cfguser@10.0.0.1:2222"},
		},
	},
}

func TestResolveMatchesSSH(t *testing.T) {
	ssh := sshOrSkip(t)
	e := newOracleEnv(t)
	for _, tc := range sshCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			fill := func(s string) string { return strings.ReplaceAll(s, "{{dir}}", dir) }
			for name, body := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(fill(body)), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg := filepath.Join(dir, "config")
			if err := os.WriteFile(cfg, []byte(fill(tc.config)), 0o600); err != nil {
				t.Fatal(err)
			}
			cl := tc.cl
			cl.identity, cl.options = nil, nil
			for _, id := range tc.cl.identity {
				cl.identity = append(cl.identity, fill(id))
			}
			for _, opt := range tc.cl.options {
				cl.options = append(cl.options, fill(opt))
			}
			o := e.options(cfg)
			o.User, o.Port, o.Identity, o.Jump, o.Opts = cl.user, cl.port, cl.identity, cl.jump, cl.options
			shared := NewConfig()
			for _, alias := range tc.aliases {
				h, err := Resolve(alias, o)
				if err != nil {
					t.Fatalf("Resolve(%q): %v", alias, err)
				}
				if hc, err := shared.Resolve(alias, o); err != nil || !reflect.DeepEqual(hc, h) {
					t.Errorf("Config.Resolve(%q) = %+v, %v; Resolve gave %+v", alias, hc, err, h)
				}
				compare(t, alias, h, askSSH(t, ssh, e, cfg, alias, cl))
				checkChain(t, ssh, e, cfg, alias, h, tc.chains[alias])
			}
		})
	}
}

// checkChain compares the resolved chain with the expected one, and each
// hop named in the host's own ProxyJump with ssh -G invoked as ssh invokes
// it for that hop: `ssh -l USER -p PORT [-J EARLIER-HOPS] HOP`.
func checkChain(t *testing.T, ssh string, e oracleEnv, cfg, alias string, h Host, want []string) {
	t.Helper()
	var got []string
	for _, hop := range h.ProxyJump {
		got = append(got, hop.User+"@"+hop.HostName+":"+strconv.Itoa(hop.Port))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: chain %q, want %q", alias, got, want)
	}
	if h.ProxyJumpSpec == "" {
		return
	}
	hops, err := parseJumpSpec(h.ProxyJumpSpec)
	if err != nil {
		t.Fatal(err)
	}
	direct := h.ProxyJump[len(h.ProxyJump)-len(hops):]
	for i, hop := range hops {
		cl := cmdline{user: hop.user, port: hop.port}
		if i > 0 {
			cl.jump = joinJumpSpec(hops[:i])
		}
		g := askSSH(t, ssh, e, cfg, hop.host, cl)
		if i == 0 {
			g.proxyJump = direct[i].ProxyJumpSpec // followed, then flattened
		}
		compare(t, alias+" hop "+hop.host, direct[i], g)
	}
}

// TestNotes: lines that change how ssh would reach a host and that
// gputriage does not act on are named, each once; lines that do not matter to
// a non-interactive command are not, nor unknown keywords IgnoreUnknown names.
func TestNotes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config")
	text := `IgnoreUnknown FrobLocal*,other
Host gpu*
  ProxyCommand ssh -W %h:%p bastion
  ProxyUseFdpass yes
  ControlMaster auto
  ControlPath ~/.ssh/cm-%C
  ControlPersist 10m
  FrobnicateHosts yes
  FrobLocalThing yes
  UseKeychain yes
  AddKeysToAgent yes
  ForwardAgent yes
  SendEnv LANG LC_*
  SetEnv LC_ALL=C.UTF-8
  ServerAliveInterval 30
  CanonicalizeHostname yes
  CertificateFile ~/.ssh/id_ed25519-cert.pub
Match exec "test -e /tmp/x"
  User never
Host quiet
  ProxyCommand none
  Ciphers aes128-ctr
  ForwardAgent no
  ProxyUseFdpass yes
`
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{ConfigFile: cfg, Home: dir, LocalUser: "me"}
	h, err := Resolve("gpu01", o)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"FrobnicateHosts (~/config:8): not an ssh_config keyword gputriage knows; ignored (OpenSSH refuses a file with a keyword it does not know, unless IgnoreUnknown names it)",
		"CanonicalizeHostname (~/config:16): not supported by gputriage; the HostName is used as written",
		"CertificateFile (~/config:17): not supported by gputriage; keys are offered without it",
		"Match exec (~/config:18): not evaluated by gputriage; its block is treated as not matching",
	}
	var got []string
	for _, n := range h.Notes {
		got = append(got, n.String())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Notes:\n got %q\nwant %q", got, want)
	}
	if h.User != "me" {
		t.Errorf("User %q: the Match exec block must not apply", h.User)
	}
	if !h.ProxyUseFdpass || h.ProxyCommandLine != "ssh -W gpu01:22 bastion" {
		t.Errorf("ProxyCommandLine %q, ProxyUseFdpass %v", h.ProxyCommandLine, h.ProxyUseFdpass)
	}
	q, err := Resolve("quiet", o)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Notes) != 1 || q.Notes[0].Keyword != "Match exec" || q.ProxyCommand != "" || q.ProxyUseFdpass {
		t.Errorf("quiet: Notes %q, ProxyCommand %q, fdpass %v; want only the Match exec note: "+
			"ProxyUseFdpass without a ProxyCommand changes nothing", q.Notes, q.ProxyCommand, q.ProxyUseFdpass)
	}
}

func TestResolveErrors(t *testing.T) {
	cases := []struct {
		name, config string
		o            Options
		sentinel     error
		contains     string
	}{
		{"bad port", "Host a\n  Port 0\n", Options{}, ErrConfig, "config line 2: bad port"},
		{"bad port in inactive block", "Host b\n  Port x\n", Options{}, ErrConfig, "line 2"},
		{"open quote", "Host a\n  User \"x\n", Options{}, ErrConfig, "unterminated quote"},
		{"no argument", "Host a\n  User\n", Options{}, ErrConfig, "no argument"},
		{"garbage", "Host a\n  HostName x y\n", Options{}, ErrConfig, "garbage"},
		{"bad strict", "StrictHostKeyChecking maybe\n", Options{}, ErrConfig, "maybe"},
		{"bad time", "ConnectTimeout 5x\n", Options{}, ErrConfig, "5x"},
		{"bad jump", "ProxyJump u@:22\n", Options{}, ErrConfig, "empty host"},
		{"unknown token", "IdentityFile ~/%z\n", Options{}, ErrConfig, "unknown token %z"},
		{"unset env", "IdentityFile ${NOPE}/k\n", Options{}, ErrConfig, "${NOPE}"},
		{"jump loop", "Host a\n  ProxyJump b\nHost b\n  ProxyJump a\n", Options{}, ErrJump, "loop"},
		{"self jump", "Host *\n  ProxyJump a\n", Options{}, ErrJump, "loop"},
		{"bad -J", "", Options{Jump: "a,,b"}, ErrJump, "-J"},
		{"bad -o port", "", Options{Opts: []string{"User=u", "Port=x"}}, ErrConfig, "-o line 2: bad port"},
		{"-o Host", "", Options{Opts: []string{"Host=b"}}, ErrConfig, "Host directive not supported as a command-line option"},
		{"-o Include", "", Options{Opts: []string{"Include /etc/passwd"}}, ErrConfig, "not supported as a command-line option"},
		{"-o Match", "", Options{Opts: []string{"Match all"}}, ErrConfig, "not supported as a command-line option"},
		{"empty -o", "", Options{Opts: []string{" "}}, ErrConfig, "empty option"},
		{"-o newline", "", Options{Opts: []string{"User=a\nPort=2"}}, ErrConfig, "one option per -o"},
		{"-o no value", "", Options{Opts: []string{"User"}}, ErrConfig, "no argument"},
		{"include loop", "Include {{dir}}/config\n", Options{}, ErrConfig, "nested"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := filepath.Join(dir, "config")
			if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(tc.config, "{{dir}}", dir)), 0o600); err != nil {
				t.Fatal(err)
			}
			o := tc.o
			o.ConfigFile, o.Home, o.LocalUser = cfg, dir, "me"
			_, err := Resolve("a", o)
			if !errors.Is(err, tc.sentinel) || !strings.Contains(err.Error(), tc.contains) {
				t.Fatalf("err = %v, want %v containing %q", err, tc.sentinel, tc.contains)
			}
		})
	}
	_, err := Resolve("a", Options{ConfigFile: "/nonexistent/gputriage/config"})
	if !errors.Is(err, ErrConfig) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing -F file: %v", err)
	}
}

// TestDefaultFiles covers what needs a home of its own and so cannot be
// compared with ssh (which takes ~ from the password database): the user
// config under Home, Include relative to ~/.ssh, the system file after it,
// and "none".
func TestDefaultFiles(t *testing.T) {
	home := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".ssh/config"), "Include conf.d/*.conf\nHost gpu01\n  Port 2201\n")
	write(filepath.Join(home, ".ssh/conf.d/a.conf"), "Host gpu*\n  User fromglob\n")
	sys := filepath.Join(home, "etc-ssh_config")
	write(sys, "Host *\n  Port 1\n  User system\n  ConnectTimeout 9\n")
	old := systemConfig
	systemConfig = sys
	defer func() { systemConfig = old }()

	o := Options{Home: home, LocalUser: "me"}
	h, err := Resolve("gpu01", o)
	if err != nil {
		t.Fatal(err)
	}
	if h.User != "fromglob" || h.Port != 2201 || h.ConnectTimeout != 9*time.Second {
		t.Errorf("got user %q port %d timeout %v", h.User, h.Port, h.ConnectTimeout)
	}
	if want := filepath.Join(home, ".ssh/id_rsa"); h.IdentityFiles[0] != want {
		t.Errorf("first default identity %q, want %q", h.IdentityFiles[0], want)
	}
	if want := []string{filepath.Join(home, ".ssh/known_hosts"), filepath.Join(home, ".ssh/known_hosts2"),
		"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}; !reflect.DeepEqual(h.KnownHostsFiles(), want) {
		t.Errorf("known hosts %q, want %q", h.KnownHostsFiles(), want)
	}
	o.ConfigFile = "none"
	h, err = Resolve("gpu01", o)
	if err != nil {
		t.Fatal(err)
	}
	if h.User != "me" || h.Port != 22 || h.HostName != "gpu01" {
		t.Errorf("-F none: %+v", h)
	}
	// A missing ~/.ssh/config is no error.
	if _, err := Resolve("x", Options{Home: filepath.Join(home, "nobody")}); err != nil {
		t.Error(err)
	}
}

func TestMissingCommandLineIdentity(t *testing.T) {
	h, err := Resolve("a", Options{ConfigFile: "none", Home: "/h", Identity: []string{"/nonexistent/key"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Notes) != 1 || !strings.Contains(h.Notes[0].String(), "/nonexistent/key (-i): not accessible") {
		t.Errorf("Notes %q", h.Notes)
	}
	if h.IdentityFiles[0] != "/h/.ssh/id_rsa" {
		t.Errorf("identities %q: a dropped -i leaves the defaults", h.IdentityFiles)
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		s, p string
		want bool
	}{
		{"gpu01", "gpu*", true}, {"gpu", "gpu?", false}, {"gpu1", "gpu?", true},
		{"gpu12", "gpu?", false}, {"", "*", true}, {"abc", "a*c", true},
		{"abcbc", "a*bc", true}, {"ab", "a*b*c", false}, {"GPU1", "gpu1", false},
		{strings.Repeat("a", 200), strings.Repeat("*a", 50) + "b", false},
	}
	for _, c := range cases {
		if got := matchPattern(c.s, c.p); got != c.want {
			t.Errorf("matchPattern(%q, %q) = %v", c.s, c.p, got)
		}
	}
}

// memFS is a config tree held in memory, so the fuzzer never globs or
// reads the real disk.
type memFS map[string]string

func (m memFS) ReadFile(n string) ([]byte, error) {
	s, ok := m[n]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return []byte(s), nil
}

func (m memFS) Glob(p string) ([]string, error) {
	if _, err := filepath.Match(p, ""); err != nil {
		return nil, err
	}
	var out []string
	for k := range m {
		if ok, _ := filepath.Match(p, k); ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (m memFS) Exists(n string) bool { _, ok := m[n]; return ok }

// countingFS counts the reads of a memFS.
type countingFS struct {
	memFS
	reads, globs, stats map[string]int
}

func (c *countingFS) ReadFile(n string) ([]byte, error) { c.reads[n]++; return c.memFS.ReadFile(n) }
func (c *countingFS) Glob(p string) ([]string, error)   { c.globs[p]++; return c.memFS.Glob(p) }
func (c *countingFS) Exists(n string) bool              { c.stats[n]++; return c.memFS.Exists(n) }

// TestConfigReadsOnce: a Config resolving 100 hosts reads each config file (the top one and
// every Include), globs each Include pattern and checks each -i file once, and resolves each
// host as Resolve does.
func TestConfigReadsOnce(t *testing.T) {
	fsys := memFS{
		"/home/u/.ssh/config":    "Include conf.d/*\nHost gpu*\n  User ops\nHost *\n  IdentityFile ~/.ssh/k\n",
		"/home/u/.ssh/conf.d/a":  "Host gpu1*\n  Port 2222\nInclude /etc/extra\n",
		"/home/u/.ssh/conf.d/b":  "Match host gpu2*\n  HostName %h.example\n",
		"/etc/extra":             "Host gpu10\n  ProxyJump bastion\n",
		"/etc/ssh/ssh_config":    "Host *\n  ConnectTimeout 5\n",
		"/home/u/.ssh/id_manual": "key",
	}
	count := &countingFS{memFS: fsys, reads: map[string]int{}, globs: map[string]int{}, stats: map[string]int{}}
	cfg := &Config{fs: newCachedFS(count)}
	o := Options{Home: "/home/u", LocalUser: "u", LocalHost: "l", Identity: []string{"~/.ssh/id_manual"}}
	for i := range 100 {
		alias := fmt.Sprintf("gpu%d", i)
		h, err := cfg.Resolve(alias, o)
		want, werr := resolve(alias, o, fsys)
		if err != nil || werr != nil || !reflect.DeepEqual(h, want) {
			t.Fatalf("%s: Config gave %+v (%v), Resolve %+v (%v)", alias, h, err, want, werr)
		}
	}
	for _, m := range []map[string]int{count.reads, count.globs, count.stats} {
		for name, n := range m {
			if n != 1 {
				t.Errorf("%s read %d times for 100 hosts, want once", name, n)
			}
		}
	}
	if len(count.reads) != 5 {
		t.Errorf("read %v, want the 5 config files", count.reads)
	}
}

// TestResolveCostsLittlePerOtherLine: resolving one host in a config of 1,000 Host blocks
// (simfleet's, like a fleet's generated one) allocates about nothing for the lines of the other
// hosts' blocks: each used to format its file:line, 2,000 of them for every host resolved.
func TestResolveCostsLittlePerOtherLine(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "Host sim%05d\n\tHostName 127.0.0.%d\n\tPort %d\n", i, 2+i%253, 20000+i)
	}
	b.WriteString("Host *\n\tUser root\n\tIdentityFile /k\n\tStrictHostKeyChecking yes\n")
	cfg := &Config{fs: newCachedFS(memFS{"/home/u/.ssh/config": b.String()})}
	o := Options{Home: "/home/u", LocalUser: "u", LocalHost: "l"}
	if h, err := cfg.Resolve("sim00500", o); err != nil || h.Port != 20500 || h.HostName != "127.0.0.249" {
		t.Fatalf("resolved %+v, %v", h, err)
	}
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := cfg.Resolve("sim00500", o); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 300 {
		t.Errorf("resolving a host among 1,000 blocks: %.0f allocations, want at most 300", allocs)
	}
}

func FuzzResolve(f *testing.F) {
	for _, tc := range sshCases {
		f.Add(tc.config, "gpu01", "")
	}
	f.Add("Host a\n ProxyJump b,c\nHost b\n ProxyJump a\n", "a", "x@y:1")
	f.Add("Include /home/u/.ssh/config\nMatch final\n Port 2\n", "a", "none")
	f.Add("Host *\n IdentityFile %d/${X}/%C\n", "z", "")
	f.Fuzz(func(t *testing.T, config, alias, jump string) {
		fsys := memFS{"/home/u/.ssh/config": config, "/home/u/.ssh/inc": "Host *\n User inc\n"}
		o := Options{Home: "/home/u", LocalUser: "u", LocalHost: "l.example", Jump: jump,
			Getenv: func(k string) string { return k }}
		type res struct {
			h   Host
			err error
		}
		ch := make(chan res, 1)
		go func() { h, err := resolve(alias, o, fsys); ch <- res{h, err} }()
		var rr res
		select {
		case rr = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("HANG: %q %q %q", config, alias, jump)
		}
		h, err := rr.h, rr.err
		if err != nil {
			if !errors.Is(err, ErrConfig) && !errors.Is(err, ErrJump) && !errors.Is(err, ErrName) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if h.Port <= 0 || h.Port > 65535 {
			t.Fatalf("port %d", h.Port)
		}
	})
}
