package email

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// renderReply turns the markdown of a reply into email HTML: the native
// rich form of mail, with everything from outside escaped and only http,
// https and mailto links kept (markdown.RenderHTML).
func renderReply(md string) string { return markdown.ConvertHTML(md) }

// cardSubject names the tool and its target: the card's headline in its
// pending form, so the card, the answers and the closing mail share a
// subject (Gmail threads by subject).
func cardSubject(c core.Card) string {
	c.Status = "pending"
	return oneLine(c.Headline(), 180)
}

// cardText is the plain-text card: complete on its own, read hours later,
// with the exact ways to answer. The requester's copy (approver false)
// says where approvers decide instead: it carries no reply token.
func cardText(c core.Card, approver bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n", cardSubject(c))
	fmt.Fprintf(&b, "%s asks to run %s.\n\n", c.Requester, c.Tool)
	fmt.Fprintf(&b, "Tool:         %s\n", c.Tool)
	if len(c.Args) > 0 {
		b.WriteString("Arguments:\n")
		for _, a := range c.Args {
			fmt.Fprintf(&b, "  %s: %s\n", a.Name, a.Shown())
		}
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		b.WriteString(core.ChangesHeading + "\n")
		for _, l := range lines {
			b.WriteString("  " + l + "\n")
		}
	}
	fmt.Fprintf(&b, "Reason:       %s\n", orNone(core.OneLine(c.Reason)))
	fmt.Fprintf(&b, "Risk:         %s\n", c.Risk)
	fmt.Fprintf(&b, "Requested by: %s\n", c.Requester)
	fmt.Fprintf(&b, "Approvers:    %s%s\n", strings.Join(c.Approvers, ", "), quorumNote(c))
	fmt.Fprintf(&b, "Expires:      %s\n", c.ExpiresAt.UTC().Format(time.RFC1123))
	if c.Next != "" {
		fmt.Fprintf(&b, "Next:         %s\n", core.OneLine(c.Next))
	}
	if c.Preview != "" {
		b.WriteString("\nDry run:\n")
		for _, l := range strings.Split(c.Preview, "\n") {
			b.WriteString("    " + l + "\n")
		}
	}
	if len(c.Batch) > 1 {
		fmt.Fprintf(&b, "\nThis card holds %d calls of one agent turn; each is decided on its own:\n", len(c.Batch))
		for i, bc := range c.Batch {
			fmt.Fprintf(&b, "  %d. %s", i+1, core.OneLine(bc.Tool))
			for _, a := range bc.Args {
				fmt.Fprintf(&b, " %s=%s", core.OneLine(a.Name), a.Shown())
			}
			fmt.Fprintf(&b, " — %s\n", bc.Status)
		}
	}
	if !c.Pending() {
		b.WriteString("\n" + c.OutcomeLine() + "\n")
		return b.String()
	}
	if !approver {
		b.WriteString("\nThis copy is for your information: your request waits for the approvers above, who got\n")
		b.WriteString("their own mail to answer. Replying to this copy decides nothing.\n")
		if c.ConsoleURL != "" {
			fmt.Fprintf(&b, "\nFollow it in the console: %s\n", c.ConsoleURL)
		}
		fmt.Fprintf(&b, "\nApproval id: %s\n", c.ApprovalID)
		return b.String()
	}
	b.WriteString("\nHOW TO ANSWER: reply to this mail (keep the address it replies to; it carries\n")
	b.WriteString("your own token for this approval, which counts only from your address; do not forward it).\n")
	b.WriteString("The first line of your reply decides; quoted text is ignored.\n\n")
	b.WriteString("  approve\n\n")
	b.WriteString("  reject: <reason>\n\n")
	b.WriteString("  edit\n")
	for _, l := range editLines(c.Args) {
		b.WriteString("  " + l + "\n")
	}
	b.WriteString("  (edit, then every argument as key: value lines or as one JSON object;\n")
	b.WriteString("   they replace the proposed arguments as a whole)\n")
	if c.BatchPending() {
		fmt.Fprintf(&b, "\n  %s\n  (approves every pending call of this card at once)\n", strings.TrimSpace(core.ApproveAllCommand("")))
	}
	if c.ConsoleURL != "" {
		fmt.Fprintf(&b, "\nOr decide in the console (it asks you to confirm): %s\n", c.ConsoleURL)
	}
	fmt.Fprintf(&b, "\nApproval id: %s\n", c.ApprovalID)
	return b.String()
}

