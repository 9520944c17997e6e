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
// same way. The error is a *RefusedError carrying ErrHumanRequired or
// ErrNotApprover.
func MayDecide(a *Approval, actor string, env Env) error {
	switch {
	case NeverDecides(actor):
		return &RefusedError{Reason: ErrHumanRequired, Detail: actor + " may read and ask, never decide"}
	case !slices.Contains(a.Eligible, actor):
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is not among " + fmt.Sprint(a.Approvers)}
	case env.Eligible != nil && !slices.Contains(env.Eligible, actor):
		return &RefusedError{Reason: ErrNotApprover, Detail: actor + " is no longer among " + fmt.Sprint(a.Approvers) + " in the current configuration"}
	}
	return nil
}
