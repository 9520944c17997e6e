package approvals

import (
	"fmt"
	"slices"
)

// MayDecide judges who may decide a, apart from what they decide: never a
// machine (an agent or a schedule, NeverDecides); only an identity the card
// was sent to (a.Eligible); and, when env.Eligible is set, only one the
// live configuration still lets decide it. Decide applies it first;
// core/authority asks it for everything an approver's standing allows
// (seeing the approval, cancelling its run), so both judge eligibility the
// same way. The error is a *RefusedError
// carrying ErrHumanRequired or ErrNotApprover.
//
// groups are approver groups the deciding surface vouches the actor
// belongs to beyond the configuration (Request.Groups: the console's
// OpenID Connect sign-in); an actor in a group a's approver entries name
// stands as its configured members do.
func MayDecide(a *Approval, actor string, env Env, groups ...string) error {
	via := vouchedGroup(a, env, groups) != ""
	switch {
	case NeverDecides(actor):
		return &RefusedError{Reason: ErrHumanRequired, Detail: actor + " may read and ask, never decide"}
	case !slices.Contains(a.Eligible, actor) && !via:
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is not among " + fmt.Sprint(a.Entries())}
	case env.Eligible != nil && !slices.Contains(env.Eligible, actor) && !via:
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is no longer among " + fmt.Sprint(a.Entries()) + " in the current configuration"}
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
	if g := viaGroup(groups, a.Entries()); g != "" || len(groups) == 0 || env.People == nil {
		return g
	}
	return viaGroup(groups, handedTo(a.Entries(), a, env.People))
}

// ViaStands reports whether a decision made through the vouched group via
// (Decision.Via) still counts under approvers and dir: the entries name
// the group, or a standing hand-over (LiveEligible) was to it. Dispatch
// asks it of the live rule's approvers.
func ViaStands(via string, approvers []string, a *Approval, dir *Directory) bool {
	if via == "" {
		return false
	}
	return slices.Contains(approvers, GroupPrefix+via) || (dir != nil && slices.Contains(handedTo(approvers, a, dir), GroupPrefix+via))
}

// handedTo lists the targets of a's standing hand-overs under approvers.
func handedTo(approvers []string, a *Approval, dir *Directory) []string {
	var to []string
	for _, d := range StandingDelegations(approvers, a, dir) {
		to = append(to, d.To)
	}
	return to
}
