package telegram

import (
	"encoding/json"
	"fmt"
	"html"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/markdown"
)

// MaxText is Telegram's limit on a message's text after entity parsing, in
// UTF-16 code units.
const MaxText = 4096

// esc escapes text for parse_mode=HTML: Telegram needs only <, > and &
// (and " inside attributes).
func esc(s string) string { return markdown.EscapeAttr(s) }

// visibleLen is what Telegram counts against MaxText: the text left after
// tags are parsed away and entities decoded, in UTF-16 code units.
func visibleLen(h string) int {
	var b strings.Builder
	in := false
	for _, r := range h {
		switch {
		case r == '<':
			in = true
		case r == '>' && in:
			in = false
		case !in:
			b.WriteRune(r)
		}
	}
	return chunk.Measure(html.UnescapeString(b.String()), chunk.UTF16)
}

// cutUTF16 shortens s to at most n UTF-16 units, marking the cut with "…".
func cutUTF16(s string, n int) string { return chunk.Cut(s, n, chunk.UTF16) }

// cardHTML renders a card as a self-contained Telegram HTML message: tool,
// arguments, reason, risk, requester, approvers, expiry and the dry-run
// preview in <pre>, then either how to answer or the outcome. It always fits
// MaxText: the preview, then long argument values, are cut first, with a
// pointer to the console for the full text.
func cardHTML(c core.Card) string {
	argMax, previewMax := 1000, MaxText
	for {
		s := cardHTMLWith(c, argMax, previewMax)
		over := visibleLen(s) - MaxText
		if over <= 0 {
			return s
		}
		pl := chunk.Measure(c.Preview, chunk.UTF16)
		switch {
		case c.Preview != "" && previewMax > 0 && pl > 0:
			previewMax = max(0, min(previewMax, pl)-over-64)
		case argMax > 40:
			argMax /= 2
		default:
			// Nothing left to trim that we control (a huge reason or
			// approver list): cut the visible text bluntly.
			return esc(cutUTF16(c.PlainText(), MaxText-16))
		}
	}
}

