package discord

import (
	"strings"
	"testing"
)

// The Discord Markdown dialect's cases, moved here from core/markdown with
// the dialect itself.

func TestMarkdownRender(t *testing.T) {
	t.Parallel()
	const src = "Deploy **api** _now_: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <hi> & bye\n```\n\n- one\n- two\n\n> note"
	const want = "Deploy **api** *now*: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <\u200bhi> & bye\n```\n\n- one\n- two\n\n> note"
	if got := renderMarkdown(src); got != want {
		t.Fatalf("renderMarkdown\n got %q\nwant %q", got, want)
	}
}

// TestMarkdownHostile: hostile text renders inert; each case names what
// must not appear (active markup) and what must (the text survives).
func TestMarkdownHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src     string
		mustNot, must []string
	}{
		{"DiscordEveryone", "@everyone @here @Everyone", []string{"@everyone", "@here", "@Everyone"}, []string{"@\u200beveryone"}},
		{"DiscordEveryoneInCode", "`@everyone`\n\n```\n@here\n```", []string{"@everyone", "@here"}, nil},
		{"DiscordUserMention", "hi <@123456> and <#42>", []string{"<@123456>", "<#42>"}, nil},
		{"DiscordStrayMarkup", "a*b ~~c~~ __d > e `f", []string{"~~c~~", "__d"}, []string{`\~\~c\~\~`, `\>`, "\\`f"}},
		{"DiscordFenceBreakout", "```\nx ``` y\n```", []string{"x ``` y"}, nil},
		{"DiscordJavascriptLink", "[x](javascript:alert(1))", []string{"](javascript"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := renderMarkdown(tt.src)
			for _, s := range tt.mustNot {
				if strings.Contains(got, s) {
					t.Errorf("output %q contains %q", got, s)
				}
			}
			for _, s := range tt.must {
				if !strings.Contains(got, s) {
					t.Errorf("output %q lacks %q", got, s)
				}
			}
		})
	}
}

func TestMarkdownDeepNestingIsBounded(t *testing.T) {
	t.Parallel()
	src := strings.Repeat(">", 5000) + " x\n" + strings.Repeat("**_", 3000) + strings.Repeat("[", 3000) + strings.Repeat("`", 3000)
	if renderMarkdown(src) == "" {
		t.Fatal("rendered nothing")
	}
}

// FuzzMarkdown: whatever the input, nothing in the output pings everyone.
func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{"**a** <b>", "_a_ *b* &amp;", "`<c>`", "```go\n</pre>\n```", "[t<](https://u?a=\"<)", "> <q>", "@everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := renderMarkdown(src)
		if strings.Contains(out, "@everyone") || strings.Contains(out, "@here") {
			t.Fatalf("mention in %q", out)
		}
	})
}
