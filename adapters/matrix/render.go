package matrix

import (
	"fmt"
	"html"
	"regexp"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/markdown"
)

// MaxBody is the largest formatted_body of one message, in bytes. Matrix
// caps a whole event at 65,536 bytes of JSON; the plain body (the same text
// without tags) and the envelope must fit beside it, so replies are cut at
// a quarter of that, which also reads well in clients.
const MaxBody = 16000

// htmlDialect is Matrix's formatted_body subset (org.matrix.custom.html)
// as a markdown.Dialect: <b>, <i>, <code>, <pre><code class="language-x">,
// <a href>, <blockquote>. Text is entity-escaped and the room-wide mention
// "@room" is broken with a zero-width space, so no outside text pings a
// room or forms a tag.
type htmlDialect struct{}

var _ markdown.Dialect = htmlDialect{}

func (htmlDialect) Text(s string) string       { return inertText(s) }
func (htmlDialect) Bold(inner string) string   { return "<b>" + inner + "</b>" }
func (htmlDialect) Italic(inner string) string { return "<i>" + inner + "</i>" }
func (htmlDialect) Code(s string) string       { return "<code>" + inertText(s) + "</code>" }
func (htmlDialect) Quote(inner string) string  { return "<blockquote>" + inner + "</blockquote>" }
func (htmlDialect) Bullet() string             { return "• " }

func (htmlDialect) CodeBlock(lang, s string) string {
	if lang == "" {
		return "<pre><code>" + inertText(s) + "</code></pre>"
	}
	return `<pre><code class="language-` + lang + `">` + inertText(s) + "</code></pre>"
}

func (htmlDialect) Link(u, label, _ string) string {
	return `<a href="` + markdown.EscapeAttr(u) + `">` + label + "</a>"
}

// renderHTML turns opsgate's Markdown subset into Matrix HTML; line breaks
// stay "\n" until send, where they become <br> outside <pre>.
func renderHTML(md string) string { return markdown.Convert(md, htmlDialect{}) }

var roomMention = regexp.MustCompile(`(?i)@room\b`)

// inertText escapes s for formatted_body and defuses "@room".
func inertText(s string) string {
	s = markdown.EscapeEntities(s)
	return roomMention.ReplaceAllStringFunc(s, func(m string) string { return m[:1] + markdown.ZWSP + m[1:] })
}

// inertPlain defuses "@room" in a plain body.
func inertPlain(s string) string {
	return roomMention.ReplaceAllStringFunc(s, func(m string) string { return m[:1] + markdown.ZWSP + m[1:] })
}

var (
	preRE = regexp.MustCompile(`(?s)<pre>.*?</pre>`)
	tagRE = regexp.MustCompile(`<[^>]*>`)
)

// formattedBody is a rendered chunk as formatted_body: "\n" outside
// <pre> becomes <br>, since HTML collapses line breaks.
func formattedBody(h string) string {
	var b strings.Builder
	last := 0
	for _, loc := range preRE.FindAllStringIndex(h, -1) {
		b.WriteString(strings.ReplaceAll(h[last:loc[0]], "\n", "<br>"))
		b.WriteString(h[loc[0]:loc[1]])
		last = loc[1]
	}
	b.WriteString(strings.ReplaceAll(h[last:], "\n", "<br>"))
	return b.String()
}

// plainBody is the plain-text fallback of a rendered chunk: the same text
// with tags removed and entities decoded (the zero-width spaces that
// defuse mentions stay).
func plainBody(h string) string {
	h = strings.ReplaceAll(h, "<br>", "\n")
	return html.UnescapeString(tagRE.ReplaceAllString(h, ""))
}

// The reactions that decide a card, and their meaning. Clients add the
// emoji variation selector (U+FE0F) or not; both count.
const (
	reactApprove = "✅"
	reactReject  = "❌"
)

// cardContent is a card as the fields of an m.room.message: the plain body
// (Card.PlainText plus how to answer) and the HTML one. Both stay well
// under the event size limit: the preview, then long values, are cut
// first, with a pointer to the console for the full text.
func cardContent(c core.Card) (plain, formatted string) {
	argMax, previewMax := 2000, 8000
	for {
		plain, formatted = cardBodies(c, argMax, previewMax)
		if len(plain)+len(formatted) <= 3*MaxBody {
			return plain, formatted
		}
		switch {
		case previewMax > 200:
			previewMax /= 2
		case argMax > 60:
			argMax /= 2
		default:
			p := cutBytes(c.PlainText(), MaxBody)
			return inertPlain(p), formattedBody(inertText(p))
		}
	}
}

