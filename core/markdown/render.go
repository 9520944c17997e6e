package markdown

import (
	"html"
	"net/url"
	"strconv"
	"strings"
)

// Dialect is a platform's native text format.
type Dialect int

const (
	// Plain is text with no markup at all: links read "text (url)". It is the
	// fallback every adapter can send and the text part of an email.
	Plain Dialect = iota
	// SlackMrkdwn is Slack's mrkdwn: *bold*, _italic_, `code`, ```pre```,
	// <url|text>; & < > escaped as entities.
	SlackMrkdwn
	// TelegramHTML is Telegram's parse_mode=HTML: <b>, <i>, <code>,
	// <pre><code class="language-x">, <a href>, <blockquote>; only < > & (and
	// " inside attributes) escaped.
	TelegramHTML
	// DiscordMarkdown is Discord's Markdown, with stray markup characters
	// backslash-escaped and @everyone/@here and <@…> mentions neutralized.
	DiscordMarkdown
	// HTML is HTML for email bodies: full escaping, only http, https and
	// mailto links.
	HTML
)

// String names the dialect for logs and tests.
func (d Dialect) String() string {
	switch d {
	case Plain:
		return "plain"
	case SlackMrkdwn:
		return "slack"
	case TelegramHTML:
		return "telegram"
	case DiscordMarkdown:
		return "discord"
	case HTML:
		return "html"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// zwsp is the zero-width space used to break markup that a platform offers
// no escape for (Slack's * _ ~ `, Discord's @everyone) without changing what
// a reader sees.
const zwsp = "\u200b"

// Convert parses src and renders it in dialect d.
func Convert(src string, d Dialect) string { return Render(Parse(src), d) }

// Render renders a parsed tree in dialect d. Text from the tree is always
// escaped for d, so the output carries no markup the tree did not ask for.
func Render(doc *Node, d Dialect) string {
	if doc == nil {
		return ""
	}
	r := &renderer{d: d}
	if d == HTML {
		r.htmlBlocks(doc.Children)
	} else {
		r.b.WriteString(r.chatBlocks(doc.Children))
	}
	return r.b.String()
}

type renderer struct {
	d Dialect
	b strings.Builder
}

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
		return r.pre(n.Lang, n.Text)
	case Quote:
		inner := r.chatBlocks(n.Children)
		if r.d == TelegramHTML {
			return "<blockquote>" + inner + "</blockquote>"
		}
		return prefixLines(inner, "> ", "> ")
	case List:
		items := make([]string, 0, len(n.Children))
		for i, it := range n.Children {
			mark := "• "
			if r.d == DiscordMarkdown {
				mark = "- "
			}
			if n.Ordered {
				mark = strconv.Itoa(n.Start+i) + ". "
			}
			body := strings.Join(blockStrings(r, it.Children), "\n")
			items = append(items, prefixLines(body, mark, strings.Repeat(" ", len(mark))))
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

func prefixLines(s, first, rest string) string {
	lines := strings.Split(s, "\n")
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return strings.Join(lines, "\n")
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
		return r.text(n.Text)
	case LineBreak:
		return "\n"
	case Bold:
		return r.wrap(n, map[Dialect][2]string{
			SlackMrkdwn: {"*", "*"}, TelegramHTML: {"<b>", "</b>"}, DiscordMarkdown: {"**", "**"},
		})
	case Italic:
		return r.wrap(n, map[Dialect][2]string{
			SlackMrkdwn: {"_", "_"}, TelegramHTML: {"<i>", "</i>"}, DiscordMarkdown: {"*", "*"},
		})
	case Code:
		return r.code(n.Text)
	case Link:
		return r.link(n)
	case Paragraph, CodeBlock, Quote, List, ListItem, Document:
		return r.chatBlock(n)
	}
	return ""
}

func (r *renderer) wrap(n *Node, marks map[Dialect][2]string) string {
	inner := r.inlines(n.Children)
	m, ok := marks[r.d]
	if !ok || inner == "" {
		return inner
	}
	return m[0] + inner + m[1]
}

// text escapes literal text for the chat dialects.
func (r *renderer) text(s string) string {
	switch r.d {
	case SlackMrkdwn:
		return slackEscape(s, true)
	case TelegramHTML:
		return telegramEscape(s)
	case DiscordMarkdown:
		return discordEscape(s)
	}
	return s
}

func (r *renderer) code(s string) string {
	switch r.d {
	case SlackMrkdwn:
		return "`" + strings.ReplaceAll(slackEscape(s, false), "`", zwsp+"`"+zwsp) + "`"
	case TelegramHTML:
		return "<code>" + telegramEscape(s) + "</code>"
	case DiscordMarkdown:
		s = neutralizeMentions(s)
		fence := strings.Repeat("`", longestRun(s, '`')+1)
		if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
			s = " " + s + " "
		}
		return fence + s + fence
	}
	return s
}

func (r *renderer) pre(lang, s string) string {
	lang = cleanLang(lang)
	switch r.d {
	case SlackMrkdwn:
		return "```\n" + breakFences(slackEscape(s, false)) + "\n```"
	case TelegramHTML:
		if lang == "" {
			return "<pre>" + telegramEscape(s) + "</pre>"
		}
		return `<pre><code class="language-` + lang + `">` + telegramEscape(s) + "</code></pre>"
	case DiscordMarkdown:
		return "```" + lang + "\n" + breakFences(neutralizeMentions(s)) + "\n```"
	}
	return s
}

func (r *renderer) link(n *Node) string {
	u, ok := SafeURL(n.URL)
	if !ok {
		// not clickable: the text, then the target as inert text
		txt := r.inlines(n.Children)
		if txt == "" {
			return r.text(n.URL)
		}
		return txt + r.text(" ("+n.URL+")")
	}
	switch r.d {
	case SlackMrkdwn:
		label := slackEscape(plainText(n.Children), true)
		if label == "" {
			return "<" + slackURL(u) + ">"
		}
		return "<" + slackURL(u) + "|" + label + ">"
	case TelegramHTML:
		return `<a href="` + attrEscape(u) + `">` + r.inlines(n.Children) + "</a>"
	case DiscordMarkdown:
		label := r.inlines(n.Children)
		if label == "" {
			return "<" + linkURL(u) + ">"
		}
		return "[" + label + "](" + linkURL(u) + ")"
	}
	txt := plainText(n.Children)
	if txt == "" || txt == u {
		return u
	}
	return txt + " (" + u + ")"
}

// plainText flattens inline nodes to their text.
func plainText(nodes []*Node) string {
	var b strings.Builder
	for _, n := range nodes {
		switch n.Kind {
		case Text, Code:
			b.WriteString(n.Text)
		case LineBreak:
			b.WriteString(" ")
		default:
			b.WriteString(plainText(n.Children))
		}
	}
	return b.String()
}

// linkURL percent-encodes the characters that would end a Discord (url) or
// <url> early.
func linkURL(u string) string {
	return strings.NewReplacer("<", "%3C", ">", "%3E", "(", "%28", ")", "%29", " ", "%20").Replace(u)
}

// slackURL encodes a URL for Slack's <url|text>: "|" and ">" would end it
// early, and Slack wants & written as &amp; everywhere.
func slackURL(u string) string {
	return strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E", "&", "&amp;").Replace(u)
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

// slackEscape escapes & < > as Slack requires; with inert set, the
// formatting characters * _ ~ ` (which Slack cannot escape) are fenced by
// zero-width spaces so they can neither open nor close formatting.
func slackEscape(s string, inert bool) string {
	var b strings.Builder
	for _, c := range s {
		switch c {
		case '&':
			b.WriteString("&amp;")
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '*', '_', '~', '`':
			if inert {
				b.WriteString(zwsp + string(c) + zwsp)
			} else {
				b.WriteRune(c)
			}
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

func telegramEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

func attrEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

// discordEscape backslash-escapes Markdown characters and neutralizes
// mentions in literal text.
func discordEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`\*_~`+"`"+`|[]()>#`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return neutralizeMentions(b.String())
}

// neutralizeMentions keeps @everyone, @here and <@…>/<#…>/<t:…> references
// from pinging or resolving, by a zero-width space after "@" or "<".
func neutralizeMentions(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(s[i])
		switch s[i] {
		case '@':
			rest := strings.ToLower(s[i+1:])
			if strings.HasPrefix(rest, "everyone") || strings.HasPrefix(rest, "here") {
				b.WriteString(zwsp)
			}
		case '<':
			b.WriteString(zwsp)
		}
	}
	return b.String()
}

// breakFences keeps code from closing its own fence.
func breakFences(s string) string {
	return strings.ReplaceAll(s, "```", "`"+zwsp+"``")
}

func longestRun(s string, c byte) int {
	best, n := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			n++
			best = max(best, n)
		} else {
			n = 0
		}
	}
	return best
}

// htmlBlocks renders email HTML.
func (r *renderer) htmlBlocks(nodes []*Node) {
	for _, n := range nodes {
		r.htmlBlock(n)
	}
}

func (r *renderer) htmlBlock(n *Node) {
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

func (r *renderer) htmlInlines(nodes []*Node) {
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
