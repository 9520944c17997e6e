package markdown

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	doc := Parse("Hello **bold** and _it_ `c`\n\n```go\nx := 1\n```\n- a\n- [l](https://x.y)\n\n3. three\n4. four\n\n> quoted *it*")
	kinds := []Kind{}
	for _, n := range doc.Children {
		kinds = append(kinds, n.Kind)
	}
	want := []Kind{Paragraph, CodeBlock, List, List, Quote}
	if len(kinds) != len(want) {
		t.Fatalf("blocks %v, want %v", kinds, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Fatalf("blocks %v, want %v", kinds, want)
		}
	}
	p := doc.Children[0].Children
	if p[1].Kind != Bold || p[3].Kind != Italic || p[5].Kind != Code || p[5].Text != "c" {
		t.Fatalf("inline parse wrong: %+v", p)
	}
	if cb := doc.Children[1]; cb.Lang != "go" || cb.Text != "x := 1" {
		t.Fatalf("code block %+v", cb)
	}
	if l := doc.Children[3]; !l.Ordered || l.Start != 3 || len(l.Children) != 2 {
		t.Fatalf("ordered list %+v", l)
	}
	link := doc.Children[2].Children[1].Children[0].Children[0]
	if link.Kind != Link || link.URL != "https://x.y" {
		t.Fatalf("link %+v", link)
	}
}

func TestRender(t *testing.T) {
	t.Parallel()
	const src = "Deploy **api** _now_: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <hi> & bye\n```\n\n- one\n- two\n\n> note"
	tests := []struct {
		d    Dialect
		want string
	}{
		{Plain, "Deploy api now: v1 see docs (https://ex.com/a?b=1&c=2)\n\necho <hi> & bye\n\n• one\n• two\n\n> note"},
		{SlackMrkdwn, "Deploy *api* _now_: `v1` see <https://ex.com/a?b=1&amp;c=2|docs>\n\n```\necho &lt;hi&gt; &amp; bye\n```\n\n• one\n• two\n\n> note"},
		{TelegramHTML, "Deploy <b>api</b> <i>now</i>: <code>v1</code> see <a href=\"https://ex.com/a?b=1&amp;c=2\">docs</a>\n\n<pre><code class=\"language-sh\">echo &lt;hi&gt; &amp; bye</code></pre>\n\n• one\n• two\n\n<blockquote>note</blockquote>"},
		{DiscordMarkdown, "Deploy **api** *now*: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <\u200bhi> & bye\n```\n\n- one\n- two\n\n> note"},
		{HTML, "<p>Deploy <strong>api</strong> <em>now</em>: <code>v1</code> see <a href=\"https://ex.com/a?b=1&amp;c=2\">docs</a></p>\n<pre><code class=\"language-sh\">echo &lt;hi&gt; &amp; bye</code></pre>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n<blockquote>\n<p>note</p>\n</blockquote>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.d.String(), func(t *testing.T) {
			t.Parallel()
			if got := Convert(src, tt.d); got != tt.want {
				t.Fatalf("Convert(%s)\n got %q\nwant %q", tt.d, got, tt.want)
			}
		})
	}
}

// TestHostile checks, per dialect, that hostile text renders inert: every
// case names substrings that must not appear in the output (active markup)
// and ones that must (the text survives).
func TestHostile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		src     string
		d       Dialect
		mustNot []string
		must    []string
	}{
		{"SlackChannelPing", "hey <!channel> and <@U123>", SlackMrkdwn, []string{"<!channel>", "<@U123>"}, []string{"&lt;!channel&gt;"}},
		{"SlackUnbalancedStars", "**a* and *b", SlackMrkdwn, []string{"**a*", " *b"}, []string{"a", "b"}},
		{"SlackScript", "<script>alert(1)</script>", SlackMrkdwn, []string{"<script>"}, []string{"&lt;script&gt;"}},
		{"SlackJavascriptLink", "[click](javascript:alert(1))", SlackMrkdwn, []string{"<javascript:", "|click>"}, []string{"click"}},
		{"SlackPipeInURL", "[x](https://a.b/?q=a|b>c)", SlackMrkdwn, []string{"q=a|b"}, []string{"%7C"}},
		{"TelegramReserved", "a < b > c & d", TelegramHTML, []string{"a < b", "> c", " & d"}, []string{"a &lt; b &gt; c &amp; d"}},
		{"TelegramScript", "<script>x</script> <b>y</b>", TelegramHTML, []string{"<script>", "<b>y"}, []string{"&lt;script&gt;"}},
		{"TelegramJavascriptLink", "[x](javascript:alert(1))", TelegramHTML, []string{"href"}, []string{"javascript:alert(1)"}},
		{"TelegramQuoteInHref", `[x](https://a.b/"onclick="y)`, TelegramHTML, []string{`"onclick`}, []string{"&quot;onclick"}},
		{"TelegramUnbalanced", "**bold _it", TelegramHTML, []string{"<b>", "<i>"}, []string{"**bold _it"}},
		{"DiscordEveryone", "@everyone @here @Everyone", DiscordMarkdown, []string{"@everyone", "@here", "@Everyone"}, []string{"@\u200beveryone"}},
		{"DiscordEveryoneInCode", "`@everyone`\n\n```\n@here\n```", DiscordMarkdown, []string{"@everyone", "@here"}, nil},
		{"DiscordUserMention", "hi <@123456> and <#42>", DiscordMarkdown, []string{"<@123456>", "<#42>"}, nil},
		{"DiscordStrayMarkup", "a*b ~~c~~ __d > e `f", DiscordMarkdown, []string{"~~c~~", "__d"}, []string{`\~\~c\~\~`, `\>`, "\\`f"}},
		{"DiscordFenceBreakout", "```\nx ``` y\n```", DiscordMarkdown, []string{"x ``` y"}, nil},
		{"DiscordJavascriptLink", "[x](javascript:alert(1))", DiscordMarkdown, []string{"](javascript"}, nil},
		{"HTMLScript", "<script>alert('x')</script>", HTML, []string{"<script>"}, []string{"&lt;script&gt;"}},
		{"HTMLJavascriptLink", "[x](javascript:alert(1)) [y](JaVaScRiPt:1) [z](data:text/html,1)", HTML, []string{"href"}, []string{"javascript:alert(1)"}},
		{"HTMLAttrBreakout", `[x](https://a.b/"><script>)`, HTML, []string{`"><script>`, "<script>"}, nil},
		{"HTMLCodeLang", "```\"><script>\nx\n```", HTML, []string{"<script>"}, nil},
		{"HTMLMailtoAllowed", "[mail](mailto:a@b.c)", HTML, nil, []string{`href="mailto:a@b.c"`}},
		{"PlainNoMarkup", "**b** _i_ [t](https://u.v)", Plain, []string{"**", "_i_", "[t]"}, []string{"b i t (https://u.v)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Convert(tt.src, tt.d)
			for _, s := range tt.mustNot {
				if strings.Contains(got, s) {
					t.Errorf("%s output %q contains %q", tt.d, got, s)
				}
			}
			for _, s := range tt.must {
				if !strings.Contains(got, s) {
					t.Errorf("%s output %q lacks %q", tt.d, got, s)
				}
			}
		})
	}
}

