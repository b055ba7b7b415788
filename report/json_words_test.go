package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/diagnose"
	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/parse"
)

// The words of a finding are composed from its facts alone, and JSON carries the facts: so a
// finding decoded from a report's JSON composes again into the very words the report shows.
// These tests hold that for every finding of every capture and JSON golden there is.

// TestWordsFromJSONGoldens recomposes the words of every finding in the command's JSON
// goldens (the fixtures replayed) from the facts in those files alone.
func TestWordsFromJSONGoldens(t *testing.T) {
	files, _ := filepath.Glob("../cmd/gputriage/testdata/golden/*.json")
	v1, _ := filepath.Glob("../cmd/gputriage/testdata/golden/*/*.json")
	if len(files) == 0 {
		t.Fatal("no JSON goldens")
	}
	for _, file := range append(files, v1...) {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checkWordsFromJSON(t, file, raw)
	}
}

// TestWordsFromJSONCaptures diagnoses every capture there is (fixtures, diagnose's testdata,
// a synthetic crowded host past every bound a result keeps) and recomposes each finding's
// words from its JSON, with secrets shown, masked, and redacted. (The hosts of this package's
// goldens are not diagnosed: their findings' words are written by hand, to test rendering.)
func TestWordsFromJSONCaptures(t *testing.T) {
	raw := simfleet.SyntheticCapture(1100, 3000)
	snap, err := parse.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []Host{{Name: "synthetic", Snapshot: snap, Result: diagnose.Diagnose(snap, reportTime)}, staleShmHost(t)}
	for _, pattern := range []string{"../fixtures/*.capture", "../fixtures/*/*.capture", "../diagnose/testdata/*/*.capture", "../nodecheck/testdata/*/*.capture"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			hosts = append(hosts, captureHost(t, file))
		}
	}
	if len(hosts) < 10 {
		t.Fatalf("only %d captures found", len(hosts))
	}
	for _, o := range []Options{{ShowSecrets: true}, {}, {Redact: true}} {
		checkWordsFromJSON(t, "captures", []byte(render(t, JSON, hosts, o)))
	}
}

// staleShmHost is the clean fixture with stale /dev/shm entries no process uses, and
// /dev/shm nearly full: shm-stale and shm-full, which no capture shows; the probe ran as a
// user, not root, which the words say.
func staleShmHost(t *testing.T) Host {
	raw, err := os.ReadFile("../fixtures/clean.capture")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := parse.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	now := *snap.Host.Time
	old := now.Add(-50 * time.Hour)
	snap.Host.UID, snap.Host.User = ptr(1000), "alice"
	const gib = 1 << 30
	snap.Shm = parse.Shm{SizeBytes: ptr(int64(64 * gib)), UsedBytes: ptr(int64(63 * gib)), AvailBytes: ptr(int64(gib / 2)), Listed: true,
		Entries: []parse.ShmEntry{
			{Path: "/dev/shm/Llama-3-70B", Type: 'd', Bytes: 4096, TreeBytes: 40 * gib, MTime: old, UID: 0},
			{Path: "/dev/shm/Llama-3-70B/model.safetensors", Type: 'f', Bytes: 40 * gib, TreeBytes: 40 * gib, MTime: old.Add(time.Minute)},
			{Path: "/dev/shm/notes.bin", Type: 'f', Bytes: 500 << 20, TreeBytes: 500 << 20, MTime: old},
		}}
	return Host{Name: "stale-shm", Snapshot: snap, Result: diagnose.Diagnose(snap, now)}
}

// checkWordsFromJSON decodes each finding of a JSON report, composes its words from its
// facts and compares them with the words the report carries.
func checkWordsFromJSON(t *testing.T, name string, doc []byte) {
	t.Helper()
	hosts, err := ReadFindings(doc)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	n := 0
	codes := map[string]int{}
	for _, h := range hosts {
		for _, want := range h.Findings {
			n++
			codes[want.Code]++
			got := want
			diagnose.ComposeWords(&got)
			where := name + ": " + h.Host + ": " + want.Code
			same(t, where+" title", got.Title, want.Title)
			same(t, where+" explanation", got.Explanation, want.Explanation)
			same(t, where+" evidence", strings.Join(got.Evidence, "\n"), strings.Join(want.Evidence, "\n"))
			same(t, where+" fix", strings.Join(got.Fix, "\n"), strings.Join(want.Fix, "\n"))
		}
	}
	if n == 0 && filepath.Base(name) != "clean.json" { // a clean host has none
		t.Errorf("%s: no findings", name)
	}
	t.Logf("%s: %d findings recomposed: %v", name, n, codes)
}

func same(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s composed from its JSON facts differs:\n got: %q\nwant: %q", what, got, want)
	}
}