func cardHTMLWith(c core.Card, argMax, previewMax int) string {
	var b strings.Builder
	if c.Pending() {
		b.WriteString("🔐 <b>Approval needed</b>")
	} else {
		fmt.Fprintf(&b, "%s <b>Approval %s</b>", statusIcon(c.Status), esc(string(c.Status)))
	}
	fmt.Fprintf(&b, "\n\n<b>Tool:</b> <code>%s</code>\n", esc(c.Tool))
	if len(c.Args) > 0 {
		b.WriteString("<b>Arguments:</b>\n")
		for _, a := range c.Args {
			fmt.Fprintf(&b, "• %s: <code>%s</code>\n", esc(a.Name), esc(cutUTF16(a.Shown(), argMax)))
		}
	}
	if lines := c.ChangeLines(); len(lines) > 0 {
		fmt.Fprintf(&b, "<b>%s</b>\n", esc(core.ChangesHeading))
		for _, l := range lines {
			fmt.Fprintf(&b, "• %s\n", esc(cutUTF16(l, argMax)))
		}
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, "<b>Reason:</b> %s\n", esc(cutUTF16(core.OneLine(c.Reason), 1000)))
	}
	fmt.Fprintf(&b, "<b>Risk:</b> %s\n", esc(string(c.Risk)))
	fmt.Fprintf(&b, "<b>Requested by:</b> %s\n", esc(c.Requester))
	fmt.Fprintf(&b, "<b>Approvers:</b> %s", esc(strings.Join(c.Approvers, ", ")))
	if c.Quorum > 1 {
		fmt.Fprintf(&b, " (%d of %d approvals)", c.Approvals, c.Quorum)
	}
	b.WriteString("\n")
	if c.Pending() && !c.ExpiresAt.IsZero() {
		fmt.Fprintf(&b, "<b>Expires:</b> %s\n", c.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if c.Pending() && c.Next != "" {
		fmt.Fprintf(&b, "<b>Next:</b> %s\n", esc(core.OneLine(c.Next)))
	}
	if c.Preview != "" {
		p := c.Preview
		if chunk.Measure(p, chunk.UTF16) > previewMax {
			p = cutUTF16(p, previewMax)
			if c.ConsoleURL != "" {
				p += "\n(preview truncated; full text in the console)"
			}
		}
		fmt.Fprintf(&b, "\n<b>Dry run:</b>\n<pre>%s</pre>\n", esc(p))
	}
	if len(c.Batch) > 1 {
		fmt.Fprintf(&b, "\n<b>This card holds %d calls of one agent turn</b>; each is decided on its own:\n", len(c.Batch))
		for i, bc := range c.Batch {
			fmt.Fprintf(&b, "%d. <code>%s</code>", i+1, esc(bc.Tool))
			for _, a := range bc.Args {
				fmt.Fprintf(&b, " %s=<code>%s</code>", esc(a.Name), esc(cutUTF16(a.Shown(), argMax/4)))
			}
			fmt.Fprintf(&b, " — %s\n", esc(string(bc.Status)))
		}
	}
	b.WriteString("\n")
	if c.Pending() || c.BatchPending() {
		how := "Approve, reject (with feedback) or edit the arguments with the buttons below."
		if c.BatchPending() {
			how += " <b>Approve all</b> approves every pending call at once."
		}
		fmt.Fprintf(&b, "%s\nApproval id: <code>%s</code>", how, esc(c.ApprovalID))
	} else {
		b.WriteString("<b>" + esc(c.OutcomeLine()) + "</b>")
	}
	if c.ConsoleURL != "" {
		fmt.Fprintf(&b, "\n<a href=\"%s\">Open in the console</a>", esc(c.ConsoleURL))
	}
	return b.String()
}

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

// inlineButton and inlineKeyboard are the reply_markup JSON shapes.
type inlineButton struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

type inlineKeyboard struct {
	InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
}

// noKeyboard removes a message's inline keyboard when sent with an edit.
var noKeyboard = inlineKeyboard{InlineKeyboard: [][]inlineButton{}}

// cardKeyboard is the Approve / Reject / Edit row of a pending card and,
// on a batch card with calls still pending, an "Approve all" row.
func cardKeyboard(buttons *approvalref.Codec, c core.Card) (inlineKeyboard, error) {
	var rows [][]inlineButton
	if c.Pending() {
		row := make([]inlineButton, 0, 3)
		for _, b := range []struct {
			act  approvalref.Action
			text string
		}{{approvalref.Approve, "✅ Approve"}, {approvalref.Reject, "❌ Reject"}, {approvalref.Edit, "✏️ Edit"}} {
			data, err := buttons.Encode(approvalref.Ref{Action: b.act, ApprovalID: c.ApprovalID})
			if err != nil {
				return inlineKeyboard{}, err
			}
			row = append(row, inlineButton{Text: b.text, CallbackData: data})
		}
		rows = append(rows, row)
	}
	if c.BatchPending() {
		data, err := buttons.Encode(approvalref.Ref{Action: approvalref.ApproveAll, ApprovalID: c.ApprovalID})
		if err != nil {
			return inlineKeyboard{}, err
		}
		rows = append(rows, []inlineButton{{Text: fmt.Sprintf("✅ Approve all (%d calls)", len(c.Batch)), CallbackData: data}})
	}
	return inlineKeyboard{InlineKeyboard: rows}, nil
}

// questionKeyboard is the buttons of an agent's question: one per choice
// (Yes and No for a confirm), and Skip for an optional one. A question
// answered in words has none beyond Skip: it is answered by a reply.
func questionKeyboard(buttons *approvalref.Codec, q *core.QuestionCard) (inlineKeyboard, error) {
	step, ok := core.AskStep(q.ActionID)
	if !ok {
		return inlineKeyboard{}, fmt.Errorf("telegram: question %q has no step", q.ActionID)
	}
	var rows [][]inlineButton
	for i, label := range q.Buttons() {
		data, err := buttons.Encode(approvalref.Ref{Action: approvalref.Answer, RunID: q.RunID, Step: step, Choice: i})
		if err != nil {
			return inlineKeyboard{}, err
		}
		rows = append(rows, []inlineButton{{Text: cutUTF16(label, 64), CallbackData: data}})
	}
	if q.Skippable() {
		data, err := buttons.Encode(approvalref.Ref{Action: approvalref.Skip, RunID: q.RunID, Step: step})
		if err != nil {
			return inlineKeyboard{}, err
		}
		rows = append(rows, []inlineButton{{Text: "⏭️ Skip", CallbackData: data}})
	}
	return inlineKeyboard{InlineKeyboard: rows}, nil
}

// forceReply asks the approver's client to open a reply to the prompt.
type forceReply struct {
	ForceReply  bool   `json:"force_reply"`
	Placeholder string `json:"input_field_placeholder,omitempty"`
	Selective   bool   `json:"selective"`
}

// refLabel starts the line of a prompt that carries its signed approval
// reference. The reply to a prompt quotes the prompt's text, so the
// reference survives a restart without any state of ours.
const refLabel = "opsgate ref: "

// promptHTML asks who (mentioned, so a selective force_reply reaches them)
// for rejection feedback or edited arguments. problem, when set, is why the
// previous answer was refused.
func promptHTML(who tgUser, c core.Card, action approvalref.Action, ref, problem string) string {
	var b strings.Builder
	if problem != "" {
		fmt.Fprintf(&b, "⚠️ %s\n\n", esc(cutUTF16(problem, 1500)))
	}
	mention := fmt.Sprintf(`<a href="tg://user?id=%d">%s</a>`, who.ID, esc(who.displayName()))
	if action == approvalref.Reject {
		fmt.Fprintf(&b, "%s, reply to this message with your reason for rejecting <b>%s</b>. The run receives it as feedback.", mention, esc(c.Tool))
	} else {
		fmt.Fprintf(&b, "%s, reply to this message with the new arguments for <b>%s</b>: a JSON object, or one <code>key=value</code> per line. They replace the proposed arguments as a whole.\n\nCurrent arguments:\n<pre>%s</pre>", mention, esc(c.Tool), esc(cutUTF16(argLines(c.Args), 2000)))
	}
	fmt.Fprintf(&b, "\n\n%s<code>%s</code>", refLabel, esc(ref))
	return b.String()
}

// argLines renders arguments as key=value lines, the form an approver can
// copy, change and send back. When a value holds a line break, key=value
// lines would let it pass for another argument ("1.2.3\nenv=prod"), so
// the arguments are shown as one JSON object instead (parseArgs reads both).
func argLines(args []core.CardArg) string {
	lines := make([]string, 0, len(args))
	for _, a := range args {
		if strings.ContainsAny(a.Value, "\r\n") || a.Shown() != a.Value {
			return argsJSON(args)
		}
		lines = append(lines, a.Name+"="+a.Value)
	}
	return strings.Join(lines, "\n")
}

// argsJSON is the arguments as one indented JSON object of their values
// (strings stay strings; what the card showed as JSON is decoded).
func argsJSON(args []core.CardArg) string {
	m := make(map[string]any, len(args))
	for _, a := range args {
		var v any
		if err := json.Unmarshal([]byte(a.Value), &v); err == nil {
			if _, isString := v.(string); !isString {
				m[a.Name] = v
				continue
			}
		}
		m[a.Name] = a.Value
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return string(b)
}

// parseArgs reads edited arguments: a JSON object, or key=value lines
// (values stay strings; the tool's schema coerces them to its types).
func parseArgs(s string) (map[string]any, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("no arguments given")
	}
	if strings.HasPrefix(s, "{") {
		var m map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("not a valid JSON object: %v", err)
		}
		if dec.More() {
			return nil, fmt.Errorf("not a valid JSON object: text after the closing brace")
		}
		return m, nil
	}
	m := map[string]any{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("line %d: want key=value, got %q", i+1, cutUTF16(line, 60))
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("line %d: %q given twice", i+1, k)
		}
		m[k] = strings.TrimSpace(v)
	}
	return m, nil
}

// fmtWait renders a retry_after for people.
func fmtWait(d time.Duration) string { return d.Round(time.Second).String() }
