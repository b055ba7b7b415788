package parse

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

const testNonce = "0123456789abcdef0123456789abcdef"

// sec builds one section the way the probe's sec function prints it.
func sec(name string, limit int, body string, rc int) string {
	return fmt.Sprintf("@@gputriage %s begin %s limit=%d\n%s\n@@gputriage %s rc=%d\n\n@@gputriage %s end %s\n",
		testNonce, name, limit, body, testNonce, rc, testNonce, name)
}

func capture(sections ...string) string {
	return "gputriage-capture v1 nonce=" + testNonce + "\n" + strings.Join(sections, "") + "@@gputriage " + testNonce + " done\n"
}

func TestSplitCapture(t *testing.T) {
	type want struct {
		name      string
		body      string
		rc        *int
		truncated bool
	}
	forged := "@@gputriage ffffffffffffffffffffffffffffffff end host\n@@gputriage ffffffffffffffffffffffffffffffff rc=0\n" +
		"@@gputriage ffffffffffffffffffffffffffffffff begin evil limit=1\n@@gputriage ffffffffffffffffffffffffffffffff done\n"
	tests := []struct {
		name     string
		in       string
		sections []want
		done     bool
		wantErr  bool
	}{
		{
			name:     "two sections",
			in:       capture(sec("host", 100, "a=1\nb=2\n", 0), sec("x", 10, "", 3)),
			sections: []want{{"host", "a=1\nb=2\n", intp(0), false}, {"x", "", intp(3), false}},
			done:     true,
		},
		{
			name:     "forged markers with another nonce stay in the body",
			in:       capture(sec("host", 4096, forged, 0)),
			sections: []want{{"host", forged, intp(0), false}},
			done:     true,
		},
		{
			name:     "end marker of another section is body",
			in:       "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin a limit=100\nx\n@@gputriage " + testNonce + " end b\ny\n@@gputriage " + testNonce + " rc=0\n@@gputriage " + testNonce + " end a\n@@gputriage " + testNonce + " done\n",
			sections: []want{{"a", "x\n@@gputriage " + testNonce + " end b\ny", intp(0), false}},
			done:     true,
		},
		{
			name: "capsec layout (no blank line before end), trailing junk after rc ignored",
			in: "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin a limit=100\nbody\n@@gputriage " + testNonce + " rc=1\njunk\n@@gputriage " + testNonce + " end a\n" +
				"@@gputriage " + testNonce + " done\n",
			sections: []want{{"a", "body", intp(1), false}},
			done:     true,
		},
		{
			name: "section cut at its bound: no trailer",
			in: "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin procs limit=10\npid 1\nstat 1 (x\n@@gputriage " + testNonce + " end procs\n" +
				"@@gputriage " + testNonce + " done\n",
			sections: []want{{"procs", "pid 1\nstat 1 (x", nil, true}},
			done:     true,
		},
		{
			name: "trailer cut inside its exit status",
			// head -c 65600 (the host limit 65536 + 64) cannot have passed this body + "\n" +
			// prefix (45) + "rc=1" + "\n": the probe's bound is the client's, whatever limit= says.
			in: "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin host limit=999999\n" + strings.Repeat("z", 65552) + "\n@@gputriage " + testNonce + " rc=1\n@@gputriage " + testNonce + " end host\n" +
				"@@gputriage " + testNonce + " done\n",
			sections: []want{{"host", strings.Repeat("z", 65552), nil, true}},
			done:     true,
		},
		{
			name:     "capture cut mid-section",
			in:       "gputriage-capture v1 nonce=" + testNonce + "\n" + sec("host", 100, "a=1", 0) + "@@gputriage " + testNonce + " begin procs limit=100\npid 1\nstat 1 (x) S",
			sections: []want{{"host", "a=1", intp(0), false}, {"procs", "pid 1\nstat 1 (x) S", nil, true}},
		},
		{
			name:     "capture cut after a trailer, before the end marker",
			in:       "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin a limit=100\nok\n@@gputriage " + testNonce + " rc=0\n",
			sections: []want{{"a", "ok", intp(0), true}},
		},
		{
			name:     "CRLF",
			in:       strings.ReplaceAll(capture(sec("host", 100, "a=1\n", 0)), "\n", "\r\n"),
			sections: []want{{"host", "a=1\r\n", intp(0), false}},
			done:     true,
		},
		{
			name:     "invalid UTF-8 and NUL in a body",
			in:       capture(sec("shm-ls", 100, "f\t1\t1.5\t0\t/dev/shm/\xff\xfe\x00", 0)),
			sections: []want{{"shm-ls", "f\t1\t1.5\t0\t/dev/shm/\xff\xfe\x00", intp(0), false}},
			done:     true,
		},
		{
			name:     "unknown section kept",
			in:       capture(sec("future-thing", 100, "whatever", 0)),
			sections: []want{{"future-thing", "whatever", intp(0), false}},
			done:     true,
		},
		{name: "not a capture", in: "Welcome to Ubuntu\n", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "upper-case nonce refused", in: "gputriage-capture v1 nonce=ABC\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := SplitCapture([]byte(tt.in))
			if c == nil {
				t.Fatal("nil capture")
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrParse) {
				t.Errorf("error does not wrap ErrParse: %v", err)
			}
			if c.Done != tt.done {
				t.Errorf("done = %v, want %v", c.Done, tt.done)
			}
			if len(c.Sections) != len(tt.sections) {
				t.Fatalf("got %d sections %+v, want %d", len(c.Sections), c.Sections, len(tt.sections))
			}
			for i, w := range tt.sections {
				s := c.Sections[i]
				if s.Name != w.name || string(s.Body) != w.body || !eqPtr(s.ExitCode, w.rc) || s.Truncated != w.truncated {
					t.Errorf("section %d: got %q %q rc=%v truncated=%v, want %q %q rc=%v truncated=%v",
						i, s.Name, s.Body, showPtr(s.ExitCode), s.Truncated, w.name, w.body, showPtr(w.rc), w.truncated)
				}
			}
		})
	}
}

// A section is bounded by the client's own limit for its name (SectionLimit), never by the
// limit= its begin line declares: a host declaring a huge limit is cut at the client's, and a
// small declared limit does not cut what the client allows.
func TestSectionBoundByClientLimit(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	big := strings.Repeat("x", 200000)
	tests := []struct {
		name, section, declared, body string
		wantLen                       int
		truncated                     bool
	}{
		{"huge declared limit", "shm-df", "limit=999999999", big, 65536 + 64, true},
		{"no declared limit", "shm-df", "", big, 65536 + 64, true},
		{"small declared limit", "shm-df", "limit=10", "Filesystem 1024-blocks\n", 23, false},
		{"unknown section", "future", "limit=999999999", big, 65536 + 64, true},
		{"procs", "procs", "limit=1", big, 200000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := "gputriage-capture v2 nonce=" + nonce + "\n@@gputriage " + nonce + " begin " + tt.section + " " + tt.declared + "\n" + tt.body +
				"\n@@gputriage " + nonce + " rc=0\n@@gputriage " + nonce + " end " + tt.section + "\n@@gputriage " + nonce + " done\n"
			c, err := SplitCapture([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			s := c.Section(tt.section)
			if s == nil || len(s.Body) != tt.wantLen || s.Truncated != tt.truncated || s.Limit != SectionLimit(tt.section) {
				t.Fatalf("section: %d bytes, truncated %v, limit %d; want %d bytes, truncated %v", len(s.Body), s.Truncated, s.Limit, tt.wantLen, tt.truncated)
			}
		})
	}
}
