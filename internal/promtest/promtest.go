// Package promtest runs Prometheus's own tools on what gputriage exports: promtool to check
// metrics and alerting rules, and a real prometheus-node-exporter whose textfile collector
// reads gputriage's file, scraped over loopback. Only tests import it.
package promtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gputriage/gputriage/internal/testenv"
)

// need finds a tool of Debian's prometheus packages. Without it the test skips, saying so,
// except under CI (CI=true), where a missing tool is a broken .ci/run and fails.
func need(t testing.TB, name, pkg string) string {
	t.Helper()
	return testenv.Need(t, "Prometheus", "apt-get install "+pkg, name)
}

// CheckMetrics runs `promtool check metrics` on an exposition and fails the test on any
// non-zero exit (a parse error or a lint problem), with promtool's words.
func CheckMetrics(t testing.TB, exposition string) {
	t.Helper()
	cmd := exec.Command(need(t, "promtool", "prometheus"), "check", "metrics")
	cmd.Stdin = strings.NewReader(exposition)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\nthe exposition:\n%s", err, out, exposition)
	}
}

// Promtool runs promtool with args (e.g. "check", "rules", FILE) and returns its output and
// error.
func Promtool(t testing.TB, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(need(t, "promtool", "prometheus"), args...).CombinedOutput()
	return string(out), err
}

// NodeExporter is a running prometheus-node-exporter with only its textfile collector.
type NodeExporter struct {
	URL string // http://127.0.0.1:PORT/metrics
}

// StartNodeExporter starts prometheus-node-exporter on a loopback port, reading the *.prom
// files of dir, with every other collector off; it is stopped when the test ends. The test
// listens on the port and hands the exporter that socket (systemd's socket activation: fd 3,
// LISTEN_FDS, LISTEN_PID), so no other process on this machine can take the port between its
// choice and its use, nor answer the scrapes in the exporter's place.
func StartNodeExporter(t testing.TB, dir string) *NodeExporter {
	t.Helper()
	bin := need(t, "prometheus-node-exporter", "prometheus-node-exporter")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sock, err := ln.(*net.TCPListener).File()
	ln.Close() // the exporter's copy of the socket keeps listening
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	addr := ln.Addr().String()
	// sh sets LISTEN_PID to its own PID, which exec keeps: the exporter's.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, bin, "--web.systemd-socket",
		"--collector.disable-defaults", "--collector.textfile", "--collector.textfile.directory="+dir)
	cmd.ExtraFiles = []*os.File{sock}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("node exporter's log:\n%s", logs.String())
		}
	})
	ne := &NodeExporter{URL: "http://" + addr + "/metrics"}
	for deadline := time.Now().Add(testenv.HangGuard); ; {
		if _, err := ne.scrape(); err == nil {
			return ne
		}
		select {
		case <-done:
			t.Fatalf("prometheus-node-exporter exited: %s", logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus-node-exporter did not answer on %s within %s: %s", addr, testenv.HangGuard, logs.String())
		}
	}
}

// Scrape fetches /metrics, as Prometheus would.
func (ne *NodeExporter) Scrape(t testing.TB) string {
	t.Helper()
	body, err := ne.scrape()
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func (ne *NodeExporter) scrape() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ne.URL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(body), fmt.Errorf("scrape %s: %s: %s", ne.URL, resp.Status, body)
	}
	return string(body), nil
}