func TestSafeURL(t *testing.T) {
	t.Parallel()
	for u, ok := range map[string]bool{
		"https://example.com/x": true, "http://a.b": true, "mailto:a@b.c": true,
		"javascript:alert(1)": false, "JAVASCRIPT:x": false, "data:text/html,x": false,
		"/relative": false, "https://": false, "https://a.b/ x": false, "vbscript:x": false,
		"\x01https://a.b": false, "": false,
	} {
		if _, got := SafeURL(u); got != ok {
			t.Errorf("SafeURL(%q) = %v, want %v", u, got, ok)
		}
	}
}

func TestDeepNestingIsBounded(t *testing.T) {
	t.Parallel()
	src := strings.Repeat(">", 5000) + " x\n" + strings.Repeat("**_", 3000) + strings.Repeat("[", 3000) + strings.Repeat("`", 3000)
	for d := Plain; d <= HTML; d++ {
		if out := Convert(src, d); out == "" {
			t.Fatalf("%s rendered nothing", d)
		}
	}
}

var telegramTag = regexp.MustCompile(`<(/?)(b|i|code|pre|a|blockquote)( href="[^"<>]*"| class="language-[A-Za-z0-9_+#.-]+")?>`)
var htmlTag = regexp.MustCompile(`<(/?)(p|br|strong|em|code|pre|a|ul|ol|li|blockquote)( href="[^"<>]*"| class="language-[A-Za-z0-9_+#.-]+"| start="-?[0-9]+")?>`)

// checkTags asserts that every "<" in out starts an allowed tag and that the
// tags are balanced; it returns a description of the first problem.
func checkTags(out string, tag *regexp.Regexp, void map[string]bool) string {
	var stack []string
	pos := 0
	for _, m := range tag.FindAllStringSubmatchIndex(out, -1) {
		if strings.Contains(out[pos:m[0]], "<") {
			return "raw < in " + out[pos:m[0]]
		}
		pos = m[1]
		name := out[m[4]:m[5]]
		if void[name] {
			continue
		}
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

func FuzzParse(f *testing.F) {
	for _, s := range []string{"**a**", "_a_ *b*", "`c`", "```go\nx\n```", "[t](https://u)", "- a\n- b", "1. a", "> q", "**a*", "<script>", "[x](javascript:1)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		doc := Parse(src)
		if doc == nil || doc.Kind != Document {
			t.Fatalf("Parse returned %+v", doc)
		}
		for d := Plain; d <= HTML; d++ {
			Render(doc, d)
		}
	})
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"**a** <b>", "_a_ *b* &amp;", "`<c>`", "```go\n</pre>\n```", "[t<](https://u?a=\"<)", "> <q>", "@everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		doc := Parse(src)
		if p := checkTags(Render(doc, TelegramHTML), telegramTag, nil); p != "" {
			t.Fatalf("telegram: %s\nsrc %q\nout %q", p, src, Render(doc, TelegramHTML))
		}
		if p := checkTags(Render(doc, HTML), htmlTag, map[string]bool{"br": true}); p != "" {
			t.Fatalf("html: %s\nsrc %q\nout %q", p, src, Render(doc, HTML))
		}
		slack := Render(doc, SlackMrkdwn)
		for i := strings.IndexByte(slack, '<'); i >= 0; i = strings.IndexByte(slack[i+1:], '<') + i + 1 {
			rest := slack[i:]
			if !strings.HasPrefix(rest, "<http://") && !strings.HasPrefix(rest, "<https://") && !strings.HasPrefix(rest, "<mailto:") {
				t.Fatalf("slack: active <…> in %q from %q", slack, src)
			}
			if strings.IndexByte(slack[i+1:], '<') < 0 {
				break
			}
		}
		discord := Render(doc, DiscordMarkdown)
		if strings.Contains(discord, "@everyone") || strings.Contains(discord, "@here") {
			t.Fatalf("discord: mention in %q", discord)
		}
	})
}
