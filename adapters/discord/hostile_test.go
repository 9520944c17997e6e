package discord

import (
	"regexp"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
)

// liveLink is a Discord masked link whose "[" is not escaped.
var liveLink = regexp.MustCompile(`(^|[^\\])\[[^\]]*\]\(https?:`)

// TestAttack_PeoplesWordsRenderLive: feedback with a masked link or
// @everyone is inert on the embed, and a multi-line argument or reason
// cannot add a line to it.
func TestAttack_PeoplesWordsRenderLive(t *testing.T) {
	t.Parallel()
	c := adaptertest.HostileCard()
	e := cardEmbed(c)
	var b strings.Builder
	b.WriteString(e.Title + "\n" + e.Description + "\n" + cardContent(c) + "\n")
	for _, f := range e.Fields {
		b.WriteString(f.Name + ": " + f.Value + "\n")
	}
	text := b.String()
	if liveLink.MatchString(text) || strings.Contains(text, "@everyone") {
		t.Errorf("live markup on the card:\n%s", text)
	}
	if err := adaptertest.CheckNoForgedLine(strings.ReplaceAll(text, `\`, "")); err != nil {
		t.Error(err)
	}
}
