package slack

import (
	"strings"
	"testing"
)

// The mrkdwn dialect's cases, moved here from core/markdown with the
// dialect itself.

func TestMrkdwnRender(t *testing.T) {
	t.Parallel()
	const src = "Deploy **api** _now_: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <hi> & bye\n```\n\n- one\n- two\n\n> note"
	const want = "Deploy *api* _now_: `v1` see <https://ex.com/a?b=1&amp;c=2|docs>\n\n```\necho &lt;hi&gt; &amp; bye\n```\n\n• one\n• two\n\n> note"
	if got := renderMrkdwn(src); got != want {
		t.Fatalf("renderMrkdwn\n got %q\nwant %q", got, want)
	}
}

// TestMrkdwnHostile: hostile text renders inert; each case names what must
// not appear (active markup) and what must (the text survives).
func TestMrkdwnHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src     string
		mustNot, must []string
	}{
		{"SlackChannelPing", "hey <!channel> and <@U123>", []string{"<!channel>", "<@U123>"}, []string{"&lt;!channel&gt;"}},
		{"SlackUnbalancedStars", "**a* and *b", []string{"**a*", " *b"}, []string{"a", "b"}},
		{"SlackScript", "<script>alert(1)</script>", []string{"<script>"}, []string{"&lt;script&gt;"}},
		{"SlackJavascriptLink", "[click](javascript:alert(1))", []string{"<javascript:", "|click>"}, []string{"click"}},
		{"SlackPipeInURL", "[x](https://a.b/?q=a|b>c)", []string{"q=a|b"}, []string{"%7C"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := renderMrkdwn(tt.src)
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

func TestMrkdwnDeepNestingIsBounded(t *testing.T) {
	t.Parallel()
	src := strings.Repeat(">", 5000) + " x\n" + strings.Repeat("**_", 3000) + strings.Repeat("[", 3000) + strings.Repeat("`", 3000)
	if renderMrkdwn(src) == "" {
		t.Fatal("rendered nothing")
	}
}

// FuzzMrkdwn: whatever the input, the only <…> in the output are links.
func FuzzMrkdwn(f *testing.F) {
	for _, s := range []string{"**a** <b>", "_a_ *b* &amp;", "`<c>`", "```go\n</pre>\n```", "[t<](https://u?a=\"<)", "> <q>", "<!channel>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := renderMrkdwn(src)
		for i := strings.IndexByte(out, '<'); i >= 0; i = strings.IndexByte(out[i+1:], '<') + i + 1 {
			rest := out[i:]
			if !strings.HasPrefix(rest, "<http://") && !strings.HasPrefix(rest, "<https://") && !strings.HasPrefix(rest, "<mailto:") {
				t.Fatalf("active <…> in %q from %q", out, src)
			}
			if strings.IndexByte(out[i+1:], '<') < 0 {
				break
			}
		}
	})
}
