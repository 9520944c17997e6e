package engine

import (
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// GrantOffer is what approving an approval with one scope would save: the
// grant as it would be made now (what it covers: rule, requester, thread
// or run, tool, arguments, until), or why the scope is not offered. Every
// surface that offers scopes shows these before anyone saves a grant.
type GrantOffer struct {
	Scope approvals.Scope
	// Grant is nil when the scope is not offered; Why says why.
	Grant *approvals.Grant
	Why   string
	// MaxFor is the longest "for" the scope takes (0: no bound; a session
	// grant lasts at most approvals.session_ttl); For tells whether it
	// takes one at all.
	MaxFor time.Duration
	For    bool
}

// GrantOffers lists the offer of each scope that saves a grant (task,
// session, forever) for a, under the live configuration. A decided
// approval offers nothing.
func (e *Engine) GrantOffers(a *approvals.Approval) []GrantOffer {
	if a.Status != approvals.StatusPending {
		return nil
	}
	tr := e.trust()
	env := approvals.Env{People: tr.dir, SessionTTL: tr.sessionTTL, ForeverHighImpact: tr.policy.ForeverHighImpact}
	now := e.now()
	var out []GrantOffer
	for _, sc := range []approvals.Scope{approvals.ScopeTask, approvals.ScopeSession, approvals.ScopeForever} {
		o := GrantOffer{Scope: sc, For: sc != approvals.ScopeTask}
		if sc == approvals.ScopeSession {
			o.MaxFor = tr.sessionTTL
		}
		g, err := approvals.GrantOffer(a, sc, nil, 0, now, env)
		if err != nil {
			o.Why = err.Error()
		} else {
			o.Grant = g
		}
		out = append(out, o)
	}
	return out
}
