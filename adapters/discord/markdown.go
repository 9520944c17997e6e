package discord

import (
	"strings"

	"github.com/opsgate/opsgate/core/markdown"
)

// dialect is Discord's Markdown as a markdown.Dialect, with stray markup
// characters backslash-escaped and @everyone/@here and <@…> mentions
// neutralized.
type dialect struct{}

var _ markdown.Dialect = dialect{}

// markupChars are the characters Discord formats with; text escapes each
// with a backslash.
const markupChars = `\*_~` + "`" + `|[]()>#`

func (dialect) Text(s string) string {
	return neutralizeMentions(markdown.BackslashEscape(s, markupChars))
}
func (dialect) Bold(inner string) string   { return "**" + inner + "**" }
func (dialect) Italic(inner string) string { return "*" + inner + "*" }
func (dialect) Quote(inner string) string  { return markdown.PrefixLines(inner, "> ", "> ") }
func (dialect) Bullet() string             { return "- " }

func (dialect) Code(s string) string {
	s = neutralizeMentions(s)
	fence := strings.Repeat("`", markdown.LongestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		s = " " + s + " "
	}
	return fence + s + fence
}

func (dialect) CodeBlock(lang, s string) string {
	return "```" + lang + "\n" + markdown.BreakFences(neutralizeMentions(s)) + "\n```"
}

func (dialect) Link(u, label, _ string) string {
	if label == "" {
		return "<" + linkURL(u) + ">"
	}
	return "[" + label + "](" + linkURL(u) + ")"
}

// linkURL percent-encodes the characters that would end a Discord (url) or
// <url> early.
func linkURL(u string) string { return linkEscapes.Replace(u) }

// linkEscapes is built once (a Replacer is safe for concurrent use).
var linkEscapes = strings.NewReplacer("<", "%3C", ">", "%3E", "(", "%28", ")", "%29", " ", "%20")

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
				b.WriteString(markdown.ZWSP)
			}
		case '<':
			b.WriteString(markdown.ZWSP)
		}
	}
	return b.String()
}
