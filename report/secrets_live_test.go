//go:build linux

package report

import (
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
	"github.com/gputriage/gputriage/probe"
)

// base64Run is a run of base64 text, line breaks included: the probe wraps what it encodes.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/\n]{8,}`)

// decodesTo reports whether any base64 run in s, read from any of its first four bytes,
// decodes to text holding secret.
func decodesTo(s, secret string) bool {
	for _, run := range base64Run.FindAllString(s, -1) {
		run = strings.ReplaceAll(run, "\n", "")
		for off := 0; off < 4 && off < len(run); off++ {
			r := run[off:]
			r = r[:len(r)/4*4]
			dec := make([]byte, base64.RawStdEncoding.DecodedLen(len(r)))
			n, _ := base64.RawStdEncoding.Decode(dec, []byte(r))
			if strings.Contains(string(dec[:n]), secret) {
				return true
			}
		}
	}
	return false
}

// TestSecretsMaskedInLiveCapture runs the real probe over a real process that holds
// credentials in its argv (and maps and holds open a /dev/shm file named with one) and renders the Markdown
// report with the raw capture: no credential may be in it, in clear or in base64.
func TestSecretsMaskedInLiveCapture(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: other processes' fds")
	}
	for _, tool := range []string{"python3", "base64", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	const secretArg, secretShm = "liveSECRETargValue0123456789", "liveSECRETshmValue0123456789"
	const secretJSON, secretDict = "liveSECRETjsonValue0123456789", "liveSECRETdictValue0123456789"
	// A license key, an NGC key and a JSON Web Token, as a NIM container's server may carry.
	const secretLic, secretNGC = "liveSECRETlicValue0123456789", "nvapi-liveSECRETngcValue0123456789"
	const secretJWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJsaXZlIn0.liveSECRETjwtValue0123"
	// The GPU holder itself maps and holds open the file named with a secret: the probe reads a
	// GPU holder's fds first, so no other process's fds on this shared machine crowd it out.
	shm := "/dev/shm/gt-secret-" + time.Now().Format("150405.000000") + "-HF_TOKEN=" + secretShm
	p, err := scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server", ShmDir: shm, ShmFiles: 1, ShmBytes: 4096,
		Args: []string{"--host", "0.0.0.0", "--api-key", secretArg, "--served-model-name", "m",
			"--config", `{"api_key": "` + secretJSON + `", "port": 8000}`, "--override", `{'password':'` + secretDict + `'}`,
			"--license-key", secretLic, "--registry-login", secretNGC, "--session", secretJWT}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	dir := t.TempDir()
	g := scenario.GPU{Index: 0, UUID: "GPU-5ca9ed00-0000-0000-0000-000000000000", Name: "NVIDIA H100 80GB HBM3",
		BusID: "00000000:18:00.0", TotalMiB: 81559, UsedMiB: 40_005, Driver: "580.95.05"}
	smi := scenario.SMI{GPUs: []scenario.GPU{g}, Apps: []scenario.App{{PID: p.PID, GPUUUID: g.UUID, UsedMiB: 40_000, Name: "python3"}}}
	if err := scenario.WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	raw, err := scenario.RunProbe(probe.Script, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed01")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{secretArg, secretShm} {
		if !decodesTo(string(raw), s) {
			t.Fatalf("the capture does not hold %q in base64: the test proves nothing", s)
		}
	}
	snap, parseErr := parse.Parse(raw) // other tests' hostile processes may not parse
	hosts := []Host{{Name: "live", Snapshot: snap, Result: diagnose.Diagnose(snap, time.Now()), Capture: raw}}
	md := render(t, Markdown, hosts, Options{})
	for _, s := range []string{secretArg, secretShm, secretJSON, secretDict, secretLic, secretNGC, secretJWT} {
		if strings.Contains(md, s) || decodesTo(md, s) {
			t.Errorf("the Markdown report shows %q", s)
		}
	}
	for name, f := range map[string]renderFunc{"text": Text, "json": JSON} {
		out := render(t, f, hosts, Options{Verbose: true})
		for _, s := range []string{secretArg, secretJSON, secretDict, secretLic, secretNGC, secretJWT} {
			if strings.Contains(out, s) {
				t.Errorf("the %s report shows %q", name, s)
			}
		}
	}
	// The masked capture still reads as the host's: the same processes, the key masked.
	masked, err := parse.Parse(maskCapture(raw))
	if (err == nil) != (parseErr == nil) || len(masked.Processes) != len(snap.Processes) || len(masked.Holders) != len(snap.Holders) {
		t.Fatalf("the masked capture parses to %d processes, %d holders (%v), want %d, %d",
			len(masked.Processes), len(masked.Holders), err, len(snap.Processes), len(snap.Holders))
	}
	for _, pr := range masked.Processes {
		if pr.PID == p.PID && !strings.Contains(strings.Join(pr.Argv, " "), "--api-key *** ") {
			t.Errorf("masked argv %q", pr.Argv)
		}
	}
	if !strings.Contains(md, "--api-key") {
		t.Error("the Markdown report does not show the process's argv")
	}
}

