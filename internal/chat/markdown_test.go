package chat

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

const reply = "Deployed **api** to *staging*:\n\n```\ndeployed api 1.2.3\n\x1b[2Jgone\n```\n\n- see [the runbook](https://example.com/rb)\n- `opsgate runs show`\n\n> quoted\x1b]0;title\x07"

// ours matches the SGR sequences the ANSI dialect writes itself.
var ours = regexp.MustCompile("\x1b\\[(1|2|3|4|22|23|24|36|39)m")

// TestRepliesRenderMarkdown: a reply's Markdown is rendered, never
// printed as fences or asterisks; on a terminal with styles, in a pipe as
// plain text; outside escape sequences stay visible text either way.
func TestRepliesRenderMarkdown(t *testing.T) {
	t.Parallel()
	for _, ansi := range []bool{false, true} {
		lines := renderMarkdown(reply, ansi)
		joined := strings.Join(lines, "\n")
		plain := ours.ReplaceAllString(joined, "")
		if strings.Contains(plain, "\x1b") || strings.Contains(plain, "\x07") {
			t.Fatalf("ansi=%v: an outside escape sequence reached the terminal: %q", ansi, joined)
		}
		for _, bad := range []string{"```", "**", "*staging*", "`opsgate"} {
			if strings.Contains(plain, bad) {
				t.Fatalf("ansi=%v: markup %q printed:\n%s", ansi, bad, plain)
			}
		}
		for _, want := range []string{"Deployed api to staging:", "│ deployed api 1.2.3", `│ \u001B[2Jgone`, "• see the runbook (https://example.com/rb)",
			"• opsgate runs show", `quoted\u001B]0;title\u0007`} {
			if !strings.Contains(plain, want) {
				t.Fatalf("ansi=%v: lacks %q:\n%s", ansi, want, plain)
			}
		}
		if ansi && !strings.Contains(joined, sgrBold+"api"+sgrBoldOff) {
			t.Fatalf("no bold on a terminal: %q", joined)
		}
		if !ansi && joined != plain {
			t.Fatalf("styles in a pipe: %q", joined)
		}
	}
}

// FuzzRenderMarkdown: whatever a reply holds, the terminal gets no
// escape sequence but the dialect's own.
func FuzzRenderMarkdown(f *testing.F) {
	f.Add(reply)
	f.Add("[x](javascript:alert(1)) `\x1b[31m` **\x9b2J**")
	f.Fuzz(func(t *testing.T, md string) {
		for _, ansi := range []bool{false, true} {
			out := ours.ReplaceAllString(strings.Join(renderMarkdown(md, ansi), "\n"), "")
			if strings.ContainsAny(out, "\x1b\x07\u009b\u202e") || !utf8.ValidString(out) {
				t.Fatalf("ansi=%v: %q renders %q", ansi, md, out)
			}
		}
	})
}
