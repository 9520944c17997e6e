package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// blockTexts collects every "text" string of blocks, as Slack would show
// them line by line.
func blockTexts(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	_ = json.Unmarshal(raw, &doc)
	var b strings.Builder
	var walk func(any)
	walk = func(n any) {
		switch x := n.(type) {
		case map[string]any:
			if s, ok := x["text"].(string); ok {
				b.WriteString(s + "\n")
			}
			for _, v := range x {
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(doc)
	return b.String()
}

// TestAttack_PeoplesWordsRenderLive: feedback with a masked link, a
// <url|text> link or <!channel> is shown as text on the card, and a
// multi-line argument or reason cannot add a line to it.
func TestAttack_PeoplesWordsRenderLive(t *testing.T) {
	t.Parallel()
	a := testAdapter(t)
	blocks, notify := a.renderCard(adaptertest.HostileCard())
	text := blockTexts(t, blocks)
	for _, bad := range []string{"<https://evil", "<!channel>", "<a href"} {
		if strings.Contains(text, bad) {
			t.Errorf("live markup %q on the card:\n%s", bad, text)
		}
	}
	if err := adaptertest.CheckNoForgedLine(text); err != nil {
		t.Error(err)
	}
	if strings.Contains(notify, "\n") {
		t.Errorf("notification text spans lines: %q", notify)
	}
	// The reply quoting the feedback, as the engine writes it, renders as
	// text in mrkdwn.
	reply := a.Format().Render(rejectReply())
	for _, bad := range []string{"<https://evil", "<!channel>"} {
		if strings.Contains(reply, bad) {
			t.Errorf("live markup %q in the reply %q", bad, reply)
		}
	}
}

// rejectReply is the engine's reply for a rejection with hostile feedback.
func rejectReply() string {
	return "❌ deploy was rejected by console:bob: “" + escapeFeedback(adaptertest.HostileFeedback) + "”."
}

func escapeFeedback(s string) string { return adaptertest.EscapeReplyText(core.OneLine(s)) }