// cardHTML is the HTML part of the card: the same content, every value
// escaped.
func cardHTML(c core.Card, approver bool) string {
	e := html.EscapeString
	var b strings.Builder
	b.WriteString(`<div style="font-family:sans-serif">`)
	fmt.Fprintf(&b, "<h2>%s</h2>\n", e(cardSubject(c)))
	fmt.Fprintf(&b, "<p><b>%s</b> asks to run <code>%s</code>.</p>\n", e(c.Requester), e(c.Tool))
	b.WriteString(`<table cellpadding="4" style="border-collapse:collapse">` + "\n")
	row := func(k, v string) {
		fmt.Fprintf(&b, "<tr><th align=\"left\" valign=\"top\">%s</th><td>%s</td></tr>\n", k, v)
	}
	row("Tool", "<code>"+e(c.Tool)+"</code>")
	if len(c.Args) > 0 {
		var args strings.Builder
		for _, a := range c.Args {
			fmt.Fprintf(&args, "<code>%s</code>: <code>%s</code><br>", e(a.Name), e(a.Shown()))
		}
		row("Arguments", args.String())
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		var ch strings.Builder
		for _, l := range lines {
			ch.WriteString(e(l) + "<br>")
		}
		row("Edited", ch.String())
	}
	row("Reason", e(orNone(core.OneLine(c.Reason))))
	row("Risk", "<b>"+e(string(c.Risk))+"</b>")
	row("Requested by", e(c.Requester))
	row("Approvers", e(strings.Join(c.Approvers, ", ")+quorumNote(c)))
	row("Expires", e(c.ExpiresAt.UTC().Format(time.RFC1123)))
	if c.Next != "" {
		row("Next", e(core.OneLine(c.Next)))
	}
	b.WriteString("</table>\n")
	if c.Preview != "" {
		fmt.Fprintf(&b, "<p><b>Dry run:</b></p>\n<pre>%s</pre>\n", e(c.Preview))
	}
	if len(c.Batch) > 1 {
		fmt.Fprintf(&b, "<p><b>This card holds %d calls of one agent turn</b>; each is decided on its own:</p>\n<ol>\n", len(c.Batch))
		for _, bc := range c.Batch {
			fmt.Fprintf(&b, "<li><code>%s</code>", e(core.OneLine(bc.Tool)))
			for _, a := range bc.Args {
				fmt.Fprintf(&b, " %s=<code>%s</code>", e(core.OneLine(a.Name)), e(a.Shown()))
			}
			fmt.Fprintf(&b, " — %s</li>\n", e(string(bc.Status)))
		}
		b.WriteString("</ol>\n")
	}
	if !c.Pending() {
		fmt.Fprintf(&b, "<p><b>%s</b></p></div>\n", e(c.OutcomeLine()))
		return b.String()
	}
	if !approver {
		b.WriteString("<p>This copy is for your information: your request waits for the approvers above, who got their own mail to answer. ")
		b.WriteString("Replying to this copy decides nothing.</p>\n")
		if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
			fmt.Fprintf(&b, "<p>Follow it in the <a href=\"%s\">console</a>.</p>\n", e(u))
		}
		fmt.Fprintf(&b, "<p style=\"color:#666\">Approval id: %s</p></div>\n", e(c.ApprovalID))
		return b.String()
	}
	b.WriteString("<p><b>How to answer:</b> reply to this mail (keep the address it replies to; it carries your own token for this approval, " +
		"which counts only from your address; do not forward it). ")
	b.WriteString("The first line of your reply decides; quoted text is ignored.</p>\n<ul>\n")
	b.WriteString("<li><code>approve</code></li>\n<li><code>reject: &lt;reason&gt;</code></li>\n")
	b.WriteString("<li><code>edit</code> followed by every argument as <code>key: value</code> lines or one JSON object, e.g.<pre>edit\n")
	for _, l := range editLines(c.Args) {
		b.WriteString(e(l) + "\n")
	}
	b.WriteString("</pre></li>\n")
	if c.BatchPending() {
		fmt.Fprintf(&b, "<li><code>%s</code> approves every pending call of this card at once</li>\n", e(strings.TrimSpace(core.ApproveAllCommand(""))))
	}
	b.WriteString("</ul>\n")
	if u, ok := markdown.SafeURL(c.ConsoleURL); ok && c.ConsoleURL != "" {
		fmt.Fprintf(&b, "<p>Or decide in the <a href=\"%s\">console</a> (it asks you to confirm).</p>\n", e(u))
	}
	fmt.Fprintf(&b, "<p style=\"color:#666\">Approval id: %s</p></div>\n", e(c.ApprovalID))
	return b.String()
}

// outcomeText is the short mail that closes an approval's thread.
func outcomeText(c core.Card) string {
	line := c.OutcomeLine()
	if line == "" {
		line = "Approval " + string(c.Status)
	}
	return line + ".\n\n" + cardSubject(c) + "\nApproval id: " + c.ApprovalID +
		"\n\nThis approval is closed; replies to this thread no longer decide anything.\n"
}

// editLines is the example an approver copies under "edit": key: value
// lines, or, when a value holds a line break (which would read as another
// argument: "1.2.3\nenv: prod"), the arguments as one JSON object.
func editLines(args []core.CardArg) []string {
	lines := make([]string, 0, len(args))
	for _, a := range args {
		if a.Shown() != a.Value {
			m := make(map[string]string, len(args))
			for _, a := range args {
				m[a.Name] = a.Value
			}
			b, _ := json.MarshalIndent(m, "", "  ")
			return strings.Split(string(b), "\n")
		}
		lines = append(lines, a.Name+": "+a.Value)
	}
	return lines
}

func quorumNote(c core.Card) string {
	if c.Quorum > 1 {
		return fmt.Sprintf(" (%d of %d approvals so far)", c.Approvals, c.Quorum)
	}
	return ""
}

func orNone(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(none given)"
	}
	return s
}

// oneLine folds s onto one line of at most n runes: header values must not
// carry line breaks.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}

// textToHTML wraps plain text for the HTML part of mails written as text.
func textToHTML(s string) string {
	return `<div style="font-family:sans-serif;white-space:pre-wrap">` + html.EscapeString(s) + "</div>\n"
}
