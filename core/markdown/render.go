package markdown

import (
	"html"
	"net/url"
	"strconv"
	"strings"
)

// Dialect is how one chat platform spells the pieces of a message, as a
// slog.Handler is how one backend writes a record: the renderer here walks
// the tree and hands the dialect each piece, and the dialect only chooses
// the markup. Text is handed over raw, so a Dialect must escape every piece
// of text it emits, with the helpers in escape.go (EscapeEntities, Inert,
// BackslashEscape, BreakFences …); link URLs have passed SafeURL. Each
// adapter supplies its own (Slack mrkdwn, Telegram HTML, Discord Markdown);
// Plain is here, and HTML documents have RenderHTML.
type Dialect interface {
	// Text escapes literal text so it carries no markup.
	Text(s string) string
	// Bold and Italic wrap rendered inline content (never empty).
	Bold(inner string) string
	Italic(inner string) string
	// Code renders inline code from its raw text.
	Code(s string) string
	// CodeBlock renders fenced code from its raw text; lang is "" or a
	// safe language name.
	CodeBlock(lang, s string) string
	// Link renders a link to url (already SafeURL): label is its rendered
	// text, text the same flattened to plain text; either may be empty.
	Link(url, label, text string) string
	// Quote renders a quote around its rendered blocks.
	Quote(inner string) string
	// Bullet is the marker of an unordered list item ("• ").
	Bullet() string
}

// Plain is text with no markup at all: links read "text (url)". It is the
// fallback every adapter can send and the text part of an email.
var Plain Dialect = plain{}

type plain struct{}

func (plain) Text(s string) string         { return s }
func (plain) Bold(inner string) string     { return inner }
func (plain) Italic(inner string) string   { return inner }
func (plain) Code(s string) string         { return s }
func (plain) CodeBlock(_, s string) string { return s }
func (plain) Quote(inner string) string    { return PrefixLines(inner, "> ", "> ") }
func (plain) Bullet() string               { return "• " }
func (plain) Link(u, _, text string) string {
	if text == "" || text == u {
		return u
	}
	return text + " (" + u + ")"
}

// Convert parses src and renders it in dialect d.
func Convert(src string, d Dialect) string { return Render(Parse(src), d) }

// Render renders a parsed tree in dialect d. Every piece of text from the
// tree goes through d, so the output carries no markup the tree did not
// ask for.
func Render(doc *Node, d Dialect) string {
	if doc == nil {
		return ""
	}
	return (&renderer{d: d}).chatBlocks(doc.Children)
}

// ConvertHTML parses src and renders it as HTML (RenderHTML).
func ConvertHTML(src string) string { return RenderHTML(Parse(src)) }

// RenderHTML renders a parsed tree as an HTML fragment, for email bodies and
// the web console: full escaping, only http, https and mailto links.
func RenderHTML(doc *Node) string {
	if doc == nil {
		return ""
	}
	r := &htmlRenderer{}
	r.htmlBlocks(doc.Children)
	return r.b.String()
}

type renderer struct{ d Dialect }

type htmlRenderer struct{ b strings.Builder }

// SafeURL returns u cleaned if it is an absolute http, https or mailto URL
// without spaces or control characters; other links (javascript:, data:,
// relative) are never made clickable.
func SafeURL(u string) (string, bool) {
	u = strings.TrimSpace(u)
	if u == "" || strings.IndexFunc(u, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "", false
	}
	p, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	switch strings.ToLower(p.Scheme) {
	case "http", "https":
		if p.Host == "" {
			return "", false
		}
	case "mailto":
		if p.Opaque == "" {
			return "", false
		}
	default:
		return "", false
	}
	return u, true
}

// chatBlocks renders blocks for the chat dialects, separated by blank lines.
func (r *renderer) chatBlocks(nodes []*Node) string {
	parts := make([]string, 0, len(nodes))
	for _, n := range nodes {
		parts = append(parts, r.chatBlock(n))
	}
	return strings.Join(parts, "\n\n")
}

func (r *renderer) chatBlock(n *Node) string {
	switch n.Kind {
	case Paragraph:
		return r.inlines(n.Children)
	case CodeBlock:
		return r.d.CodeBlock(cleanLang(n.Lang), n.Text)
	case Quote:
		return r.d.Quote(r.chatBlocks(n.Children))
	case List:
		items := make([]string, 0, len(n.Children))
		for i, it := range n.Children {
			mark := r.d.Bullet()
			if n.Ordered {
				mark = strconv.Itoa(n.Start+i) + ". "
			}
			body := strings.Join(blockStrings(r, it.Children), "\n")
			items = append(items, PrefixLines(body, mark, strings.Repeat(" ", len(mark))))
		}
		return strings.Join(items, "\n")
	}
	return r.inlines([]*Node{n})
}

