package telegram

import "github.com/opsgate/opsgate/core/markdown"

// htmlDialect is Telegram's parse_mode=HTML as a markdown.Dialect: <b>, <i>,
// <code>, <pre><code class="language-x">, <a href>, <blockquote>; only < > &
// (and " inside attributes) escaped.
type htmlDialect struct{}

var _ markdown.Dialect = htmlDialect{}

func (htmlDialect) Text(s string) string       { return markdown.EscapeEntities(s) }
func (htmlDialect) Bold(inner string) string   { return "<b>" + inner + "</b>" }
func (htmlDialect) Italic(inner string) string { return "<i>" + inner + "</i>" }
func (htmlDialect) Code(s string) string       { return "<code>" + markdown.EscapeEntities(s) + "</code>" }
func (htmlDialect) Quote(inner string) string  { return "<blockquote>" + inner + "</blockquote>" }
func (htmlDialect) Bullet() string             { return "• " }

func (htmlDialect) CodeBlock(lang, s string) string {
	if lang == "" {
		return "<pre>" + markdown.EscapeEntities(s) + "</pre>"
	}
	return `<pre><code class="language-` + lang + `">` + markdown.EscapeEntities(s) + "</code></pre>"
}

func (htmlDialect) Link(u, label, _ string) string {
	return `<a href="` + markdown.EscapeAttr(u) + `">` + label + "</a>"
}

// renderHTML turns opsgate's Markdown subset into Telegram HTML.
func renderHTML(md string) string { return markdown.Convert(md, htmlDialect{}) }
