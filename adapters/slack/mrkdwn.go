package slack

import (
	"strings"

	"github.com/opsgate/opsgate/core/markdown"
)

// mrkdwn is Slack's markdown.Dialect: *bold*, _italic_, `code`, ```pre```,
// <url|text>; & < > escaped as entities, and the formatting characters
// * _ ~ ` (which Slack cannot escape) fenced by zero-width spaces in text.
type mrkdwn struct{}

var _ markdown.Dialect = mrkdwn{}

// mrkdwnInert are the characters Slack formats with and offers no escape for.
const mrkdwnInert = "*_~`"

func (mrkdwn) Text(s string) string       { return markdown.Inert(markdown.EscapeEntities(s), mrkdwnInert) }
func (mrkdwn) Bold(inner string) string   { return "*" + inner + "*" }
func (mrkdwn) Italic(inner string) string { return "_" + inner + "_" }
func (mrkdwn) Quote(inner string) string  { return markdown.PrefixLines(inner, "> ", "> ") }
func (mrkdwn) Bullet() string             { return "• " }

func (mrkdwn) Code(s string) string {
	z := markdown.ZWSP
	return "`" + strings.ReplaceAll(markdown.EscapeEntities(s), "`", z+"`"+z) + "`"
}

func (mrkdwn) CodeBlock(_, s string) string {
	return "```\n" + markdown.BreakFences(markdown.EscapeEntities(s)) + "\n```"
}

// Link is <url|label>, the label as plain text (Slack renders no markup
// inside it).
func (d mrkdwn) Link(u, _, text string) string {
	label := d.Text(text)
	if label == "" {
		return "<" + slackURL(u) + ">"
	}
	return "<" + slackURL(u) + "|" + label + ">"
}

// slackURL encodes a URL for Slack's <url|text>: "|" and ">" would end it
// early, and Slack wants & written as &amp; everywhere.
func slackURL(u string) string { return urlEscapes.Replace(u) }

// urlEscapes is built once (a Replacer is safe for concurrent use).
var urlEscapes = strings.NewReplacer("|", "%7C", "<", "%3C", ">", "%3E", "&", "&amp;")

// renderMrkdwn turns opsgate's Markdown subset into Slack mrkdwn.
func renderMrkdwn(md string) string { return markdown.Convert(md, mrkdwn{}) }