func cardBodies(c core.Card, argMax, previewMax int) (string, string) {
	trimmed := c
	trimmed.Args = make([]core.CardArg, len(c.Args))
	for i, a := range c.Args {
		trimmed.Args[i] = a
		if len(a.Value) > argMax {
			trimmed.Args[i].Value = cutBytes(a.Value, argMax)
		}
	}
	trimmed.Changes = make([]approvals.Change, len(c.Changes))
	for i, ch := range c.Changes {
		ch.From, ch.To = cutBytes(ch.From, argMax), cutBytes(ch.To, argMax)
		trimmed.Changes[i] = ch
	}
	if len(c.Preview) > previewMax {
		trimmed.Preview = cutBytes(c.Preview, previewMax) + "\n(preview truncated; full text in the console)"
	}
	plain := trimmed.PlainText()
	if trimmed.Pending() {
		plain += "\n\n" + howToAnswerPlain
	}
	if trimmed.BatchPending() {
		plain += "\n" + approveAllPlain
	}

	var b strings.Builder
	if c.Pending() {
		b.WriteString("<b>🔐 Approval needed</b>")
	} else {
		fmt.Fprintf(&b, "<b>%s Approval %s</b>", statusIcon(c.Status), inertText(string(c.Status)))
	}
	fmt.Fprintf(&b, "<br><br><b>Tool:</b> <code>%s</code><br>", inertText(core.OneLine(c.Tool)))
	if len(trimmed.Args) > 0 {
		b.WriteString("<b>Arguments:</b><ul>")
		for _, a := range trimmed.Args {
			fmt.Fprintf(&b, "<li>%s: <code>%s</code></li>", inertText(core.OneLine(a.Name)), inertText(a.Shown()))
		}
		b.WriteString("</ul>")
	}
	if lines := trimmed.ChangeLines(); len(lines) > 0 {
		fmt.Fprintf(&b, "<b>%s</b><ul>", inertText(core.ChangesHeading))
		for _, l := range lines {
			fmt.Fprintf(&b, "<li>%s</li>", inertText(l))
		}
		b.WriteString("</ul>")
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "<b>Reason:</b> %s<br>", inertText(cutBytes(core.OneLine(c.Reason), 1000)))
	}
	fmt.Fprintf(&b, "<b>Risk:</b> %s<br>", inertText(core.OneLine(string(c.Risk))))
	fmt.Fprintf(&b, "<b>Requested by:</b> %s<br>", inertText(core.OneLine(c.Requester)))
	fmt.Fprintf(&b, "<b>Approvers:</b> %s", inertText(core.OneLine(strings.Join(c.Approvers, ", "))))
	if c.Quorum > 1 {
		fmt.Fprintf(&b, " (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	b.WriteString("<br>")
	if c.Pending() && !c.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "<b>Expires:</b> %s<br>", c.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if c.Pending() && c.Next != "" {
		fmt.Fprintf(&b, "<b>Next:</b> %s<br>", inertText(core.OneLine(c.Next)))
	}
	if trimmed.Preview != "" {
		fmt.Fprintf(&b, "<b>Dry run:</b><pre><code>%s</code></pre>", inertText(trimmed.Preview))
	}
	if len(c.Batch) > 1 {
		fmt.Fprintf(&b, "<b>This card holds %d calls of one agent turn</b>; each is decided on its own:<ol>", len(c.Batch))
		for _, bc := range c.Batch {
			fmt.Fprintf(&b, "<li><code>%s</code>", inertText(core.OneLine(bc.Tool)))
			for _, a := range bc.Args {
				fmt.Fprintf(&b, " %s=<code>%s</code>", inertText(core.OneLine(a.Name)), inertText(cutBytes(a.Shown(), argMax/4)))
			}
			fmt.Fprintf(&b, " — %s</li>", inertText(string(bc.Status)))
		}
		b.WriteString("</ol>")
	}
	if c.BatchPending() {
		b.WriteString(approveAllHTML + "<br>")
	}
	if c.Pending() {
		b.WriteString(howToAnswerHTML)
		fmt.Fprintf(&b, "<br>Approval id: <code>%s</code>", inertText(c.ApprovalID))
	} else {
		b.WriteString("<b>" + inertText(c.OutcomeLine()) + "</b>")
	}
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
		fmt.Fprintf(&b, `<br><a href="%s">Open in the console</a>`, markdown.EscapeAttr(u))
	}
	return inertPlain(plain), b.String()
}

const howToAnswerPlain = "React ✅ to approve or ❌ to reject, or reply to this message with " +
	"\"approve\", \"reject: <reason>\" or \"edit {\"arg\": \"value\"}\"."

const howToAnswerHTML = "React ✅ to approve or ❌ to reject, or reply to this message with " +
	"<code>approve</code>, <code>reject: &lt;reason&gt;</code> or <code>edit {\"arg\": \"value\"}</code>."

// The approve-all command a batch card asks for in a reply to it.
var (
	approveAllPlain = "Reply to this message with \"" + strings.TrimSpace(core.ApproveAllCommand("")) + "\" to approve every pending call at once."
	approveAllHTML  = "Reply to this message with <code>" + strings.TrimSpace(core.ApproveAllCommand("")) + "</code> to approve every pending call at once."
)

func statusIcon(status approvals.Status) string {
	switch status {
	case approvals.StatusApproved, approvals.StatusEdited:
		return "✅"
	case approvals.StatusRejected:
		return "❌"
	case approvals.StatusExpired:
		return "⌛"
	}
	return "ℹ️"
}

// cutBytes shortens s to at most n bytes at a rune boundary, marking the
// cut with "…".
func cutBytes(s string, n int) string { return chunk.Cut(s, n, chunk.Bytes) }
