package report

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/explain"
	"github.com/gputriage/gputriage/parse"
)

func TestMaskText(t *testing.T) {
	for in, want := range map[string]string{
		"--api-key sk-abc --port 8000":                                                            "--api-key *** --port 8000",
		"--api-key=sk-abc --port=8000":                                                            "--api-key=*** --port=8000",
		"--hf_token hf_x --auth-token=t --access-token a":                                         "--hf_token *** --auth-token=*** --access-token ***",
		"--admin-api-key k --db-password p --client-secret s":                                     "--admin-api-key *** --db-password *** --client-secret ***",
		"--max-num-batched-tokens 8192 --tokenizer t":                                             "--max-num-batched-tokens 8192 --tokenizer t",
		"--token --port 1":                                                                        "--token --port 1",
		"HF_TOKEN=hf_abc OPENAI_API_KEY=x AWS_SECRET_ACCESS_KEY=y":                                "HF_TOKEN=*** OPENAI_API_KEY=*** AWS_SECRET_ACCESS_KEY=***",
		"CUDA_VISIBLE_DEVICES=0,1 MONKEY=1 KEYS=2":                                                "CUDA_VISIBLE_DEVICES=0,1 MONKEY=1 KEYS=2",
		"--env=DB_PASSWORD=pw":                                                                    "--env=DB_PASSWORD=***",
		"https://u:pa55@h.example/x and ftp://bob@h":                                              "https://u:***@h.example/x and ftp://bob@h",
		"http://h/x?api_key=abc&page=2":                                                           "http://h/x?api_key=***&page=2",
		"-H Authorization: Bearer eyJabc":                                                         "-H Authorization: Bearer ***",
		"Authorization: token ghx X-Api-Key: k2":                                                  "Authorization: token *** X-Api-Key: ***",
		"curl -H 'bearer xyz' -d \"--token\" \"t0k\"":                                             "curl -H 'bearer ***' -d \"--token\" \"***\"",
		"hf_abcdefghijklmnopqrstuvwxyz0123 in a log":                                              "*** in a log",
		"x ghp_abcdefghijklmnopqrstuvwxyz0123 sk-abcdefghijklmnopqrstuvwxyz AKIAABCDEFGHIJKLMNOP": "x *** *** ***",
		"the token was refused; GPU 0 is busy":                                                    "the token was refused; GPU 0 is busy",
		"--api-key\x00sk-abc\x00--port\x008000":                                                   "--api-key\x00***\x00--port\x008000",
		// JSON and Python's dict repr, as in --config arguments and pasted logs.
		`--config {"api_key": "k e y", "port": 8000}`:        `--config {"api_key": "***", "port": 8000}`,
		`{"token":"t\"ok","n":1} {'password': 'pw', 'x': 1}`: `{"token":"***","n":1} {'password': '***', 'x': 1}`,
		`non-default args: {'model': 'm', 'api_key': 'k'}`:   `non-default args: {'model': 'm', 'api_key': '***'}`,
		`{"hf_token": null, "max_tokens": 5}`:                `{"hf_token": ***, "max_tokens": 5}`,
		// Flags and variables named by the short words, and the shapes of NGC and GitLab keys
		// and JSON Web Tokens (GPU hosts pull NIM containers with NGC keys).
		"--key k1 --pass p1 --auth u:p2 --jwt j1 --license-key l1":                           "--key *** --pass *** --auth *** --jwt *** --license-key ***",
		"LICENSE_KEY=l2 NGC_API_KEY=n1 MONKEY=1 PASSKEY_HINT=x":                              "LICENSE_KEY=*** NGC_API_KEY=*** MONKEY=1 PASSKEY_HINT=x",
		"login -p nvapi-abcdefghijklmnopqrstuvwxyz glpat-abcdefghijklmnopqrst":               "login -p *** ***",
		"X-Session: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N": "X-Session: ***",
		// Programs whose password options have short or ambiguous names.
		`sshpass -p pw1 ssh h; sshpass -ppw2 ssh h`:                          `sshpass -p *** ssh h; sshpass -p*** ssh h`,
		`bash -c "curl -u bob:pw3 -U px:pw4 https://h/" x`:                   `bash -c "curl -u bob:*** -U px:*** https://h/" x`,
		`curl -ubob:pw5 --user 'al:pw6' --proxy-user al https://h`:           `curl -ubob:*** --user 'al:***' --proxy-user al https://h`,
		`/usr/bin/mysql -upw -ppw7 -p db -P 3306`:                            `/usr/bin/mysql -upw -p*** -p db -P 3306`,
		`redis-cli -a pw8 --pass pw9 -p 6379`:                                `redis-cli -a *** --pass *** -p 6379`,
		`openssl enc -k pw10 -pass pass:pw11 -passin env:V -passout file:/f`: `openssl enc -k *** -pass pass:*** -passin env:V -passout file:/f`,
		// The same options of other programs are not passwords.
		`ssh -p 2222 h; python3 -u s.py; docker run -u 1000:1000 i; sort -k 2`: `ssh -p 2222 h; python3 -u s.py; docker run -u 1000:1000 i; sort -k 2`,
	} {
		if got := maskText(in); got != want {
			t.Errorf("maskText(%q)\n = %q\nwant %q", in, got, want)
		}
	}
}

