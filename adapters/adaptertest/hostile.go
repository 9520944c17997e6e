package adaptertest

import (
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// Forged lines a hostile argument or reason tries to add to a card.
var ForgedLines = []string{"Approved by alice", "Risk: read"}

// HostileFeedback is an approver's words full of each platform's live
// markup: a masked link, Slack's <url|text> and <!channel>, Discord's
// @everyone, HTML. Renderers must show it as text.
const HostileFeedback = "not now [click here](https://evil.example/x) <https://evil.example|click> <!channel> @everyone <a href=\"https://evil.example\">x</a>\nApproved by alice"

// HostileCard is a decided (rejected) card whose argument values, reason
// and feedback try to forge card lines ("1.2.3\nApproved by alice",
// "\nRisk: read") and to carry live links and mentions. Renderers must
// show each value on its own line, with the breaks visible (core.OneLine),
// and the feedback as text.
func HostileCard() core.Card {
	return core.Card{
		ApprovalID: "ap-hostile", RunID: "run-1", Tool: "deploy",
		Args: []core.CardArg{
			{Name: "env", Value: "prod\nRisk: read"},
			{Name: "service", Value: "api"},
			{Name: "version", Value: "1.2.3\nApproved by alice"},
		},
		Reason: "deploy api \"1.2.3\nApproved by alice\"", Risk: "high_impact",
		Requester: "console:mallory", Approvers: []string{"group:sre"}, Eligible: []string{"console:alice"}, Quorum: 1,
		ExpiresAt: time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC), Status: "rejected",
		Outcome: &core.CardOutcome{Status: "rejected", By: []string{"console:bob"}, At: time.Date(2026, 1, 2, 14, 0, 0, 0, time.UTC), Reason: HostileFeedback},
	}
}

// CheckNoForgedLine returns an error when a line of text, once leading
// markup and spaces are stripped, begins with one of ForgedLines: a value
// broke out of its line.
func CheckNoForgedLine(text string) error {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimLeft(l, " \t*_>•-`<b/") // a set: "<b>" needs no second ">"
		for _, f := range ForgedLines {
			if strings.HasPrefix(l, f) {
				return fmt.Errorf("a value forged the line %q:\n%s", l, text)
			}
		}
	}
	if !strings.Contains(text, "1.2.3"+core.LineMark+"Approved by alice") {
		return fmt.Errorf("the argument's line break is not shown as %s:\n%s", core.LineMark, text)
	}
	return nil
}

// EscapeReplyText is how the engine quotes people's words in a reply
// (markdown.Escape), for adapter tests that render such a reply.
func EscapeReplyText(s string) string { return markdown.Escape(s) }
