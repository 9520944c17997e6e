package approvals

import (
	"errors"
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
// A task grant (Scope task) lets later calls of the same run skip asking —
// the rest of an agent's turn, a flow's later steps — for the same tool
// under the same rule, with quorum 1 and a risk below high_impact; it ends
// with the run (no other run ever has its RunID), and at the latest after
// approvals.session_ttl.
//
// A session grant (Scope session) lets later calls skip asking when they
// come from the same requester, in the same thread, for the same tool, and
// the same policy rule asks for them with quorum 1 and a risk below
// high_impact; it lasts until ExpiresAt.
//
// A forever grant (Scope forever) is a stored allow rule: later calls of
// Tool with exactly Args (or, when Pattern is set, whose every argument
// matches Pattern's glob of the same name) run without asking, from anyone,
// in any thread, until it is revoked (or until ExpiresAt, when the decider
// bounded it with "for"). It never covers a call whose rule
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
	// Thread and Requester bind a session grant (and name a task grant's);
	// RunID binds a task grant; RuleKey binds every kind to the rule that
	// asked.
	Thread    string `json:"thread,omitempty"`
	Requester string `json:"requester,omitempty"`
	RunID     string `json:"run_id,omitempty"`
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
	Tool string
	// RunID is the run the call belongs to (a task grant's binding).
	RunID     string
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
	case ScopeTask:
		return c.Risk != RiskHighImpact && g.RunID != "" && g.RunID == c.RunID
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
// state (quorum, risk) with pattern and the bound forDur, or returns "".
// sessionTTL caps a session grant's bound.
func grantProblem(scope Scope, a *Approval, args map[string]any, pattern map[string]string, forDur, sessionTTL time.Duration, foreverHighImpact bool) string {
	if pattern != nil && scope != ScopeForever {
		return "a pattern is only saved with scope forever"
	}
	switch {
	case forDur < 0:
		return "for must be a positive duration"
	case forDur > 0 && scope != ScopeSession && scope != ScopeForever:
		return "for bounds a session or forever grant; scope " + string(orCall(scope)) + " saves none"
	case forDur > 0 && scope == ScopeSession && forDur > sessionTTL:
		return fmt.Sprintf("for %s is longer than a session grant may last (approvals.session_ttl is %s)", forDur, sessionTTL)
	}
	switch scope {
	case ScopeTask, ScopeSession:
		switch {
		case max(a.Quorum, 1) != 1:
			return fmt.Sprintf("scope %s needs a rule with quorum 1 (this call needs %d approvals); approve with scope call", scope, a.Quorum)
		case a.Risk == RiskHighImpact:
			return fmt.Sprintf("scope %s is not offered for high_impact tools; approve with scope call", scope)
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

func orCall(s Scope) Scope {
	if s == "" {
		return ScopeCall
	}
	return s
}

// Saves reports whether a decision with scope s saves a grant.
func (s Scope) Saves() bool { return s == ScopeTask || s == ScopeSession || s == ScopeForever }

// GrantOffer is the grant an approval of a with scope (bounded by forDur,
// 0 for the default) would save if it were decided at now by one of its
// rule's approvers: what it would cover — rule, requester, thread or run,
// tool, arguments or pattern, until when — shown before anyone saves it.
// The error says why the scope is not offered for a. The grant's Actor is
// left empty: it is whoever decides.
func GrantOffer(a *Approval, scope Scope, pattern map[string]string, forDur time.Duration, now time.Time, env Env) (*Grant, error) {
	if !scope.Saves() {
		return nil, fmt.Errorf("scope %s saves no grant", orCall(scope))
	}
	ttl := env.sessionTTL()
	args := a.Args()
	if why := grantProblem(scope, a, args, pattern, forDur, ttl, env.ForeverHighImpact); why != "" {
		return nil, errors.New(why)
	}
	next := a.Clone()
	next.ApprovedArgs = args
	return newGrant(next, Request{Scope: scope, Pattern: pattern, For: forDur, At: now}, Verdict{RuleKey: a.RuleKey}, ttl), nil
}

// Offer is what approving a pending approval with one scope would save:
// the grant as it would be made now, or why the scope is not offered.
type Offer struct {
	Scope Scope
	// Grant is nil when the scope is not offered; Why says why.
	Grant *Grant
	Why   string
	// TakesFor says whether the scope takes a "for" bound; MaxFor is the
	// longest it takes (0: no limit).
	TakesFor bool
	MaxFor   time.Duration
}

// Offers lists the offer of each scope that saves a grant — task, session,
// forever — for the pending approval a at now: what every surface that
// offers scopes shows before anyone saves a grant. A decided approval
// offers nothing.
func Offers(a *Approval, now time.Time, env Env) []Offer {
	if a.Status != StatusPending {
		return nil
	}
	var out []Offer
	for _, sc := range []Scope{ScopeTask, ScopeSession, ScopeForever} {
		o := Offer{Scope: sc, TakesFor: sc != ScopeTask}
		if sc == ScopeSession {
			o.MaxFor = env.sessionTTL()
		}
		if g, err := GrantOffer(a, sc, nil, 0, now, env); err != nil {
			o.Why = err.Error()
		} else {
			o.Grant = g
		}
		out = append(out, o)
	}
	return out
}
