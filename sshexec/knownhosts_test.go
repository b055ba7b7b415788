package sshexec

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

func TestMatchHostList(t *testing.T) {
	long := strings.Repeat("a", 1023)
	tests := []struct {
		host, list string
		want       bool
	}{
		{"gpu01", "gpu01", true},
		{"gpu01", "GPU01", true}, // patterns are lower-cased; the name already is
		{"gpu01", "other,Gpu01", true},
		{"gpu01", "gpu0", false},
		{"gpu01", "gpu*", true},
		{"gpu01", "gpu?1", true},
		{"gpu01", "gpu?", false},
		{"gpu01", "*,!gpu01", false},
		{"gpu01", "!gpu02,gpu*", true},
		{"gpu01", "!gpu*", false}, // a negation alone never matches
		{"[gpu01]:2222", "[GPU01]:2222", true},
		{"[gpu01]:2222", "gpu01", false},
		{"[gpu01]:2222", "[gpu01]:*", true},
		{"[gpu01]:2222", "*", true},
		{"[gpu01]:2222", "gpu*", false},
		{"[gpu01]:2222", "*:2222", true},
		{"gpu01", "gpu01," + long, false}, // OpenSSH gives up on the whole list
		{"gpu01", long[:1022] + ",gpu01", true},
		{"gpu01", "", false},
		{"gpu01", "g*p*u*0*1", true},
		{"gpu01", "*****", true},
		{"gpu01", "g*x*", false},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*a*a*a*a*a*a*c", false},
	}
	for _, tc := range tests {
		if got := matchHostList(tc.host, tc.list); got != tc.want {
			t.Errorf("matchHostList(%q, %.40q) = %v, want %v", tc.host, tc.list, got, tc.want)
		}
	}
}

