package telegram

import (
	"html"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core/approvalref"
)

// TestAttack_PeoplesWordsRenderLive: the card shows feedback and
// multi-line values as text on their own lines; the Edit prompt offers
// such arguments as JSON, where a value cannot pass for another key=value
// line. (The rejection reply is covered in core/engine: it parses with no
// link, and this adapter's renderer makes <a> only from links.)
func TestAttack_PeoplesWordsRenderLive(t *testing.T) {
	t.Parallel()
	c := adaptertest.HostileCard()
	out := cardHTML(c)
	if strings.Contains(out, "<a ") || strings.Contains(out, "<!channel>") {
		t.Errorf("live markup on the card:\n%s", out)
	}
	if err := adaptertest.CheckNoForgedLine(html.UnescapeString(out)); err != nil {
		t.Error(err)
	}

	c.Status, c.Outcome = "pending", nil
	prompt := html.UnescapeString(promptHTML(tgUser{ID: 7, FirstName: "Al"}, c, approvalref.Edit, "ref", ""))
	for _, l := range strings.Split(prompt, "\n") {
		if strings.HasPrefix(l, "Approved by alice") || strings.HasPrefix(l, "Risk: read") {
			t.Errorf("the edit prompt shows a value as its own line %q:\n%s", l, prompt)
		}
	}
	if args, err := parseArgs(argLines(c.Args)); err != nil || args["version"] != "1.2.3\nApproved by alice" || len(args) != 3 {
		t.Errorf("the prompt's arguments read back as %v, %v", args, err)
	}
}
