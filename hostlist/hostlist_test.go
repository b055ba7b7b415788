package hostlist

import (
	"errors"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	tests := []struct {
		in   string
		want string // targets joined by space
	}{
		{"gpu01", "gpu01"},
		{"gpu[01-04]", "gpu01 gpu02 gpu03 gpu04"},
		{"node[1-4,7,10-12]", "node1 node2 node3 node4 node7 node10 node11 node12"},
		{"rack[1-2]-gpu[01-02]", "rack1-gpu01 rack1-gpu02 rack2-gpu01 rack2-gpu02"},
		{"gpu[08-11]", "gpu08 gpu09 gpu10 gpu11"},
		{"ops@gpu[1-2]", "ops@gpu1 ops@gpu2"},
		{"gpu[1-2]:2222", "gpu1:2222 gpu2:2222"},
		{"ops@[fe80::1]:2222", "ops@[fe80::1]:2222"},
		{"[::1]", "[::1]"},
		{"::1", "[::1]"},
		{"10.0.0.11:22", "10.0.0.11:22"},
		{"a,b[1-2],c", "a b1 b2 c"},
		{"x[1-2]y", "x1y x2y"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in)
		if err != nil {
			t.Errorf("Expand(%q): %v", tt.in, err)
			continue
		}
		var s []string
		for _, g := range got {
			s = append(s, g.String())
		}
		if strings.Join(s, " ") != tt.want {
			t.Errorf("Expand(%q) = %q, want %q", tt.in, strings.Join(s, " "), tt.want)
		}
	}
}

func TestExpandErrorsNameTheBadPart(t *testing.T) {
	tests := []struct{ in, part string }{
		{"gpu[01-", "without ']'"},
		{"gpu01]", "without '['"},
		{"gpu[5-1]", `"5-1"`},
		{"gpu[a-b]", `"a-b"`},
		{"gpu[]", "empty range"},
		{"gpu:99999", `"99999"`},
		{"gpu[1-100000]", "more than 20000"},
		{"r[1-1000]n[1-1000]", "more than 20000"},
		{"@gpu", "bad user"},
	}
	for _, tt := range tests {
		_, err := Expand(tt.in)
		if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.part) {
			t.Errorf("Expand(%q) error = %v, want one naming %s", tt.in, err, tt.part)
		}
	}
}

func TestExpandAllDedupKeepsOrder(t *testing.T) {
	got, err := ExpandAll([]string{"gpu[02-03]", "gpu01", "gpu02", "ops@gpu02"})
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, g := range got {
		s = append(s, g.String())
	}
	if strings.Join(s, " ") != "gpu02 gpu03 gpu01 ops@gpu02" {
		t.Errorf("got %q", s)
	}
}

func TestFold(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"gpu03", "gpu07", "gpu08", "gpu09"}, "gpu[03,07-09]"},
		{[]string{"gpu01", "gpu02", "gpu10", "gpu11"}, "gpu[01-02,10-11]"},
		{[]string{"node1", "node2", "node10"}, "node[1-2,10]"},
		{[]string{"gpu12"}, "gpu12"},
		{[]string{"login", "gpu1", "gpu2", "login"}, "login,gpu[1-2]"},
		{[]string{"rack1-gpu01", "rack1-gpu02", "rack2-gpu01"}, "rack1-gpu[01-02],rack2-gpu01"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := Fold(tt.in); got != tt.want {
			t.Errorf("Fold(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Folding then expanding gives back the same set.
func TestFoldRoundTrip(t *testing.T) {
	in := []string{"gpu01", "gpu02", "gpu03", "gpu05", "gpu07", "gpu08", "gpu16"}
	back, err := Expand(Fold(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(in) {
		t.Fatalf("round trip: %v", back)
	}
	for i := range in {
		if back[i].Host != in[i] {
			t.Errorf("round trip %d: %s != %s", i, back[i].Host, in[i])
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"gpu[01-16]", "node[1-4,7,10-12]", "u@[::1]:22", "a,b", "x[1-2]y[3-4]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := Expand(s)
		if err == nil && len(ts) > MaxHosts {
			t.Fatalf("%d hosts", len(ts))
		}
		names := make([]string, len(ts))
		for i, x := range ts {
			names[i] = x.Host
		}
		_ = Fold(names)
	})
}
