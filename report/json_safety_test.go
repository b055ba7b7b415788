package report

import (
	"encoding/json"
	"strings"
	"testing"
)

// unsafeRunes are the runes a terminal acts on or hides that encoding/json leaves raw: C1
// controls (U+009B is a one-rune CSI), DEL, bidi controls, zero-width characters, the BOM, the
// soft hyphen, a tag character, and the separators encoding/json already escapes.
var unsafeRunes = []rune{0x7f, 0x80, 0x85, 0x9b, 0x9c, 0x9d, 0x9f, 0x061c, 0x200b, 0x200c, 0x200d,
	0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2060, 0x2066, 0x2067, 0x2068, 0x2069,
	0xfeff, 0x00ad, 0xe0041, 0x2028, 0x2029}

// rawUnsafe returns the runes of s (other than newline) that a terminal would act on or hide.
func rawUnsafe(s string) []rune {
	var bad []rune
	for _, r := range s {
		if r != '\n' && (r < 0x20 || r >= 0x7f && unsafeRune(r)) {
			bad = append(bad, r)
		}
	}
	return bad
}

// TestJSONEscapesUnsafeRunes: every host string carrying these runes is written with them as
// \u escapes, so `cat report.json` shows them; decoding gives the strings back exactly.
func TestJSONEscapesUnsafeRunes(t *testing.T) {
	evil := "x" + string(unsafeRunes) + "y"
	h := incidentHost()
	h.Name = "gpu" + evil
	h.Snapshot.Host.Hostname = "host" + evil
	p := &h.Result.Processes[0]
	p.Argv = append(p.Argv, evil, "--served-model-name", "\u202eevil.py\u202c")
	p.Unit = "unit" + evil + ".service"
	p.Shm[0].Path = "/dev/shm/" + evil
	f := &h.Result.Findings[0]
	f.Evidence = append(f.Evidence, "evidence "+evil)
	f.Fix = append(f.Fix, "kill "+evil)
	out := render(t, JSON, []Host{h}, Options{})
	if bad := rawUnsafe(out); len(bad) > 0 {
		t.Errorf("JSON holds raw %U", bad)
	}
	if !strings.Contains(out, `x\u007f\u0080\u0085\u009b`) || !strings.Contains(out, `\udb40\udc41`) {
		t.Errorf("runes not written as \\u escapes:\n%s", out)
	}
	var doc struct {
		Hosts []struct {
			Host      string `json:"host"`
			Hostname  string `json:"hostname"`
			Processes []struct {
				Argv []string `json:"argv"`
				Unit string   `json:"unit"`
				Shm  []struct {
					Path string `json:"path"`
				} `json:"shm"`
			} `json:"processes"`
			Findings []struct {
				Evidence []string `json:"evidence"`
				Fix      []string `json:"fix"`
			} `json:"findings"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	got := doc.Hosts[0]
	jp, jf := got.Processes[0], got.Findings[0]
	for _, c := range []struct{ got, want string }{
		{got.Host, h.Name}, {got.Hostname, h.Snapshot.Host.Hostname}, {jp.Unit, p.Unit},
		{jp.Shm[0].Path, p.Shm[0].Path}, {strings.Join(jp.Argv, "\x00"), strings.Join(p.Argv, "\x00")},
		{jf.Evidence[len(jf.Evidence)-1], f.Evidence[len(f.Evidence)-1]}, {jf.Fix[len(jf.Fix)-1], f.Fix[len(f.Fix)-1]},
	} {
		if c.got != c.want {
			t.Errorf("decoded %q, want %q", c.got, c.want)
		}
	}
}
