package signal

import (
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// cardText is a card as one Signal message: Card.PlainText, then how to
// answer with the approval's code. It fits MaxText: the preview, then long
// values, are cut first.
func cardText(c core.Card, code string) string {
	trimmed := c
	for previewMax, argMax := 800, 300; ; {
		if len(c.Preview) > previewMax {
			trimmed.Preview = chunk.Cut(c.Preview, previewMax, chunk.Bytes) + "\n(preview truncated; full text in the console)"
		}
		trimmed.Args = make([]core.CardArg, len(c.Args))
		for i, a := range c.Args {
			trimmed.Args[i] = a
			trimmed.Args[i].Value = chunk.Cut(a.Value, argMax, chunk.Bytes)
		}
		trimmed.Changes = make([]approvals.Change, len(c.Changes))
		for i, ch := range c.Changes {
			ch.From, ch.To = chunk.Cut(ch.From, argMax, chunk.Bytes), chunk.Cut(ch.To, argMax, chunk.Bytes)
			trimmed.Changes[i] = ch
		}
		s := trimmed.PlainText()
		if c.Pending() {
			s += "\n\nCode " + code + ": reply \"approve " + code + "\", \"reject " + code + ": <reason>\" or \"edit " + code +
				" {\"arg\": \"value\"}\" — or quote this message, or react ✅ / ❌."
		}
		if c.BatchPending() {
			s += "\n" + c.ApproveAllLine(code)
		}
		if chunk.Measure(s, chunk.UTF16) <= MaxText || (previewMax <= 100 && argMax <= 40) {
			return chunk.Cut(s, MaxText, chunk.UTF16)
		}
		previewMax, argMax = previewMax/2, max(argMax/2, 40)
	}
}
