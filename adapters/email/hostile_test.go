package email

import (
	"html"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// TestAttack_PeoplesWordsRenderLive: in the text and HTML mails a
// multi-line value cannot add a line (nor, in the edit example, another
// argument), feedback is no link, and the rejection reply renders none.
func TestAttack_PeoplesWordsRenderLive(t *testing.T) {
	t.Parallel()
	c := adaptertest.HostileCard()
	for name, text := range map[string]string{"text": cardText(c, true), "outcome": outcomeText(c), "html": html.UnescapeString(cardHTML(c, true))} {
		if err := adaptertest.CheckNoForgedLine(text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if h := cardHTML(c, true); strings.Contains(h, "<a href=\"https://evil") {
		t.Errorf("live link in the HTML card:\n%s", h)
	}
	c.Status, c.Outcome = "pending", nil
	for name, text := range map[string]string{"text": cardText(c, true), "html": html.UnescapeString(cardHTML(c, true))} {
		for _, l := range strings.Split(text, "\n") {
			if t2 := strings.TrimSpace(l); strings.HasPrefix(t2, "Approved by alice") || strings.HasPrefix(t2, "Risk: read") {
				t.Errorf("%s: the edit example shows a value as its own line %q", name, l)
			}
		}
	}
	reply := renderReply("❌ rejected: “" + markdown.Escape(core.OneLine(adaptertest.HostileFeedback)) + "”")
	if strings.Contains(reply, "<a ") {
		t.Errorf("live link in the reply %q", reply)
	}
}
