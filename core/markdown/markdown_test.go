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

// renderSrc is the sample every dialect's TestRender renders; the chat
// dialects' expectations live with their adapters.
const renderSrc = "Deploy **api** _now_: `v1` see [docs](https://ex.com/a?b=1&c=2)\n\n```sh\necho <hi> & bye\n```\n\n- one\n- two\n\n> note"

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		render func(string) string
		want   string
	}{
		{"plain", func(s string) string { return Convert(s, Plain) }, "Deploy api now: v1 see docs (https://ex.com/a?b=1&c=2)\n\necho <hi> & bye\n\n• one\n• two\n\n> note"},
		{"html", ConvertHTML, "<p>Deploy <strong>api</strong> <em>now</em>: <code>v1</code> see <a href=\"https://ex.com/a?b=1&amp;c=2\">docs</a></p>\n<pre><code class=\"language-sh\">echo &lt;hi&gt; &amp; bye</code></pre>\n<ul>\n<li>one</li>\n<li>two</li>\n</ul>\n<blockquote>\n<p>note</p>\n</blockquote>\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.render(renderSrc); got != tt.want {
				t.Fatalf("%s\n got %q\nwant %q", tt.name, got, tt.want)
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
		html    bool
		mustNot []string
		must    []string
	}{
		{"HTMLScript", "<script>alert('x')</script>", true, []string{"<script>"}, []string{"&lt;script&gt;"}},
		{"HTMLJavascriptLink", "[x](javascript:alert(1)) [y](JaVaScRiPt:1) [z](data:text/html,1)", true, []string{"href"}, []string{"javascript:alert(1)"}},
		{"HTMLAttrBreakout", `[x](https://a.b/"><script>)`, true, []string{`"><script>`, "<script>"}, nil},
		{"HTMLCodeLang", "```\"><script>\nx\n```", true, []string{"<script>"}, nil},
		{"HTMLMailtoAllowed", "[mail](mailto:a@b.c)", true, nil, []string{`href="mailto:a@b.c"`}},
		{"PlainNoMarkup", "**b** _i_ [t](https://u.v)", false, []string{"**", "_i_", "[t]"}, []string{"b i t (https://u.v)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Convert(tt.src, Plain)
			if tt.html {
				got = ConvertHTML(tt.src)
			}
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
	if out := Convert(src, Plain); out == "" {
		t.Fatal("plain rendered nothing")
	}
	if out := ConvertHTML(src); out == "" {
		t.Fatal("html rendered nothing")
	}
}

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
		Render(doc, Plain)
		RenderHTML(doc)
	})
}

func FuzzRender(f *testing.F) {
	for _, s := range []string{"**a** <b>", "_a_ *b* &amp;", "`<c>`", "```go\n</pre>\n```", "[t<](https://u?a=\"<)", "> <q>", "@everyone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		doc := Parse(src)
		if p := checkTags(RenderHTML(doc), htmlTag, map[string]bool{"br": true}); p != "" {
			t.Fatalf("html: %s\nsrc %q\nout %q", p, src, RenderHTML(doc))
		}
	})
}
