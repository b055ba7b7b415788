package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// visibleMarkdown is md without its top-level <details> blocks: what a ticket shows before a
// reader opens anything.
func visibleMarkdown(md string) string {
	var b strings.Builder
	depth := 0
	for _, l := range strings.SplitAfter(md, "\n") {
		if strings.HasPrefix(l, "<details>") {
			depth++
		}
		if depth == 0 {
			b.WriteString(l)
		}
		if strings.HasPrefix(l, "</details>") && depth > 0 {
			depth--
		}
	}
	return b.String()
}

func nonBlankLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// `gputriage --replay fixtures/ct200.capture --format markdown`, the ticket of one host: its
// raw capture is in a collapsed <details> block, and what shows before a reader opens anything
// is no longer than the terminal report (it was 307 lines, the capture whole, the GPU table
// with a row per GPU); cmark-gfm renders the capture inside the <details> element.
func TestMarkdownTicketVisiblePart(t *testing.T) {
	capture := filepath.Join(repoRoot(t), "fixtures", "ct200.capture")
	md, _, code := cli(t, nil, "--replay", capture, "--format", "markdown")
	text, _, _ := cli(t, nil, "--replay", capture)
	if code != exitFindings {
		t.Fatalf("exit %d", code)
	}
	vis := visibleMarkdown(md)
	if got, max := nonBlankLines(vis), nonBlankLines(text); got > max {
		t.Errorf("the ticket shows %d lines, the terminal report %d:\n%s", got, max, vis)
	}
	if !strings.Contains(md, "<details><summary>raw capture (17,247 bytes)</summary>") {
		t.Error("the raw capture is not in a collapsed <details> block")
	}
	if strings.Contains(vis, "gputriage-capture") || !strings.Contains(md, "gputriage-capture v2") {
		t.Error("the raw capture is not kept, or shows outside its <details> block")
	}
	if !strings.Contains(vis, "| 1-7 (each) |") || !strings.Contains(md, "| 7 | NVIDIA RTX PRO 6000 Blackwell Server Edition | 0 | 635 | 97,252 | 97,887 | 0% | 0% | 00000000:88:00.0 |") {
		t.Errorf("the GPUs are not folded as the terminal folds them, each GPU a click away:\n%s", vis)
	}
	html := cmarkGFM(t, md)
	details := regexp.MustCompile(`(?s)<details><summary>raw capture[^<]*</summary>\s*<pre><code class="language-text">gputriage-capture v2 .*?</code></pre>\s*</details>`)
	if !details.MatchString(html) {
		t.Errorf("cmark-gfm does not render the capture inside its <details> element:\n%.3000s", html)
	}
	if strings.Count(html, "gputriage-capture v2") != 1 {
		t.Error("the capture is rendered more than once, or not at all")
	}
}
