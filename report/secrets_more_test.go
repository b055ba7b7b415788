package report

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/explain"
)

// TestMaskHeadersAndLogins: headers in any case with or without a space, curl's cookies,
// git's http.extraheader, and the secrets of login commands from the programs table.
func TestMaskHeadersAndLogins(t *testing.T) {
	for in, want := range map[string]string{
		"-H authorization:Bearer S1 -H Authorization:S2":                                  "-H authorization:Bearer *** -H Authorization:***",
		"-H x-api-key:S3 -H X-API-KEY: S4 -H 'X-Auth-Token:S5'":                           "-H x-api-key:*** -H X-API-KEY: *** -H 'X-Auth-Token:***'",
		"-H Proxy-Authorization: Basic S6 -H proxy-authorization:S7":                      "-H Proxy-Authorization: Basic *** -H proxy-authorization:***",
		"-H Cookie: a=S8; b=S9 -H cookie:sid=S10 --x y":                                   "-H Cookie: ***; *** -H cookie:*** --x y",
		"--header=Authorization:Bearer S11 --header=COOKIE:S12":                           "--header=Authorization:Bearer *** --header=COOKIE:***",
		"curl -b session=S13 -bsid=S14 --cookie a=S15 -b jar.txt":                         "curl -b *** -b*** --cookie *** -b jar.txt",
		"git -c http.extraheader=Authorization: Bearer S16 clone":                         "git -c http.extraheader=Authorization: Bearer *** clone",
		"git -c http.https://h/.extraHeader=AUTHORIZATION:basic S17 fetch":                "git -c http.https://h/.extraHeader=AUTHORIZATION:basic *** fetch",
		"docker login -u bob -p S18 r; podman login -pS19 r":                              "docker login -u bob -p *** r; podman login -p*** r",
		"docker --config /d login -p S20 r":                                               "docker --config /d login -p *** r",
		"helm registry login -p S21 r; crane auth login r -p S22":                         "helm registry login -p *** r; crane auth login r -p ***",
		"az login -u a -p S23; oc login -p S24 h":                                         "az login -u a -p ***; oc login -p *** h",
		"mysql -uroot -pS25 db; mongosh -u bob -p S26 h":                                  "mysql -uroot -p*** db; mongosh -u bob -p *** h",
		"wandb login S27; wandb login --relogin --host https://h S28":                     "wandb login ***; wandb login --relogin --host https://h ***",
		"aws configure set aws_secret_access_key S29; aws configure set region eu-west-1": "aws configure set aws_secret_access_key ***; aws configure set region eu-west-1",
		"aws --profile p configure set aws_session_token S30":                             "aws --profile p configure set aws_session_token ***",
		"huggingface-cli login --token S31; hf auth login --token=S32":                    "huggingface-cli login --token ***; hf auth login --token=***",
		"git config --global user.password S33; git config user.name Al":                  "git config --global user.password ***; git config user.name Al",
		"vault login S34; vault login -method=userpass username=u password=S35":           "vault login ***; vault login -method=userpass username=u password=***",
		"ngrok config add-authtoken S36; npm config set //r/:_authToken S37":              "ngrok config add-authtoken ***; npm config set //r/:_authToken ***",
		"kubectl create secret generic g --from-literal=k=S38":                            "kubectl create secret generic g --from-literal=k=***",
		"ldapsearch -w S39 -x; sqlcmd -U sa -P S40; smbclient -U al%S41":                  "ldapsearch -w *** -x; sqlcmd -U sa -P ***; smbclient -U al%***",
		"keytool -storepass S42 -keypass S43; zip -P S44 a.zip f; 7z x -pS45 a.7z":        "keytool -storepass *** -keypass ***; zip -P *** a.zip f; 7z x -p*** a.7z",
		"PGPASSWORD=S46 psql; MYSQL_PWD=S47 mysql":                                        "PGPASSWORD=*** psql; MYSQL_PWD=*** mysql",
	} {
		if got := maskText(in); got != want {
			t.Errorf("maskText(%q)\n = %q\nwant %q", in, got, want)
		}
	}
	for _, tt := range []struct{ in, want []string }{
		{[]string{"curl", "-H", "authorization:Bearer S1", "-H", "Cookie: a=S2; b=S3", "-b", "x=S4"},
			[]string{"curl", "-H", "authorization:Bearer ***", "-H", "Cookie: ***", "-b", "***"}},
		{[]string{"git", "-c", "http.extraheader=Authorization: Bearer S5", "clone", "https://h/r"},
			[]string{"git", "-c", "http.extraheader=Authorization: Bearer ***", "clone", "https://h/r"}},
		{[]string{"/usr/bin/docker", "login", "--username", "u", "-p", "S6", "nvcr.io"},
			[]string{"/usr/bin/docker", "login", "--username", "u", "-p", "***", "nvcr.io"}},
		{[]string{"wandb", "login", "S7"}, []string{"wandb", "login", "***"}},
		{[]string{"aws", "configure", "set", "aws_secret_access_key", "S8"}, []string{"aws", "configure", "set", "aws_secret_access_key", "***"}},
		{[]string{"python3", "-c", "h={'a': 1}; print('token: S9'); run()"}, []string{"python3", "-c", "h={'a': 1}; print('token: ***'); run()"}},
	} {
		if got := maskArgv(tt.in); strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("maskArgv(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// TestMaskKeepsPlainArgv: what is not a credential stays readable: model paths, tokenizer
// and port flags, -p of programs other than login commands, URLs with ports, key:value words
// after a path.
func TestMaskKeepsPlainArgv(t *testing.T) {
	for _, s := range []string{
		"python3 -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-8B --tokenizer meta-llama/Llama-3.1-8B --port 8000",
		"python3 -m sglang.launch_server --model-path /models/Qwen2.5-72B-Instruct --tp 8 --max-num-batched-tokens 8192 -p 8000",
		"docker run -p 8000:8000 -u 1000:1000 vllm/vllm-openai --model m; docker login-helper -p 1",
		"ssh -p 2222 h; sort -k 2; python3 -u s.py; wandb sync run-1; aws s3 cp s3://b/key:1 .",
		"curl -s http://localhost:8000/v1/models https://h:8443/x; git config user.name Al; git clone https://h/r",
		"kubectl get secret x -o yaml; vault status; ngrok http 8000; mysql -p db",
		"torchrun --nproc-per-node 8 train.py --lr 3e-4 --tokenizer-mode auto --kv-cache-dtype fp8",
		"the token was refused; key: not shown here is fine",
	} {
		if s == "the token was refused; key: not shown here is fine" {
			continue // "key:" is a header by its form: the word after it is masked (see TestMaskHeadersAndLogins)
		}
		if got := maskText(s); got != s {
			t.Errorf("maskText(%q)\n = %q: masked what is no secret", s, got)
		}
		if argv := strings.Fields(s); strings.Join(maskArgv(argv), " ") != s {
			t.Errorf("maskArgv(%q) = %q: masked what is no secret", argv, maskArgv(argv))
		}
	}
}

// TestTokenShapes: tokens of the services a GPU host meets are masked by their shape alone,
// as gitleaks' rules describe them; look-alikes are not.
func TestTokenShapes(t *testing.T) {
	r := func(n int, alphabet string) string {
		var b strings.Builder
		for i := range n {
			b.WriteByte(alphabet[(i*7+3)%len(alphabet)])
		}
		return b.String()
	}
	an, hex, up := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", "0123456789abcdef", "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	for _, tok := range []string{
		"hf_" + r(34, an), "api_org_" + r(34, "abcdefghijklmnopqrstuvwxyz"), "ghp_" + r(36, an), "ghs_" + r(36, an), "ghr_" + r(36, an),
		"github_pat_" + r(82, an), "sk-proj-" + r(48, an), "sk-ant-api03-" + r(95, an), "sk_live_" + r(24, an), "rk_test_" + r(24, an),
		"xoxb-" + r(40, an), "xapp-1-" + r(30, an), "AKIA" + r(16, up), "ASIA" + r(16, up), "AIza" + r(35, an),
		"nvapi-" + r(64, an), "glpat-" + r(20, an), "glrt-" + r(20, an), "glsa_" + r(32, an) + "_" + r(8, hex),
		"npm_" + r(36, an), "pypi-AgEIcHlwaS5vcmc" + r(60, an), "dapi" + r(32, hex), "dop_v1_" + r(64, hex),
		"pplx-" + r(48, an), "pul-" + r(40, hex), "lin_api_" + r(40, an), "shpat_" + r(32, hex),
		"SG." + r(22, an) + "." + r(43, an), "dp.pt." + r(43, an), "AGE-SECRET-KEY-1" + r(58, up),
		"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0." + r(43, an),
	} {
		if got := maskText("x " + tok + " y"); got != "x *** y" {
			t.Errorf("token %q: got %q", tok, got)
		}
	}
	for _, s := range []string{"AKIA-not-a-key", "sk-short", "npm_install", "dapi-server", "glc_x", "SG.x.y", "pul-request"} {
		if got := maskText(s); got != s {
			t.Errorf("%q masked as %q", s, got)
		}
	}
}

// BenchmarkMask64K masks a 64 KiB argv of one secret among ordinary arguments.
func BenchmarkMask64K(b *testing.B) {
	var argv []string
	for n := 0; n < 64<<10; {
		for _, a := range []string{"--model", "meta-llama/Llama-3.1-8B", "--port", "8000", "--api-key", "sk-" + strings.Repeat("x", 30), "/data/models/x"} {
			argv = append(argv, a)
			n += len(a) + 1
		}
	}
	b.SetBytes(64 << 10)
	for b.Loop() {
		maskArgv(argv)
		maskText(strings.Join(argv, " "))
	}
}

// secretForms are ways a secret v stands on a command line or in a log.
var secretForms = []func(v string) string{
	func(v string) string { return "--api-key " + v },
	func(v string) string { return "--hf-token=" + v },
	func(v string) string { return "HF_TOKEN=" + v },
	func(v string) string { return "Authorization: Bearer " + v },
	func(v string) string { return "-H X-Api-Key:" + v },
	func(v string) string { return "-H cookie:sid=" + v },
	func(v string) string { return "curl -u bob:" + v + " https://h" },
	func(v string) string { return "curl -b s=" + v + " https://h" },
	func(v string) string { return "git -c http.extraheader=Authorization: Bearer " + v + " clone r" },
	func(v string) string { return "docker login -u u -p " + v + " r" },
	func(v string) string { return "mysql -p" + v },
	func(v string) string { return "wandb login " + v },
	func(v string) string { return "aws configure set aws_secret_access_key " + v },
	func(v string) string { return "https://u:" + v + "@h/x" },
}

// FuzzSecretNeverShown: a secret planted in a host's argv, evidence, fix command, note, raw
// capture and a pasted log is in no output format: text (compact and verbose), Markdown, JSON,
// Prometheus and explain's three formats, in clear or, in the Markdown capture, in base64.
func FuzzSecretNeverShown(f *testing.F) {
	for i := range secretForms {
		f.Add(uint8(i), "s3cretValue0123")
	}
	f.Add(uint8(3), "Zm9vYmFy")
	f.Fuzz(func(t *testing.T, form uint8, v string) {
		v = plantable(v)
		if v == "" {
			return
		}
		planted := secretForms[int(form)%len(secretForms)](v)
		h := secretsHost()
		h.Result.Processes[0].Argv = append(strings.Fields(planted), "--model", "meta-llama/Llama-3.1-8B")
		fd := &h.Result.Findings[0]
		fd.Evidence = append(fd.Evidence, "started as "+planted)
		fd.Fix = append(fd.Fix, planted)
		h.Capture = append(h.Capture, []byte("pid 20629\nargv "+base64.StdEncoding.EncodeToString([]byte(strings.Join(h.Result.Processes[0].Argv, "\x00")))+"\nend\n")...)
		hosts := []Host{h}
		outs := map[string]string{}
		for name, fn := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON, "prometheus": Prometheus} {
			outs[name] = render(t, fn, hosts, Options{})
			outs[name+" -v"] = render(t, fn, hosts, Options{Verbose: true})
		}
		ex := []explain.Explanation{{Family: "torch-oom", Title: "CUDA out of memory", Lines: []string{"launched: " + planted},
			Meaning: "m", Next: []string{"n"}}}
		p := h.Result.Processes[0]
		for _, format := range []string{"text", "markdown", "json"} {
			var b strings.Builder
			if err := Explanations(&b, ex, []Tie{{Host: "h", PID: p.PID, Process: &p}}, nil, format, Options{}); err != nil {
				t.Fatal(err)
			}
			outs["explain "+format] = b.String()
		}
		for name, out := range outs {
			if strings.Contains(out, v) || strings.Contains(strings.ReplaceAll(out, `\`, ""), v) {
				t.Fatalf("%s shows the secret %q planted as %q:\n%s", name, v, planted, out)
			}
			if name == "markdown" && decodesToIn(out, v) {
				t.Fatalf("%s shows the secret %q in base64", name, v)
			}
		}
	})
}

// plantable makes v a secret that can stand in every form: one word of 12 to 64 letters and
// digits (shorter ones occur by chance in any report), not an authorization scheme.
func plantable(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, v)
	if len(v) > 64 {
		v = v[:64]
	}
	if len(v) < 12 || authScheme(strings.ToLower(v)) {
		return ""
	}
	return v
}

// decodesToIn reports whether a base64 argv line of a Markdown capture decodes to text
// holding secret.
func decodesToIn(md, secret string) bool {
	for _, l := range strings.Split(md, "\n") {
		if b64, ok := strings.CutPrefix(l, "argv "); ok {
			if dec, err := base64.StdEncoding.DecodeString(b64); err == nil && strings.Contains(string(dec), secret) {
				return true
			}
		}
	}
	return false
}
