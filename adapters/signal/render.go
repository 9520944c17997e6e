package signal

import (
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// cardText is a card as one Signal message: Card.PlainText, then how to
// answer with the approval's code. It fits MaxText: the preview, then long
// values, are cut first.
func cardText(c core.Card, code string) string {
	trimmed := c
	for previewMax, argMax := 800, 300; ; {
		if len(c.Preview) > previewMax {
			trimmed.Preview = cut(c.Preview, previewMax) + "\n(preview truncated; full text in the console)"
		}
		trimmed.Args = make([]core.CardArg, len(c.Args))
		for i, a := range c.Args {
			trimmed.Args[i] = a
			trimmed.Args[i].Value = cut(a.Value, argMax)
		}
		trimmed.Changes = make([]approvals.Change, len(c.Changes))
		for i, ch := range c.Changes {
			ch.From, ch.To = cut(ch.From, argMax), cut(ch.To, argMax)
			trimmed.Changes[i] = ch
		}
		s := trimmed.PlainText()
		if c.Pending() {
			s += "\n\nCode " + code + ": reply \"approve " + code + "\", \"reject " + code + ": <reason>\" or \"edit " + code +
				" {\"arg\": \"value\"}\" — or quote this message, or react ✅ / ❌."
		}
		if utf16Len(s) <= MaxText || (previewMax <= 100 && argMax <= 40) {
			return cutUTF16(s, MaxText)
		}
		previewMax, argMax = previewMax/2, max(argMax/2, 40)
	}
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}

func cutUTF16(s string, n int) string {
	if utf16Len(s) <= n {
		return s
	}
	used := 0
	for i, r := range s {
		w := 1
		if r > 0xFFFF {
			w = 2
		}
		if used+w > n-1 {
			return s[:i] + "…"
		}
		used += w
	}
	return s
}

func refusalText(de *core.DecisionError) string {
	switch de.Code {
	case core.DecisionNotApprover:
		return "⛔ You may not decide this approval."
	case core.DecisionSelfApproval:
		return "⛔ You cannot approve your own request."
	case core.DecisionNotFound:
		return "❓ Unknown approval."
	case core.DecisionInvalidArgs:
		return "⚠️ Arguments not accepted: " + de.Message
	}
	return "ℹ️ " + de.Message
}
