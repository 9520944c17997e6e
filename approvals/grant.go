package approvals

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// DefaultSessionTTL is how long a session grant lasts when
// approvals.session_ttl is not set.
const DefaultSessionTTL = time.Hour

// Grant is an approver's decision that reaches beyond one call.
//
// A session grant (Scope session) lets later calls skip asking when they
// come from the same requester, in the same thread, for the same tool, and
// the same policy rule asks for them with quorum 1 and a risk below
// high_impact; it lasts until ExpiresAt.
//
// A forever grant (Scope forever) is a stored allow rule: later calls of
// Tool with exactly Args (or, when Pattern is set, whose every argument
// matches Pattern's glob of the same name) run without asking, from anyone,
// in any thread, until it is revoked. It never covers a call whose rule
// needs a quorum above 1, nor a high_impact tool unless the policy says so
// (Policy.ForeverHighImpact).
//
// Both are bound to the policy rule that asked (RuleKey: an edited or
// replaced rule ends them) and are only as good as their granter: a grant
// covers a call only while its Actor may still decide it under the live
// configuration (Call.Eligible), and never when its Actor is an agent.
//
// Neither ever lets a denied call through: grants are consulted only when
// the policy asks.
type Grant struct {
	ID    string `json:"id"`
	Scope Scope  `json:"scope"`
	Tool  string `json:"tool"`
	// Thread and Requester bind a session grant; RuleKey binds both kinds
	// to the rule that asked.
	Thread    string `json:"thread,omitempty"`
	Requester string `json:"requester,omitempty"`
	RuleKey   string `json:"rule,omitempty"`
	// Args (exact) or Pattern (per-argument globs) bind a forever grant.
	Args    map[string]any    `json:"args,omitempty"`
	Pattern map[string]string `json:"pattern,omitempty"`
	// ApprovalID is the decision the grant came from; Actor who made it.
	ApprovalID string     `json:"approval_id"`
	Actor      string     `json:"granted_by"`
	At         time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	RevokedBy  string     `json:"revoked_by,omitempty"`
}

// GrantID is the id of the grant made by the decision on approvalID (an
// approval makes at most one grant).
func GrantID(approvalID string) string { return "g-" + approvalID }

// Active reports whether the grant still applies at now: not revoked and,
// for a session grant, not expired.
func (g *Grant) Active(now time.Time) bool {
	if g.RevokedAt != nil {
		return false
	}
	return g.ExpiresAt == nil || now.Before(*g.ExpiresAt)
}

// Call is what a grant is matched against: a call the policy asks for,
// with the verdict that asks.
type Call struct {
	Tool      string
	Risk      Risk
	Thread    string
	Requester string
	Args      map[string]any
	Verdict   Verdict
	// Eligible is who may decide the call now: the live verdict's
	// approvers expanded through the live directory. A grant covers the
	// call only while its granter is among them.
	Eligible []string
}

// Covers reports whether g lets call run without asking at now. A call the
// policy does not ask for is never covered (deny stays final; allow needs
// no grant). foreverHighImpact is the live Policy.ForeverHighImpact.
func (g *Grant) Covers(c Call, now time.Time, foreverHighImpact bool) bool {
	if !g.Active(now) || c.Verdict.Effect != EffectAsk || g.Tool != c.Tool || max(c.Verdict.Quorum, 1) != 1 {
		return false
	}
	// Bound to the rule that asked, and only as good as the granter's say
	// over the call now. A grant stored before grants named their rule
	// (RuleKey "") is bound to nothing and covers nothing.
	if g.RuleKey == "" || g.RuleKey != c.Verdict.RuleKey || NeverDecides(g.Actor) || !slices.Contains(c.Eligible, g.Actor) {
		return false
	}
	switch g.Scope {
	case ScopeSession:
		return c.Risk != RiskHighImpact && g.Thread == c.Thread && g.Requester == c.Requester
	case ScopeForever:
		if c.Risk == RiskHighImpact && !foreverHighImpact {
			return false
		}
		if g.Pattern != nil {
			return PatternMatches(g.Pattern, c.Args)
		}
		return SameArgs(g.Args, c.Args)
	}
	return false
}

// PatternMatches reports whether every argument of args matches the glob
// pattern gives it, and pattern names no argument args lacks. An argument
// the pattern does not name fails: a pattern only ever narrows a call down,
// it never leaves an argument open by omission.
func PatternMatches(pattern map[string]string, args map[string]any) bool {
	if len(pattern) != len(args) {
		return false
	}
	for name, v := range args {
		glob, ok := pattern[name]
		if !ok || !Glob(glob, argText(v)) {
			return false
		}
	}
	return true
}

// SameArgs compares argument objects by their JSON values (CanonicalArgs),
// so 2 and 2.0 (as a schema may produce either) are the same argument and
// no arguments are the empty object.
func SameArgs(a, b map[string]any) bool {
	return reflect.DeepEqual(CanonicalArgs(a), CanonicalArgs(b))
}

// grantProblem says why scope cannot be granted on the approval's final
// state (quorum, risk) with pattern, or returns "".
func grantProblem(scope Scope, a *Approval, args map[string]any, pattern map[string]string, foreverHighImpact bool) string {
	switch scope {
	case "", ScopeCall:
		if pattern != nil {
			return "a pattern is only saved with scope forever"
		}
		return ""
	case ScopeSession:
		switch {
		case pattern != nil:
			return "a pattern is only saved with scope forever"
		case max(a.Quorum, 1) != 1:
			return fmt.Sprintf("scope session needs a rule with quorum 1 (this call needs %d approvals); approve with scope call", a.Quorum)
		case a.Risk == RiskHighImpact:
			return "scope session is not offered for high_impact tools; approve with scope call"
		}
	case ScopeForever:
		switch {
		case max(a.Quorum, 1) != 1:
			return fmt.Sprintf("scope forever needs a rule with quorum 1 (this call needs %d approvals); approve with scope call", a.Quorum)
		case a.Risk == RiskHighImpact && !foreverHighImpact:
			return "scope forever is not offered for high_impact tools (policy.forever_high_impact is off); approve with scope call"
		case pattern != nil && !PatternMatches(pattern, args):
			names := slices.Sorted(maps.Keys(args))
			return fmt.Sprintf("the pattern must give a glob for each argument (%v) that matches the call being approved", names)
		}
	}
	return ""
}
