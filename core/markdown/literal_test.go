package markdown

import (
	"strings"
	"testing"
)

func TestEscapeRendersAsText(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"[click](http://evil.example)", "<http://evil|click>", "<!channel> @everyone", "**bold** _it_ `code`",
		"- item", "  > quote", "```", "~~~go", "1. first", "12) twelfth", "a\\b", "1.2.3 is fine",
	} {
		doc := Parse(Escape(s))
		if k := markupKind(doc); k >= 0 {
			t.Errorf("Escape(%q) = %q still parses as markup (kind %d)", s, Escape(s), k)
		}
		if got := Convert(Escape(s), Plain); got != strings.TrimSpace(s) {
			t.Errorf("plain rendering of Escape(%q) = %q, want the text itself", s, got)
		}
	}
	if got := Escape("version 1.2.3, env=prod"); got != "version 1.2.3, env=prod" {
		t.Errorf("ordinary text changed: %q", got)
	}
	// A reply quoting such words holds no link, whatever surrounds them.
	doc := Parse("rejected: “" + Escape("[click](http://evil.example) <http://evil|click> <!channel> @everyone") + "”")
	if k := markupKind(doc); k >= 0 {
		t.Errorf("the quoted words parse as markup (kind %d)", k)
	}
}

// markupKind returns the first node kind other than text found in doc, or
// -1 when it is all text.
func markupKind(n *Node) Kind {
	switch n.Kind {
	case Document, Paragraph, Text, LineBreak:
	default:
		return n.Kind
	}
	for _, c := range n.Children {
		if k := markupKind(c); k >= 0 {
			return k
		}
	}
	return -1
}

// FuzzEscape: whatever people type, the escaped text parses as text only
// and renders back as itself.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"[a](http://x)", "**b**", "- x", "1. y", "```", "> q", "\\", "_a_", "1)x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e := Escape(s)
		if k := markupKind(Parse(e)); k >= 0 {
			t.Fatalf("Escape(%q) = %q parses as markup kind %d", s, e, k)
		}
		if strings.ContainsAny(s, "\r\n") {
			return
		}
		if got := Convert(e, Plain); got != strings.TrimSpace(s) {
			t.Fatalf("Escape(%q) = %q renders as %q", s, e, got)
		}
	})
}