func hashHost(t testing.TB, host string) string {
	t.Helper()
	salt := bytes.Repeat([]byte{7}, sha1.Size)
	mac := hmac.New(sha1.New, salt)
	mac.Write([]byte(host))
	return "|1|" + base64.StdEncoding.EncodeToString(salt) + "|" + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

func TestHashedHostMatches(t *testing.T) {
	h := hashHost(t, "[gpu01]:2222")
	for _, tc := range []struct {
		field, host string
		want        bool
	}{
		{h, "[gpu01]:2222", true},
		{h, "[GPU01]:2222", false}, // the name is lower-cased before it is hashed, never the field
		{h, "gpu01", false},
		{h + ",gpu01", "[gpu01]:2222", false},
		{strings.Replace(h, "|1|", "|2|", 1), "[gpu01]:2222", false},
		{"|1|c2hvcnQ=|AAAA", "[gpu01]:2222", false}, // salt of the wrong length
		{"|1|", "[gpu01]:2222", false},
	} {
		if got := hashedHostMatches(tc.field, tc.host); got != tc.want {
			t.Errorf("hashedHostMatches(%q, %q) = %v, want %v", tc.field, tc.host, got, tc.want)
		}
	}
}

func testKey(t testing.TB, seed byte) ssh.PublicKey {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
	k, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func authorized(k ssh.PublicKey) string {
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// TestParseKnownHosts reads a real file the way OpenSSH does: a line of any length, CRLF,
// leading blanks, markers, and lines OpenSSH skips.
func TestParseKnownHosts(t *testing.T) {
	k1, k2 := testKey(t, 1), testKey(t, 2)
	longLine := "# " + strings.Repeat("x", 200<<10)
	longEntry := strings.Repeat("host.example,", 20000) + "gpu09 " + authorized(k2)
	content := strings.Join([]string{
		longLine,
		"gpu01 " + authorized(k1) + " comment here",
		"  \tgpu02,GPU03\t" + authorized(k1) + "\r",
		"",
		"@cert-authority *.example " + authorized(k2),
		"@revoked * " + authorized(k2),
		"@bogus gpu04 " + authorized(k1),
		"gpu05 ssh-rsa " + strings.TrimPrefix(authorized(k1), "ssh-ed25519 "), // type mismatch
		"gpu06 ssh-ed25519 !!!notbase64",
		"gpu07",
		longEntry,
		hashHost(t, "gpu08") + " " + authorized(k1),
		"gpu10 " + authorized(k1), // no newline at the end
	}, "\n")
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	kf := readKnownHostsFile(file)
	if kf == nil || kf.err != nil {
		t.Fatalf("read: %+v", kf)
	}
	type got struct {
		marker, host string
		line         int
	}
	var gs []got
	for _, e := range kf.entries {
		h := e.hosts
		if len(h) > 100 { // the 20,000-name entry: its end
			h = h[len(h)-11:]
		}
		gs = append(gs, got{e.marker, h, e.line})
		if e.file != file {
			t.Errorf("entry file %q", e.file)
		}
	}
	want := []got{{"", "gpu01", 2}, {"", "gpu02,GPU03", 3}, {markerCA, "*.example", 5}, {markerRevoked, "*", 6},
		{"", "ample,gpu09", 11}, {"", hashHost(t, "gpu08"), 12}, {"", "gpu10", 13}}
	if len(gs) != len(want) {
		t.Fatalf("entries %+v, want %+v", gs, want)
	}
	for i := range want {
		if gs[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, gs[i], want[i])
		}
	}
	if !kf.hashed {
		t.Errorf("a file with a hashed entry is not marked hashed")
	}
	if !kf.entries[4].matches("gpu09") || !kf.entries[1].matches("gpu03") || !kf.entries[5].matches("gpu08") {
		t.Errorf("entries do not match their hosts")
	}
}

// TestKnownHostsNotReadFully: a file over the bound, and one that fails to read, keep what was
// read before and say why.
func TestKnownHostsNotReadFully(t *testing.T) {
	k := authorized(testKey(t, 1))
	content := "gpu01 " + k + "\n" + "gpu02 " + k + "\n" + strings.Repeat("#", 1000) + "\ngpu03 " + k + "\n"
	kf := parseKnownHosts(strings.NewReader(content), "kh", 200)
	if kf.err == nil || !strings.Contains(kf.err.Error(), "kh is larger than") || len(kf.entries) != 2 {
		t.Errorf("over the bound: %d entries, err %v", len(kf.entries), kf.err)
	}
	kf = parseKnownHosts(strings.NewReader(content), "kh", int64(len(content)))
	if kf.err != nil || len(kf.entries) != 3 {
		t.Errorf("exactly at the bound: %d entries, err %v", len(kf.entries), kf.err)
	}
	dir := t.TempDir()
	if kf := readKnownHostsFile(filepath.Join(dir, "absent")); kf != nil {
		t.Errorf("a missing file reads as %+v, want nil", kf)
	}
	if kf := readKnownHostsFile(dir); kf == nil || kf.err == nil || !strings.Contains(kf.err.Error(), dir) {
		t.Errorf("a directory reads as %+v, want an error naming it", kf)
	}
}

func FuzzParseKnownHosts(f *testing.F) {
	k := authorized(testKey(f, 1))
	f.Add("gpu01 " + k + "\n@cert-authority *.x " + k + "\r\n# c\n|1|AAAA|BBBB " + k)
	f.Add("@revoked\t\t* " + k + "\n!a,b*,[c]:22 " + k)
	f.Fuzz(func(t *testing.T, s string) {
		kf := parseKnownHosts(strings.NewReader(s), "f", 1<<20)
		lines := strings.Count(s, "\n") + 1
		for _, e := range kf.entries {
			if e.line < 1 || e.line > lines || e.key == nil || e.hosts == "" {
				t.Fatalf("bad entry %+v from %q", e, s)
			}
			e.matches("[gpu01]:2222")
		}
	})
}

// BenchmarkHostKeyCheck: one hop's lookup in a file of 100,000 hashed entries, as a sweep does
// for every host: known under its own name, and known only under its bare name (the retry
// without the port reads the file twice).
func BenchmarkHostKeyCheck(b *testing.B) {
	k := authorized(testKey(b, 1))
	var sb strings.Builder
	for i := range 100000 {
		sb.WriteString(hashHost(b, fmt.Sprintf("[node%06d.example]:2222", i)) + " " + k + "\n")
	}
	sb.WriteString(hashHost(b, "bare.example") + " " + k + "\n")
	file := filepath.Join(b.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, host := range []string{"node099999.example", "bare.example"} {
		b.Run(host, func(b *testing.B) {
			t := Target{Name: "n", HostName: host, Port: 2222, KnownHostsFiles: []string{file}}
			keys := newHostKeys([]Target{t})
			b.ResetTimer()
			for range b.N {
				c := keys.newCheck(t, false, true)
				if err := c.check(lookupAddr(t), &net.TCPAddr{}, testKey(b, 1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestKnownHostsIndex: the entries a host's check finds through the index are those matching
// every line finds, in file order, whatever mix of plain names, patterns, negations, hashed
// names, markers and case the file holds.
func TestKnownHostsIndex(t *testing.T) {
	k := authorized(testKey(t, 1))
	content := "gpu01 " + k + "\n" +
		"GPU02,gpu03,gpu02 " + k + "\n" +
		"gpu0* " + k + "\n" +
		"gpu01,!gpu03 " + k + "\n" +
		"@cert-authority gpu01,*.example " + k + "\n" +
		"@revoked gpu09 " + k + "\n" +
		hashHost(t, "gpu03") + " " + k + "\n" +
		"[gpu04]:2222,gpu01 " + k + "\n" +
		"gpu0? " + k + "\n" +
		"gpu01 " + k + "\n"
	kf := parseKnownHosts(strings.NewReader(content), "kh", 1<<20)
	for _, name := range []string{"gpu01", "gpu02", "gpu03", "gpu04", "[gpu04]:2222", "gpu09", "a.example", "other"} {
		var brute, indexed []int
		for _, e := range kf.entries {
			if e.marker == markerRevoked || e.matches(name) {
				brute = append(brute, e.line)
			}
		}
		kf.candidates(name, func(e knownHost) {
			if e.marker == markerRevoked || e.matches(name) {
				indexed = append(indexed, e.line)
			}
		})
		if !slices.Equal(brute, indexed) {
			t.Errorf("%s: indexed lines %v, every line %v", name, indexed, brute)
		}
	}
}

// TestHostKeyCheckCostsNoLine: a host's check in a known_hosts file of plain names (what
// ssh and ssh-keyscan write unhashed) costs the same whatever the file's length: a sweep of
// N hosts used to match every host against every line, with allocations on each.
func TestHostKeyCheckCostsNoLine(t *testing.T) {
	k := authorized(testKey(t, 1))
	var sb strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&sb, "[10.0.%d.%d]:2222 %s\n", i/250, i%250, k)
	}
	file := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(file, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := Target{Name: "n", HostName: "10.0.39.249", Port: 2222, KnownHostsFiles: []string{file}}
	keys := newHostKeys([]Target{tg})
	key := testKey(t, 1)
	allocs := testing.AllocsPerRun(20, func() {
		if err := keys.newCheck(tg, false, true).check(lookupAddr(tg), &net.TCPAddr{}, key); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("a host's check in a 10,000-line file: %.0f allocations, want at most 100", allocs)
	}
}
