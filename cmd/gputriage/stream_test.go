package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/simfleet"
	"github.com/gputriage/gputriage/internal/sshtest"
	"github.com/gputriage/gputriage/internal/testenv"
	"github.com/gputriage/gputriage/parse"
)

// fixtureFor returns a fixture capture with its nonce replaced by the one the probe's stdin
// carries ("set -- NONCE SECONDS"); the rest of stdin is drained.
func fixtureFor(t *testing.T, stdin io.Reader, name string) []byte {
	raw, err := os.ReadFile(filepath.Join(repoRoot(t), "fixtures", name+".capture"))
	if err != nil {
		t.Error(err)
		return nil
	}
	c, err := parse.SplitCapture(raw)
	if err != nil {
		t.Error(err)
		return nil
	}
	first, _ := bufio.NewReaderSize(io.LimitReader(stdin, 512), 512).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, stdin) }()
	return bytes.ReplaceAll(raw, []byte(c.Nonce), []byte(simfleet.NonceOf(first)))
}

// TestStreamRefusesOutputThatIsNotACapture: a host that answers the probe with 50 MiB of
// garbage, or with a preamble longer than a login banner, is reported as bad-output after
// the client has read a bounded beginning of it and hung up; a host that prints a short
// banner before the capture is triaged.
func TestStreamRefusesOutputThatIsNotACapture(t *testing.T) {
	l := newSSHLab(t)
	flood := func(sent *atomic.Int64, prefix []byte) func(e *sshtest.Exec) int {
		return func(e *sshtest.Exec) int {
			go func() { _, _ = io.Copy(io.Discard, e.Stdin) }()
			n, err := e.Stdout.Write(prefix)
			sent.Add(int64(n))
			chunk := bytes.Repeat([]byte("\x1b[31mgarbage\xff"), 4<<10)
			for err == nil && sent.Load() < 50<<20 {
				n, err = e.Stdout.Write(chunk)
				sent.Add(int64(n))
			}
			return 0
		}
	}
	var garbageSent, bannerSent atomic.Int64
	l.server(t, "garbage", sshtest.Config{Exec: flood(&garbageSent, nil)})
	l.server(t, "long-banner", sshtest.Config{Exec: flood(&bannerSent, []byte("Welcome\n"))})
	l.server(t, "banner", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		io.WriteString(e.Stdout, "Welcome to gpu01!\nLast login: today\n")
		_, _ = e.Stdout.Write(fixtureFor(t, e.Stdin, "clean"))
		return 0
	}})
	config := l.write(t, "")
	start := time.Now()
	out, errOut, code := cli(t, nil, "-F", config, "--timeout", "30s", "--format", "json", "garbage", "long-banner", "banner")
	t.Logf("%s; the hosts sent %d and %d bytes; stderr:\n%s", time.Since(start), garbageSent.Load(), bannerSent.Load(), errOut)
	if code != exitHostsFailed {
		t.Errorf("exit %d, want %d", code, exitHostsFailed)
	}
	doc := decodeDoc(t, out)
	for i, name := range []string{"garbage", "long-banner"} {
		h := doc.Hosts[i]
		if h.Error == nil || h.Error.Kind != "bad-output" || !strings.Contains(h.Error.Message, "not a gputriage capture") {
			t.Errorf("%s: reported %+v, want probe/bad-output", name, h.Error)
		}
	}
	// The SSH channel's window lets a host write a few MiB before the client reads; the old
	// sweep read 32 MiB of either before giving up.
	for name, sent := range map[string]int64{"garbage": garbageSent.Load(), "long-banner": bannerSent.Load()} {
		if sent > 8<<20 {
			t.Errorf("%s: the host could send %d MiB: the client did not stop reading at the head", name, sent>>20)
		}
	}
	if h := doc.Hosts[2]; !h.OK || h.Error != nil {
		t.Errorf("banner: not triaged: %+v", h.Error)
	}
	if !strings.Contains(errOut, "banner: the login shell printed 36 bytes before the probe started") {
		t.Errorf("stderr does not name the dropped banner")
	}
}

// TestSaveWritesEachHostAtOnce: --save writes a host's capture as soon as that host is done,
// while slower hosts are still being probed. The slow host here answers only once the fast
// one's capture is on disk, so a sweep that wrote --save at the end would time it out.
func TestSaveWritesEachHostAtOnce(t *testing.T) {
	l := newSSHLab(t)
	save := filepath.Join(t.TempDir(), "sweep")
	l.server(t, "fast", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		_, _ = e.Stdout.Write(fixtureFor(t, e.Stdin, "clean"))
		return 0
	}})
	l.server(t, "slow", sshtest.Config{Exec: func(e *sshtest.Exec) int {
		raw := fixtureFor(t, e.Stdin, "busy")
		for deadline := time.Now().Add(testenv.HangGuard); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(save, "fast.capture")); err == nil {
				_, _ = e.Stdout.Write(raw)
				return 0
			}
		}
		return 1
	}})
	config := l.write(t, "")
	out, errOut, code := cli(t, nil, "collect", "--save", save, "-F", config, "--timeout", "5s", "fast", "slow")
	if code != exitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, out, errOut)
	}
	for _, name := range []string{"fast", "slow"} {
		b, err := os.ReadFile(filepath.Join(save, name+".capture"))
		if err != nil || !strings.Contains(out, fmt.Sprintf("%s: saved %d bytes", name, len(b))) {
			t.Errorf("%s: %v; collect said:\n%s", name, err, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(save, "hosts")); err != nil || string(b) != "fast\nslow\n" {
		t.Errorf("hosts index %q (%v)", b, err)
	}
}