func TestMaskArgv(t *testing.T) {
	in := []string{"python3", "-m", "vllm", "--api-key", "sk two words", "--password=a b", "PASSWORD=c d",
		"-H", "Authorization: Bearer tok en", "--url", "https://u:p@h/", "--token", "--port", "8000", "--hf-token", "",
		"--config", `{"api_key": "k e y"}`, "--cfg", `{'secret':'s'}`}
	want := []string{"python3", "-m", "vllm", "--api-key", "***", "--password=***", "PASSWORD=***",
		"-H", "Authorization: Bearer ***", "--url", "https://u:***@h/", "--token", "--port", "8000", "--hf-token", "",
		"--config", `{"api_key": "***"}`, "--cfg", `{'secret':'***'}`}
	got := maskArgv(in)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("maskArgv\n = %q\nwant %q", got, want)
	}
	if in[4] != "sk two words" {
		t.Error("maskArgv changed its input")
	}
	prog := []string{"sudo", "/usr/bin/sshpass", "-p", "pw one", "ssh", "-p", "22", "h", "curl", "-u", "u:p w", "-uv:x"}
	wantProg := []string{"sudo", "/usr/bin/sshpass", "-p", "***", "ssh", "-p", "22", "h", "curl", "-u", "u:***", "-uv:***"}
	if got := maskArgv(prog); strings.Join(got, "|") != strings.Join(wantProg, "|") {
		t.Errorf("maskArgv\n = %q\nwant %q", got, wantProg)
	}
	plain := []string{"python3", "-m", "sglang.launch_server", "--port", "30000"}
	if got := maskArgv(plain); &got[0] != &plain[0] {
		t.Error("maskArgv copied an argv with no secret")
	}
}

const (
	secretKey   = "sk-gputriageTESTabcdefghij0123456789"
	secretHF    = "hf_gputriageTESTabcdefghijklmnopqrstu"
	secretEnv   = "envSecretValue0123"
	secretPass  = "pa55w0rdTEST"
	secretBearr = "bearerTEST0123456789"
)

// secretsHost holds secrets in its argv, an evidence line, a fix command, an error-free
// message and its raw capture's base64 argv line.
func secretsHost() Host {
	h := incidentHost()
	argv := []string{"python3", "-m", "vllm.entrypoints.openai.api_server", "--api-key", secretKey,
		"--hf-token=" + secretHF, "HF_TOKEN=" + secretEnv, "--download-dir", "https://alice:" + secretPass + "@models.example/x",
		"-H", "Authorization: Bearer " + secretBearr}
	h.Result.Processes[0].Argv = argv
	f := &h.Result.Findings[0]
	f.Evidence = append(f.Evidence, "started as vllm --api-key "+secretKey)
	f.Fix = append(f.Fix, "curl -H 'Authorization: Bearer "+secretBearr+"' http://localhost:8000/v1/models")
	h.Snapshot.Notes = []parse.Note{{Code: "not-root", Message: "HF_TOKEN=" + secretEnv}}
	h.Capture = append(h.Capture, []byte("pid 20629\nargv "+base64.StdEncoding.EncodeToString([]byte(strings.Join(argv, "\x00")))+
		"\ncwd /srv/x?token="+secretEnv+"\nend\n")...)
	return h
}

var credentials = []string{secretKey, secretHF, secretEnv, secretPass, secretBearr}

