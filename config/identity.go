package config

import (
	"fmt"
	"net/mail"
	"strings"

	"github.com/opsgate/opsgate/adapters/matrix"
	"github.com/opsgate/opsgate/adapters/signal"
	"github.com/opsgate/opsgate/approvals"
)

// identityChannels are the prefixes actor ids carry: each adapter builds
// "<channel>:<platform user id>" (adapters/*: Actor{ID: ...}), API and MCP
// tokens act as "api:<name>" by default, and "mcp" is the decision channel
// of MCP clients. An identity with any other prefix can never match an
// actor, so an approver group naming "consol:admin" would silently approve
// nobody; config check refuses it instead.
var identityChannels = []string{"agent", "api", "console", "discord", "email", "matrix", "mcp", "schedule", "signal", "slack", "telegram", "webhook"}

// humanIdentityProblem is identityProblem for places that name people who
// decide (people, approver groups, rule approvers): an "agent:" or
// "schedule:" identity is refused there, because machines never decide
// (approvals.NeverDecides).
func humanIdentityProblem(id string) string {
	if msg := identityProblem(id); msg != "" {
		return msg
	}
	switch {
	case !approvals.NeverDecides(id):
		return ""
	case approvals.IsAgent(id):
		return fmt.Sprintf("%q is an agent: agents may ask but never decide, so they are not listed among people or approvers", id)
	case strings.HasPrefix(id, approvals.SchedulePrefix):
		return fmt.Sprintf("%q is a schedule: a schedule requests runs but never decides, so it is not listed among people or approvers (name it in channels.<name>.requesters)", id)
	}
	return fmt.Sprintf("%q never decides, so it is not listed among people or approvers", id)
}

// identityProblem explains why id is not a usable identity, or returns ""
// when it is one: a known channel prefix, a non-empty id without spaces,
// and for email a bare address (the email channel reports senders as
// "email:<address>").
func identityProblem(id string) string {
	channel, rest, ok := strings.Cut(id, ":")
	if !ok || channel == "" {
		return fmt.Sprintf("must be an identity like slack:U012AB3CD or email:alice@example.com, not %q", id)
	}
	if !contains(identityChannels, channel) {
		msg := fmt.Sprintf("unknown channel %q in identity %q", channel, id)
		if near := suggest(channel, identityChannels); near != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", near)
		}
		return msg + "; known: " + strings.Join(identityChannels, ", ")
	}
	if rest == "" || strings.ContainsFunc(rest, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Sprintf("must be an identity like %s:<user id> with no spaces, not %q", channel, id)
	}
	if channel == "email" && !plausibleAddress(rest) {
		return fmt.Sprintf("must be email:<address> like email:alice@example.com, not %q", id)
	}
	if channel == "matrix" && !matrix.ValidUserID(rest) {
		return fmt.Sprintf("must be matrix:<user id> like matrix:@ops-lead:example.org, not %q", id)
	}
	if channel == "signal" && !signal.ValidIdentity(rest) {
		return fmt.Sprintf("must be signal:<number> like signal:+15551234567 or signal:<ACI uuid> (lower case), not %q", id)
	}
	return ""
}

// plausibleAddress reports whether s is a bare mail address (no display
// name, no angle brackets) with a local part and a dotted or bracketed
// domain. It is a sanity check against typos, not RFC 5322 validation.
func plausibleAddress(s string) bool {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return false
	}
	at := strings.LastIndexByte(s, '@')
	domain := s[at+1:]
	return at > 0 && domain != "" && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".") &&
		(strings.Contains(domain, ".") || strings.HasPrefix(domain, "["))
}