func blockStrings(r *renderer, nodes []*Node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, r.chatBlock(n))
	}
	return out
}

func (r *renderer) inlines(nodes []*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		b.WriteString(r.inline(n))
	}
	return b.String()
}

func (r *renderer) inline(n *Node) string {
	switch n.Kind {
	case Text:
		return r.d.Text(n.Text)
	case LineBreak:
		return "\n"
	case Bold:
		if inner := r.inlines(n.Children); inner != "" {
			return r.d.Bold(inner)
		}
		return ""
	case Italic:
		if inner := r.inlines(n.Children); inner != "" {
			return r.d.Italic(inner)
		}
		return ""
	case Code:
		return r.d.Code(n.Text)
	case Link:
		return r.link(n)
	case Paragraph, CodeBlock, Quote, List, ListItem, Document:
		return r.chatBlock(n)
	}
	return ""
}

func (r *renderer) link(n *Node) string {
	u, ok := SafeURL(n.URL)
	if !ok {
		// not clickable: the text, then the target as inert text
		txt := r.inlines(n.Children)
		if txt == "" {
			return r.d.Text(n.URL)
		}
		return txt + r.d.Text(" ("+n.URL+")")
	}
	return r.d.Link(u, r.inlines(n.Children), PlainText(n.Children))
}

func cleanLang(lang string) string {
	for _, c := range lang {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_+#.-", c)) {
			return ""
		}
	}
	if len(lang) > 32 {
		return ""
	}
	return lang
}

// htmlBlocks renders HTML blocks.
func (r *htmlRenderer) htmlBlocks(nodes []*Node) {
	for _, n := range nodes {
		r.htmlBlock(n)
	}
}

func (r *htmlRenderer) htmlBlock(n *Node) {
	b := &r.b
	switch n.Kind {
	case Paragraph:
		b.WriteString("<p>")
		r.htmlInlines(n.Children)
		b.WriteString("</p>\n")
	case CodeBlock:
		if lang := cleanLang(n.Lang); lang != "" {
			b.WriteString(`<pre><code class="language-` + lang + `">`)
		} else {
			b.WriteString("<pre><code>")
		}
		b.WriteString(html.EscapeString(n.Text))
		b.WriteString("</code></pre>\n")
	case Quote:
		b.WriteString("<blockquote>\n")
		r.htmlBlocks(n.Children)
		b.WriteString("</blockquote>\n")
	case List:
		if n.Ordered {
			b.WriteString(`<ol start="` + strconv.Itoa(n.Start) + `">` + "\n")
		} else {
			b.WriteString("<ul>\n")
		}
		for _, it := range n.Children {
			b.WriteString("<li>")
			if len(it.Children) == 1 && it.Children[0].Kind == Paragraph {
				r.htmlInlines(it.Children[0].Children)
			} else {
				r.htmlBlocks(it.Children)
			}
			b.WriteString("</li>\n")
		}
		if n.Ordered {
			b.WriteString("</ol>\n")
		} else {
			b.WriteString("</ul>\n")
		}
	default:
		r.htmlInlines([]*Node{n})
	}
}

func (r *htmlRenderer) htmlInlines(nodes []*Node) {
	b := &r.b
	for _, n := range nodes {
		switch n.Kind {
		case Text:
			b.WriteString(html.EscapeString(n.Text))
		case LineBreak:
			b.WriteString("<br>\n")
		case Bold:
			b.WriteString("<strong>")
			r.htmlInlines(n.Children)
			b.WriteString("</strong>")
		case Italic:
			b.WriteString("<em>")
			r.htmlInlines(n.Children)
			b.WriteString("</em>")
		case Code:
			b.WriteString("<code>" + html.EscapeString(n.Text) + "</code>")
		case Link:
			u, ok := SafeURL(n.URL)
			if !ok {
				r.htmlInlines(n.Children)
				b.WriteString(html.EscapeString(" (" + n.URL + ")"))
				continue
			}
			b.WriteString(`<a href="` + html.EscapeString(u) + `">`)
			r.htmlInlines(n.Children)
			b.WriteString("</a>")
		default:
			r.htmlBlock(n)
		}
	}
}