// TestSecretsMasked: by default no format shows a secret, nor its base64 in the Markdown
// capture; ShowSecrets shows them; Redact masks them whatever ShowSecrets says.
func TestSecretsMasked(t *testing.T) {
	hosts := []Host{secretsHost()}
	formats := map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON}
	for name, f := range formats {
		for _, o := range []Options{{}, {Verbose: true}, {Redact: true, ShowSecrets: true}} {
			out := render(t, f, hosts, o)
			for _, s := range credentials {
				if strings.Contains(out, s) || strings.Contains(out, base64.StdEncoding.EncodeToString([]byte(s))[:16]) {
					t.Errorf("%s %+v shows %q", name, o, s)
				}
			}
			// Compact text shows the flag in no line it keeps (its evidence is -v's detail).
			shown := name != "text" || o.Verbose
			if shown && !strings.Contains(out, "--api-key *") && !strings.Contains(out, `"--api-key",`) && !strings.Contains(out, "--api-key \\*") {
				t.Errorf("%s %+v: the masked flag is not shown:\n%s", name, o, out)
			}
		}
		out := strings.ReplaceAll(render(t, f, hosts, Options{ShowSecrets: true, Verbose: true}), `\`, "")
		for _, s := range []string{secretKey, secretHF, secretEnv} {
			if !strings.Contains(out, s) {
				t.Errorf("%s with ShowSecrets lacks %q", name, s)
			}
		}
	}
	md := render(t, Markdown, hosts, Options{})
	for _, l := range strings.Split(md, "\n") {
		if b64, ok := strings.CutPrefix(l, "argv "); ok {
			dec, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatalf("argv line %q: %v", l, err)
			}
			want := "python3\x00-m\x00vllm.entrypoints.openai.api_server\x00--api-key\x00***\x00--hf-token=***\x00HF_TOKEN=***"
			if !strings.HasPrefix(string(dec), want) {
				t.Errorf("capture argv = %q", dec)
			}
		}
	}
	if hosts[0].Result.Processes[0].Argv[4] != secretKey {
		t.Error("masking changed the caller's hosts")
	}
}

// TestMaskSecretsSharesCleanHosts: a host without a secret is rendered from itself, not a copy.
func TestMaskSecretsSharesCleanHosts(t *testing.T) {
	hosts := []Host{incidentHost(), secretsHost()}
	out := maskSecrets(hosts, true)
	if out[0].Snapshot != hosts[0].Snapshot || out[1].Snapshot == hosts[1].Snapshot {
		t.Error("want the clean host shared and the secret one copied")
	}
	var _ diagnose.Result = out[1].Result
	if !utf8.Valid(out[1].Capture) {
		t.Error("masked capture is not UTF-8")
	}
}

// TestExplanationsMaskSecrets: explain's output masks the pasted log's lines and the command
// lines of the processes it ties to a host, in every format.
func TestExplanationsMaskSecrets(t *testing.T) {
	ex := []explain.Explanation{{Family: "torch-oom", Title: "CUDA out of memory",
		Lines:   []string{"launched: vllm serve m --api-key " + secretKey + " HF_TOKEN=" + secretEnv},
		Meaning: "It ran out.", Next: []string{"gputriage HOST"}}}
	p := secretsHost().Result.Processes[0]
	ties := []Tie{{Host: "ct200", PID: p.PID, LogGiB: 54, Process: &p}}
	for _, format := range []string{"text", "markdown", "json"} {
		var b strings.Builder
		if err := Explanations(&b, ex, ties, nil, format, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, s := range credentials {
			if strings.Contains(b.String(), s) {
				t.Errorf("%s shows %q:\n%s", format, s, b.String())
			}
		}
	}
	if !strings.Contains(ex[0].Lines[0], secretKey) || p.Argv[4] != secretKey {
		t.Error("masking changed the caller's values")
	}
}

// FuzzMaskSecrets: masking never panics, keeps valid UTF-8 valid, keeps an argv's length, and
// leaves no credential flag's value behind.
func FuzzMaskSecrets(f *testing.F) {
	for _, s := range []string{"--api-key sk-abc", "HF_TOKEN=x&y", "https://u:p@h/x https://@", "Authorization: Bearer ''",
		"--token=", "a=b=c --password\x00x", "''", "\u202e--secret \u200bv", "X-Api-Key:"} {
		f.Add(s, "v4lue")
	}
	f.Fuzz(func(t *testing.T, s, v string) {
		m := maskText(s)
		if utf8.ValidString(s) && !utf8.ValidString(m) {
			t.Fatalf("maskText(%q) = %q: not UTF-8", s, m)
		}
		argv := strings.Split(s, " ")
		if got := maskArgv(argv); len(got) != len(argv) {
			t.Fatalf("maskArgv changed the length: %q", got)
		}
		// A value as one word: no separators, quotes or query punctuation, not a flag, not an
		// authorization scheme (which the credential would follow).
		v = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
			if r == 0 || strings.ContainsRune(`'"&,;`, r) {
				return -1
			}
			return r
		}, v)), "")
		if v = strings.TrimLeft(v, "-"); v == "" || authScheme(strings.ToLower(v)) {
			return
		}
		for _, prefix := range []string{"--api-key ", "--hf-token=", "HF_TOKEN="} {
			if got := maskText(prefix + v); got != prefix+secretMask {
				t.Fatalf("maskText(%q) = %q", prefix+v, got)
			}
		}
	})
}

// TestRewriteInterface: a value behind an interface is masked too, not a reason to panic.
func TestRewriteInterface(t *testing.T) {
	type withAny struct {
		V any
		N any
	}
	in := withAny{V: []string{"--api-key", secretKey}}
	if !changes(reflect.ValueOf(in), secretMasker{}) {
		t.Fatal("changes misses the secret behind an interface")
	}
	out := rewriteValue(in, rewriter(secretMasker{}))
	if got := out.V.([]string); got[1] != secretMask || out.N != nil || in.V.([]string)[1] != secretKey {
		t.Errorf("got %#v from %#v", out, in)
	}
}
