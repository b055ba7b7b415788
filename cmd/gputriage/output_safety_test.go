package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/internal/testenv"
)

// startHeld starts a real leftover server (orphaned, its /dev/shm files deleted but mapped)
// with args, and a fake nvidia-smi first on PATH that names it as holding GPU 0.
func startHeld(t *testing.T, shmDir string, args ...string) *scenario.Proc {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the probe reads /proc: Linux only")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	p, err := scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server", Args: args,
		ShmDir: shmDir, ShmFiles: 2, ShmBytes: 1 << 20, Delete: true, Orphan: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	smiDir := t.TempDir()
	gpu := scenario.GPU{Index: 0, UUID: "GPU-bbbbbbbb-0000-0000-0000-000000000000", Name: "NVIDIA H100 80GB HBM3",
		TotalMiB: 81559, UsedMiB: 40000, ReservedMiB: 532, Driver: "550.90.07"}
	if err := scenario.WriteFakeSMI(smiDir, scenario.SMI{GPUs: []scenario.GPU{gpu},
		Apps: []scenario.App{{PID: p.PID, GPUUUID: gpu.UUID, UsedMiB: 39990, Name: "python3"}}}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", smiDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return p
}

// terminalRunes returns the runes of s a terminal would act on or hide: C0 (but newline), DEL,
// C1, format characters (bidi, zero-width, BOM, tags) and the line and paragraph separators.
func terminalRunes(s string) []rune {
	var bad []rune
	for _, r := range s {
		if r != '\n' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029') {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestLocalHostileOutput: a real process whose argv and /dev/shm file names carry C1 controls,
// bidi overrides, zero-width characters, URLs, emails, @mentions and #references, through the
// real CLI. The JSON's bytes hold none of those runes raw yet decode to the exact strings; the
// Markdown, rendered by cmark-gfm with GitHub's autolink extension, links nothing, and leaves
// no @mention or #reference outside code for GitHub to link.
func TestLocalHostileOutput(t *testing.T) {
	evil := "\u009b31m\u0085\u202eevil.py\u202c\u2066iso\u2069\u200b\u200d\u2060\ufeff\u061c\u200f\u00ad"
	links := []string{"https://evil.example/x", "www.evil.example", "mallory@evil.example", "@octocat", "#1234"}
	shmDir := "/dev/shm/gputriage-out-" + strconv.Itoa(os.Getpid()) + "-" + evil + "-@admin-www.evil.example"
	args := append([]string{"--model", shmDir, "--served-model-name", evil}, links...)
	p := startHeld(t, shmDir, args...)

	out, errOut, code := cli(t, nil, "--local", "--format", "json")
	if code != exitFindings {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if bad := terminalRunes(out); len(bad) > 0 {
		t.Errorf("the JSON holds raw %U", bad)
	}
	var doc struct {
		Hosts []struct {
			Processes []struct {
				PID  int      `json:"pid"`
				Argv []string `json:"argv"`
				Shm  []struct {
					Path string `json:"path"`
				} `json:"shm"`
			} `json:"processes"`
			Findings []struct {
				Files []string `json:"files"`
			} `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, pr := range doc.Hosts[0].Processes {
		if pr.PID != p.PID {
			continue
		}
		found = true
		if got := strings.Join(pr.Argv[3:], "\x00"); got != strings.Join(args, "\x00") {
			t.Errorf("argv decodes to %q, want %q", pr.Argv[3:], args)
		}
		if len(pr.Shm) == 0 || !strings.HasPrefix(pr.Shm[0].Path, shmDir+"/model-") {
			t.Errorf("shm %q, want files under %q", pr.Shm, shmDir)
		}
	}
	if !found {
		t.Fatalf("PID %d not reported:\n%s", p.PID, out)
	}

	md, _, _ := cli(t, nil, "--local", "--format", "markdown", "-v")
	for _, want := range []string{"`https://evil.example/x`", "`www.evil.example`", "`mallory@evil.example`",
		"`@octocat`", "`#1234`", `\u202eevil.py\u202c`} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %s", want)
		}
	}
	if html := cmarkGFM(t, md); strings.Contains(html, "<a ") {
		t.Errorf("a remote string became a link:\n%s", html)
	}
	outside := regexp.MustCompile("(?s)<details>.*?</details>").ReplaceAllString(md, "")
	outside = regexp.MustCompile("(?sm)^(`{3,})[a-z]*\n.*?^`{3,}$").ReplaceAllString(outside, "")
	outside = regexp.MustCompile("`[^`\n]*`").ReplaceAllString(outside, "")
	for _, bad := range []string{`(^|[^\w])@\w`, `(^|[^\w&])#\d`, `://`, `(?i)www\.`} {
		if m := regexp.MustCompile(bad).FindString(outside); m != "" {
			t.Errorf("%q left outside code for GitHub to link", m)
		}
	}
}

// cmarkGFM renders md with GitHub's CommonMark implementation and its extensions.
func cmarkGFM(t *testing.T, md string) string {
	t.Helper()
	bin := testenv.Need(t, "GFM renderer", "apt-get install cmark-gfm", "cmark-gfm")
	cmd := exec.Command(bin, "--unsafe", "-e", "table", "-e", "strikethrough", "-e", "autolink")
	cmd.Stdin = strings.NewReader(md)
	html, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(html)
}

// Credentials on a real server's command line, none of a recognizable shape except the HF
// token: they are masked because of where they stand.
const (
	secretAPIKey = "k3y-gputriage-TEST-0123"
	secretHF     = "hf_gputriageTESTabcdefghijklmnopqrstu"
	secretEnv    = "envValueTEST4567"
	secretPass   = "pa55w0rd-TEST"
	secretBearer = "bearerTEST89"
)

var credentials = []string{secretAPIKey, secretHF, secretEnv, secretPass, secretBearer}

// TestLocalSecrets: a real server started with --api-key, --hf-token, HF_TOKEN=, a URL with
// user:password@ and an Authorization header holds GPU memory. In every format the secrets
// appear nowhere in stdout or stderr (nor in the Markdown capture's base64 argv), the flags
// still show; --show-secrets shows them; --redact with --show-secrets is refused.
func TestLocalSecrets(t *testing.T) {
	shmDir := "/dev/shm/gputriage-secrets-" + strconv.Itoa(os.Getpid())
	startHeld(t, shmDir, "--model", shmDir, "--api-key", secretAPIKey, "--hf-token", secretHF,
		"HF_TOKEN="+secretEnv, "--weights-url", "https://alice:"+secretPass+"@models.example/x",
		"-H", "Authorization: Bearer "+secretBearer)

	for _, f := range [][]string{{"--format", "text"}, {"--format", "text", "-v"}, {"--format", "markdown"},
		{"--format", "markdown", "-v"}, {"--format", "json"}, {"--format", "json", "--redact"}} {
		out, errOut, code := cli(t, nil, append([]string{"--local", "--color", "never"}, f...)...)
		if code != exitFindings {
			t.Errorf("%v: exit %d, stderr %s", f, code, errOut)
		}
		for _, s := range credentials {
			if strings.Contains(out+errOut, s) {
				t.Errorf("%v shows the secret %q", f, s)
			}
		}
		for _, l := range strings.Split(out, "\n") {
			if b64, ok := strings.CutPrefix(l, "argv "); ok {
				dec, _ := base64.StdEncoding.DecodeString(b64)
				for _, s := range credentials {
					if strings.Contains(string(dec), s) {
						t.Errorf("%v: the raw capture's argv carries %q in base64", f, s)
					}
				}
			}
		}
		// Compact text (no -v) shows no line that holds the flag: the table cuts the command.
		compact := len(f) == 2 && f[1] == "text"
		if plain := strings.ReplaceAll(out, `\`, ""); !compact && (!strings.Contains(plain, "--api-key") || !strings.Contains(plain, "***")) {
			t.Errorf("%v: the masked flag is not shown:\n%s", f, out)
		}
	}
	for _, f := range []string{"json", "markdown"} {
		out, _, _ := cli(t, nil, "--local", "--format", f, "-v", "--show-secrets")
		out = strings.ReplaceAll(out, `\`, "")
		for _, s := range []string{secretAPIKey, secretHF, secretEnv, secretPass, secretBearer} {
			if !strings.Contains(out, s) {
				t.Errorf("--format %s --show-secrets lacks %q", f, s)
			}
		}
	}
	if _, errOut, code := cli(t, nil, "--local", "--show-secrets", "--redact"); code != exitUsage || !strings.Contains(errOut, "--redact") {
		t.Errorf("--show-secrets --redact: exit %d, %q", code, errOut)
	}
}
