package triage

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/gputriage/gputriage/kube"
	"github.com/gputriage/gputriage/report"
	"github.com/gputriage/gputriage/sshconf"
)

// dryRunHost is one host of --dry-run's JSON.
type dryRunHost struct {
	Host            string   `json:"host"`
	HostName        string   `json:"hostname"`
	Port            int      `json:"port"`
	User            string   `json:"user"`
	IdentityFiles   []string `json:"identity_files"`
	IdentitiesOnly  bool     `json:"identities_only"`
	ProxyJump       []string `json:"proxy_jump"`       // each hop as user@hostname:port
	ProxyJumpHosts  []string `json:"proxy_jump_hosts"` // each hop as named
	ProxyCommand    *string  `json:"proxy_command"`
	KnownHostsFiles []string `json:"known_hosts_files"`
	HostKeyAlias    *string  `json:"host_key_alias"`
	StrictHostKey   string   `json:"strict_host_key_checking"`
	ConnectTimeout  *float64 `json:"connect_timeout_seconds"`
	Ignored         []string `json:"ignored"`
	Kubernetes      *string  `json:"kubernetes,omitempty"` // how a k8s/NODE host is reached; the SSH fields are empty
}

// DryRun prints how each host would be reached, like ssh -G, without connecting: as JSON
// when format is "json", else as text.
func DryRun(w io.Writer, hosts []Host, format string) error {
	doc := struct {
		Hosts []dryRunHost `json:"hosts"`
	}{Hosts: []dryRunHost{}}
	for _, r := range hosts {
		if r.Node != "" {
			how := fmt.Sprint(kube.NodeVia{K: r.kube, Node: r.Node})
			doc.Hosts = append(doc.Hosts, dryRunHost{Host: r.Label, IdentityFiles: []string{}, ProxyJump: []string{},
				ProxyJumpHosts: []string{}, KnownHostsFiles: []string{}, Ignored: []string{}, Kubernetes: &how})
			continue
		}
		h := r.Conf
		j := dryRunHost{Host: r.Label, HostName: h.HostName, Port: h.Port, User: h.User,
			IdentityFiles: nonNil(h.IdentityFiles), IdentitiesOnly: h.IdentitiesOnly, ProxyJump: []string{}, ProxyJumpHosts: []string{},
			KnownHostsFiles: nonNil(h.KnownHostsFiles()), StrictHostKey: h.StrictHostKeyChecking, Ignored: []string{}}
		for _, n := range h.Notes {
			j.Ignored = append(j.Ignored, n.String())
		}
		for _, hop := range h.ProxyJump {
			j.ProxyJump = append(j.ProxyJump, hopSpec(hop))
			j.ProxyJumpHosts = append(j.ProxyJumpHosts, hop.Alias)
		}
		if h.ProxyCommand != "" {
			j.ProxyCommand = &h.ProxyCommand
		}
		if h.HostKeyAlias != "" {
			j.HostKeyAlias = &h.HostKeyAlias
		}
		if h.ConnectTimeout > 0 {
			s := h.ConnectTimeout.Seconds()
			j.ConnectTimeout = &s
		}
		doc.Hosts = append(doc.Hosts, j)
	}
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	_, err := io.WriteString(w, dryRunText(doc.Hosts))
	return err
}

// dryRunText is --dry-run's text: each host and how it would be reached, sanitized.
func dryRunText(hosts []dryRunHost) string {
	var b strings.Builder
	for _, j := range hosts {
		fmt.Fprintf(&b, "%s\n", report.Sanitize(j.Host))
		if j.Kubernetes != nil {
			fmt.Fprintf(&b, "  %s\n", report.Sanitize(*j.Kubernetes))
			continue
		}
		fmt.Fprintf(&b, "  hostname %s, port %d, user %s\n", report.Sanitize(j.HostName), j.Port, report.Sanitize(j.User))
		fmt.Fprintf(&b, "  identity files: %s\n", listOrNone(j.IdentityFiles))
		if j.IdentitiesOnly {
			b.WriteString("  identities only: yes\n")
		}
		hops := make([]string, len(j.ProxyJump))
		for i, spec := range j.ProxyJump {
			hops[i] = spec + " (" + j.ProxyJumpHosts[i] + ")"
		}
		fmt.Fprintf(&b, "  proxy jump: %s\n", listOrNone(hops))
		if j.ProxyCommand != nil {
			fmt.Fprintf(&b, "  proxy command: %s\n", report.Sanitize(*j.ProxyCommand))
		}
		fmt.Fprintf(&b, "  known_hosts: %s\n", listOrNone(j.KnownHostsFiles))
		if j.HostKeyAlias != nil {
			fmt.Fprintf(&b, "  host key alias: %s\n", report.Sanitize(*j.HostKeyAlias))
		}
		for _, ig := range j.Ignored {
			fmt.Fprintf(&b, "  ignored: %s\n", report.Sanitize(ig))
		}
	}
	return b.String()
}

// hopSpec writes a jump hop as ssh -G writes a ProxyJump: user@host:port, an IPv6 address in
// brackets.
func hopSpec(h sshconf.Host) string {
	return h.User + "@" + net.JoinHostPort(h.HostName, strconv.Itoa(h.Port))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = report.Sanitize(x)
	}
	return strings.Join(out, ", ")
}
