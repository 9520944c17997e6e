package engine

import "github.com/opsgate/opsgate/approvals"

// GrantOffers lists, for each scope that saves a grant (task, session,
// forever), what approving a with it would save now under the live
// configuration, or why the scope is not offered: what the surfaces show
// before anyone saves a grant. A decided approval offers nothing.
func (e *Engine) GrantOffers(a *approvals.Approval) []approvals.Offer {
	tr := e.trust()
	return approvals.Offers(a, e.now(), approvals.Env{People: tr.dir, SessionTTL: tr.sessionTTL, ForeverHighImpact: tr.policy.ForeverHighImpact})
}
