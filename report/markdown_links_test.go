package report

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gputriage/gputriage/parse"
)

// linkyHost carries, in every kind of host string, words GitHub would link: URLs, www names,
// email addresses, @mentions and #references.
func linkyHost() Host {
	h := incidentHost()
	const links = "https://evil.example/x www.evil.example mallory@evil.example @octocat (#1234) [x](http://e.example) <https://a.example> ftp://f.example|WWW.b.example"
	h.Snapshot.Host.Kernel = "6.8 " + links
	h.Snapshot.GPUs[0].Name = "GPU " + links
	p := &h.Result.Processes[0]
	p.User = "@octocat"
	p.Argv = append(p.Argv, "--url", "https://evil.example/model", "--notify", "@team", "#42", "www.x.io")
	p.Unit = "svc@www.evil.example.service"
	p.Shm[0].Path = "/dev/shm/@admin/www.evil.example"
	f := &h.Result.Findings[0]
	f.Title += " " + links
	f.Explanation = links + "\n" + links
	f.Evidence = append(f.Evidence, links, "#99 at the start")
	f.Files = append(f.Files, "/dev/shm/https://x.example")
	h.Snapshot.Notes = []parse.Note{{Code: "not-root", Message: links}}
	h.Err = nil
	return h
}

// stripCode removes fenced code blocks, code spans and the raw captures' <details> blocks:
// GitHub links nothing inside them. A finding's <details> block is Markdown and is kept.
func stripCode(md string) string {
	md = regexp.MustCompile("(?s)<details><summary>raw capture.*?</details>").ReplaceAllString(md, "")
	md = regexp.MustCompile("(?sm)^(`{3,})[a-z]*\n.*?^`{3,}$").ReplaceAllString(md, "")
	return regexp.MustCompile("`[^`\n]*`").ReplaceAllString(md, "")
}

// TestMarkdownNoAutolinks renders link-like remote strings through cmark-gfm with GitHub's
// autolink extension: no <a> comes out; and outside code no @mention, #reference, URL or
// www name is left for GitHub's own filters (which cmark cannot show) to link.
func TestMarkdownNoAutolinks(t *testing.T) {
	hosts := []Host{linkyHost(), linkyHost()}
	hosts[1].Name = "gpu02"
	for _, hs := range [][]Host{hosts[:1], hosts} {
		md := render(t, Markdown, hs, Options{Verbose: true})
		html := cmarkGFM(t, md)
		if strings.Contains(html, "<a ") {
			t.Errorf("a remote string became a link:\n%s", html)
		}
		outside := stripCode(md)
		for _, bad := range []string{`(^|[^\w])@\w`, `(^|[^\w&])#\d`, `://`, `(?i)www\.`} {
			if m := regexp.MustCompile(bad).FindString(outside); m != "" {
				t.Errorf("%q left outside code (%s):\n%s", m, bad, outside)
			}
		}
		// Shown, not dropped: the words are there, in code spans.
		for _, want := range []string{"`@octocat`", "`https://evil.example/model`", "`mallory@evil.example`", "`(#1234)`"} {
			if !strings.Contains(md, want) {
				t.Errorf("markdown lacks %s", want)
			}
		}
	}
}

func TestMdTextLinkable(t *testing.T) {
	for in, want := range map[string]string{
		"see https://x.example/a_b now": "see `https://x.example/a_b` now",
		"a|www.x.io|b":                  `a\|` + "`www.x.io`" + `\|b`,
		"ping @alice, or #12":           "ping `@alice,` or `#12`",
		"plain_word":                    `plain\_word`,
		"user@host:22":                  "`user@host:22`",
		"x\u202e@y":                     "`x\\u202e@y`",
	} {
		if got := mdText(in); got != want {
			t.Errorf("mdText(%q) = %q, want %q", in, got, want)
		}
	}
}