// TestLoginSecretsMaskedLive runs the real probe over real GPU-holding processes started as
// login commands, header-carrying clients and settings (docker login -p, curl -H with no
// space after the colon and a cookie, git's http.extraheader, wandb login KEY, aws configure
// set, mysql -pPASS): no secret may be in any format, in clear or in base64.
func TestLoginSecretsMaskedLive(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: other processes' /proc entries")
	}
	for _, tool := range []string{"python3", "bash", "base64", "find"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	const s = "liveLOGINsecret"
	forms := [][]string{
		{"docker", "login", "-u", "bob", "-p", s + "Docker01", "nvcr.io"},
		{"curl", "-H", "authorization:Bearer " + s + "Header02", "-H", "Cookie: sid=" + s + "Cookie03", "-b", "a=" + s + "Cookie04", "https://h/"},
		{"git", "-c", "http.extraheader=Authorization: Bearer " + s + "Git05", "clone", "https://h/r"},
		{"wandb", "login", s + "Wandb06"},
		{"aws", "configure", "set", "aws_secret_access_key", s + "Aws07"},
		{"mysql", "-uroot", "-p" + s + "Mysql08", "db"},
	}
	g := scenario.GPU{Index: 0, UUID: "GPU-5ca9ed00-0000-0000-0000-000000000000", Name: "NVIDIA H100 80GB HBM3",
		BusID: "00000000:18:00.0", TotalMiB: 81559, UsedMiB: 40_005, Driver: "580.95.05"}
	smi := scenario.SMI{GPUs: []scenario.GPU{g}}
	var secrets []string
	for _, argv := range forms {
		pid := startAs(t, argv)
		smi.Apps = append(smi.Apps, scenario.App{PID: pid, GPUUUID: g.UUID, UsedMiB: 1000, Name: argv[0]})
		for _, a := range argv {
			if i := strings.Index(a, s); i >= 0 {
				secrets = append(secrets, a[i:])
			}
		}
	}
	dir := t.TempDir()
	if err := scenario.WriteFakeSMI(dir, smi); err != nil {
		t.Fatal(err)
	}
	raw, err := scenario.RunProbe(probe.Script, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed02")
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := parse.Parse(raw)
	var argvs strings.Builder
	for _, pr := range snap.Processes {
		argvs.WriteString(strings.Join(pr.Argv, " ") + "\n")
	}
	for _, sec := range secrets {
		if !strings.Contains(argvs.String(), sec) {
			t.Fatalf("the capture does not hold %q: the test proves nothing", sec)
		}
	}
	// The Markdown report's raw capture, masked, parses to argvs without them.
	masked, _ := parse.Parse(maskCapture(raw))
	for _, pr := range masked.Processes {
		for _, sec := range secrets {
			if strings.Contains(strings.Join(pr.Argv, " "), sec) {
				t.Errorf("the masked capture's argv %q holds %q", pr.Argv, sec)
			}
		}
	}
	hosts := []Host{{Name: "live", Snapshot: snap, Result: diagnose.Diagnose(snap, time.Now()), Capture: raw}}
	for name, f := range map[string]renderFunc{"text": Text, "markdown": Markdown, "json": JSON, "prometheus": Prometheus} {
		out := render(t, f, hosts, Options{Verbose: true})
		for _, sec := range secrets {
			if strings.Contains(out, sec) || strings.Contains(strings.ReplaceAll(out, `\`, ""), sec) || decodesTo(out, sec) {
				t.Errorf("the %s report shows %q", name, sec)
			}
		}
		if name == "json" && !strings.Contains(out, `"wandb"`) {
			t.Errorf("the JSON report does not show the processes' argv:\n%.2000s", out)
		}
	}
}

// startAs starts a process whose command line is argv (python3 sleeping under argv[0]'s name,
// with argv[1:] as its arguments) and waits until /proc shows that command line.
func startAs(t *testing.T, argv []string) int {
	t.Helper()
	script := "import sys, time\nsys.stdin.read()" // ends when the test closes its stdin
	// The interpreter itself: a wrapper (pyenv's shim) would exec it under its own name.
	py, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", append([]string{"-c", `py=$1 name=$2; shift 2; exec -a "$name" "$py" -c "$@"`, "bash",
		strings.TrimSpace(string(py)), argv[0], script}, argv[1:]...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	want := strings.Join(append([]string{argv[0], "-c", script}, argv[1:]...), "\x00") + "\x00"
	for deadline := time.Now().Add(30 * time.Second); ; {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
		if string(b) == want {
			return cmd.Process.Pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("PID %d runs %q, want %q", cmd.Process.Pid, b, want)
		}
		time.Sleep(5 * time.Millisecond) // polling /proc: there is no event for an exec
	}
}
