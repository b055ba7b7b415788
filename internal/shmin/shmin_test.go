package shmin

import (
	"bytes"
	"testing"
)

func TestMinify(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"comments and indentation", "# head\nset -u\n\tif x; then\n\t\t# why\n\t\ty  # kept\n\tfi\n", "\nset -u\nif x; then\n\ny  # kept\nfi\n"},
		{"single quotes span lines", "A='\n\t# awk comment\n\tprint\n'\n\t# x\n", "A='\n\t# awk comment\n\tprint\n'\n\n"},
		{"double quotes span lines", "A=\"a\n\t# text\n\"\n", "A=\"a\n\t# text\n\"\n"},
		{"quoted substitution", "A=\"$(f \"x\n\t# in code\n\ty\")\n\t# text\n\"\n\tz\n", "A=\"$(f \"x\n\t# in code\n\ty\")\n\t# text\n\"\nz\n"},
		{"substitution in code", "A=$(\n\t# c\n\tf)\n\tg\n", "A=$(\n\nf)\ng\n"},
		{"case in substitution", "A=\"$(case $x in a) echo ;; esac\n\t# t\n\")\"\n", "A=\"$(case $x in a) echo ;; esac\n\t# t\n\")\"\n"},
		{"arithmetic", "x=$((1 + (2)))\n\t'y\n\t'\n", "x=$((1 + (2)))\n'y\n\t'\n"},
		{"continuation", "f a \\\n\tb\n\tc\n", "f a \\\n\tb\nc\n"},
		{"not comments", "echo $# ${#x} a#b 'it''s'\n\t# c\n", "echo $# ${#x} a#b 'it''s'\n\n"},
		{"quote in comment", "# it's\n\tx\n", "\nx\n"},
		{"brace with quotes", "a=\"${b#\"c\n\t\"}\"\n\td\n", "a=\"${b#\"c\n\t\"}\"\nd\n"},
		{"no final newline", "\tx\n\t# c", "x\n"},
	} {
		if got := string(Minify([]byte(c.in))); got != c.want {
			t.Errorf("%s: Minify(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// What Minify cannot follow for certain it leaves alone.
func TestMinifyUnchanged(t *testing.T) {
	for _, in := range []string{
		"cat <<EOF\n\t# kept\nEOF\n",
		"echo 'open\n\t# x\n",
		"echo \"open\n",
		"f \\\n",
	} {
		if got := Minify([]byte(in)); !bytes.Equal(got, []byte(in)) {
			t.Errorf("Minify(%q) = %q, want it unchanged", in, got)
		}
	}
}

// Every line stays: a shell's error messages name the same line numbers.
func TestMinifyKeepsLines(t *testing.T) {
	in := []byte("# a\n\n\tb\n  # c\nd # e\n")
	if got := Minify(in); bytes.Count(got, []byte("\n")) != bytes.Count(in, []byte("\n")) {
		t.Errorf("Minify(%q) = %q: lines changed", in, got)
	}
}
