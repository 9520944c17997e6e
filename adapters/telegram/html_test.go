package telegram

import (
	"regexp"
	"strings"
	"testing"
)

// The Telegram HTML dialect's cases, moved here from core/markdown with the
// dialect itself.

func TestHTMLRender(t *testing.T) {
	t.Parallel()
	const src = "Deploy **api** _now_: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <hi> & bye\n```\n\n- one\n- two\n\n> note"
	const want = "Deploy <b>api</b> <i>now</i>: <code>v1</code> see <a href=\"https://ex.com/a?b=1&amp;c=2\">docs</a>\n\n<pre><code class=\"language-sh\">echo &lt;hi&gt; &amp; bye</code></pre>\n\n• one\n• two\n\n<blockquote>note</blockquote>"
	if got := renderHTML(src); got != want {
		t.Fatalf("renderHTML\n got %q\nwant %q", got, want)
	}
}

// TestHTMLHostile: hostile text renders inert; each case names what must
// not appear (active markup) and what must (the text survives).
func TestHTMLHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src     string
		mustNot, must []string
	}{
		{"TelegramReserved", "a < b > c & d", []string{"a < b", "> c", " & d"}, []string{"a &lt; b &gt; c &amp; d"}},
		{"TelegramScript", "<script>x</script> <b>y</b>", []string{"<script>", "<b>y"}, []string{"&lt;script&gt;"}},
		{"TelegramJavascriptLink", "[x](javascript:alert(1))", []string{"href"}, []string{"javascript:alert(1)"}},
		{"TelegramQuoteInHref", `[x](https://a.b/"onclick="y)`, []string{`"onclick`}, []string{"&quot;onclick"}},
		{"TelegramUnbalanced", "**bold _it", []string{"<b>", "<i>"}, []string{"**bold _it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := renderHTML(tt.src)
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

func TestHTMLDeepNestingIsBounded(t *testing.T) {
	t.Parallel()
	src := strings.Repeat(">", 5000) + " x\n" + strings.Repeat("**_", 3000) + strings.Repeat("[", 3000) + strings.Repeat("`", 3000)
	if renderHTML(src) == "" {
		t.Fatal("rendered nothing")
	}
}

var telegramTag = regexp.MustCompile(`<(/?)(b|i|code|pre|a|blockquote)( href="[^"<>]*"| class="language-[A-Za-z0-9_+#.-]+")?>`)

// checkTags asserts that every "<" in out starts an allowed tag and that the
// tags are balanced; it returns a description of the first problem.
func checkTags(out string) string {
	var stack []string
	pos := 0
	for _, m := range telegramTag.FindAllStringSubmatchIndex(out, -1) {
		if strings.Contains(out[pos:m[0]], "<") {
			return "raw < in " + out[pos:m[0]]
		}
		pos = m[1]
		name := out[m[4]:m[5]]
		if m[3] > m[2] { // closing
			if len(stack) == 0 || stack[len(stack)-1] != name {
				return "unbalanced </" + name + ">"
			}
			stack = stack[:len(stack)-1]
		} else {
			stack = append(stack, name)
		}
	}
	if strings.Contains(out[pos:], "<") {
		return "raw < in " + out[pos:]
	}
	if len(stack) > 0 {
		return "left open " + strings.Join(stack, ",")
	}
	return ""
}

// FuzzHTML: whatever the input, the output has only Telegram's tags, balanced.
func FuzzHTML(f *testing.F) {
	for _, s := range []string{"**a** <b>", "_a_ *b* &amp;", "`<c>`", "```go\n</pre>\n```", "[t<](https://u?a=\"<)", "> <q>", "@everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out := renderHTML(src)
		if p := checkTags(out); p != "" {
			t.Fatalf("%s\nsrc %q\nout %q", p, src, out)
		}
	})
}
