//go:build linux

package report

import (
	"encoding/base64"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/scenario"
	"github.com/gputriage/gputriage/parse"
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
// credentials in its argv (and a /dev/shm file named with one open) and renders the Markdown
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
	shm := "/dev/shm/gt-secret-" + time.Now().Format("150405.000000") + "-HF_TOKEN=" + secretShm
	f, err := os.Create(shm)
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(shm)
	defer f.Close()
	p, err := scenario.Start(scenario.Server{Module: "vllm.entrypoints.openai.api_server",
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
	raw, err := scenario.RunProbe(parse.ProbeScript, dir, "", "5ca9ed5ca9ed5ca9ed5ca9ed5ca9ed01")
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
