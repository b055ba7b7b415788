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
			// head -c 68 (limit 4 + 64) cannot have passed body (18) + "\n" + prefix (45) + "rc=1" + "\n" (69 bytes)
			in: "gputriage-capture v1 nonce=" + testNonce + "\n@@gputriage " + testNonce + " begin a limit=4\n" + strings.Repeat("z", 18) + "\n@@gputriage " + testNonce + " rc=1\n@@gputriage " + testNonce + " end a\n" +
				"@@gputriage " + testNonce + " done\n",
			sections: []want{{"a", strings.Repeat("z", 18), nil, true}},
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

// A section longer than its declared limit did not come from the probe (which cuts at
// LIMIT+64): it is cut there and marked truncated, so a host cannot make the parser hold more.
func TestSectionCutAtDeclaredLimit(t *testing.T) {
	const nonce = "0123456789abcdef0123456789abcdef"
	body := strings.Repeat("x", 10000)
	raw := "gputriage-capture v1 nonce=" + nonce + "\n@@gputriage " + nonce + " begin shm-df limit=100\n" + body +
		"\n@@gputriage " + nonce + " rc=0\n@@gputriage " + nonce + " end shm-df\n@@gputriage " + nonce + " done\n"
	c, err := SplitCapture([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	s := c.Section("shm-df")
	if s == nil || len(s.Body) != 164 || !s.Truncated || s.ExitCode != nil {
		t.Fatalf("section = %+v", s)
	}
}
