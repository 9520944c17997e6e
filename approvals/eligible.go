package approvals

import (
	"fmt"
	"slices"
)

// MayDecide judges who may decide a, apart from what they decide: never an
// agent; only an identity the card was sent to (a.Eligible); and, when
// env.Eligible is set, only one the live configuration still lets decide
// it. Decide applies it first; core/authority asks it for everything an
// approver's standing allows (seeing the approval, cancelling its run), so
// both judge eligibility the same way. The error is a *RefusedError
// carrying ErrHumanRequired or ErrNotApprover.
//
// groups are approver groups the deciding surface vouches the actor
// belongs to beyond the configuration (Request.Groups: the console's
// OpenID Connect sign-in); an actor in a group a's approver entries name
// stands as its configured members do.
func MayDecide(a *Approval, actor string, env Env, groups ...string) error {
	via := vouchedGroup(a, env, groups) != ""
	switch {
	case IsAgent(actor):
		return &RefusedError{Reason: ErrHumanRequired, Detail: actor + " may read and ask, never decide"}
	case !slices.Contains(a.Eligible, actor) && !via:
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is not among " + fmt.Sprint(a.Approvers)}
	case env.Eligible != nil && !slices.Contains(env.Eligible, actor) && !via:
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is no longer among " + fmt.Sprint(a.Approvers) + " in the current configuration"}
	}
	for _, d := range a.Decisions {
		// Handing it on gives the delegator's say away, whichever way they
		// stood (Delegate).
		if d.Action == ActionDelegate && env.People.SamePerson(d.Actor, actor) {
			return &RefusedError{Reason: ErrNotApprover, Detail: actor + " handed this approval to " + d.To}
		}
	}
	return nil
}

// vouchedGroup is the first of the vouched groups that names a's approver
// entries or a standing hand-over's target (LiveEligible), or "": one
// handed a group may decide as that group's members may.
func vouchedGroup(a *Approval, env Env, groups []string) string {
	if g := viaGroup(groups, a.Approvers); g != "" || len(groups) == 0 || env.People == nil {
		return g
	}
	var to []string
	for _, d := range StandingDelegations(a.Approvers, a, env.People) {
		to = append(to, d.To)
	}
	return viaGroup(groups, to)
}
