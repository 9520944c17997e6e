package approvals

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// DelegateRequest is an approver handing a pending approval to a named
// person or approver group, already authenticated by its surface.
type DelegateRequest struct {
	ApprovalID string
	Actor      string
	Channel    string
	// To is "person:<name>" or "group:<name>", as the configuration names
	// them.
	To     string
	Reason string
	At     time.Time
	// Groups are approver groups the surface vouches the actor belongs to
	// (as Request.Groups): who stands in one the approval names may hand
	// it on as its configured members may.
	Groups []string
}

// Delegate hands a pending approval from one who may decide it to a
// person or group: they may decide it from then on, and the delegator
// (every identity of their person) no longer may — they handed their say
// on, so one person's say never counts twice. It is recorded among the
// decisions (ActionDelegate, with To) and audited approval.delegated; the
// card is updated. The hand-over is judged live like every eligibility
// (LiveEligible): it holds while its delegator could decide the approval
// under the live configuration, and To is expanded as the live directory
// has it — so one eligible only through a vouched group (r.Groups) may
// decide but not hand on. Nothing but the audit entry changes on a
// refusal.
func Delegate(a *Approval, r DelegateRequest, env Env) Outcome {
	base := AuditEntry{At: r.At, Actor: r.Actor, RunID: a.RunID, ApprovalID: a.ID, Tool: a.Tool}
	refuse := refuser(base, ActionDelegate, r.Channel)
	if out, done := open(a, r.At, refuse); done {
		return out
	}
	var who *RefusedError
	if errors.As(MayDecide(a, r.Actor, env, r.Groups...), &who) {
		return refuse(who.Reason, who.Detail, nil)
	}
	if !slices.Contains(a.Eligible, r.Actor) || (env.Eligible != nil && !slices.Contains(env.Eligible, r.Actor)) {
		// Eligible only through a group the surface vouches for now: a
		// hand-over is judged live later, without that sign-in, so it
		// could never stand.
		return refuse(ErrNotApprover, r.Actor+" may decide this only through the identity provider's group "+
			vouchedGroup(a, env, r.Groups)+"; only an approver the configuration lists may hand it on", nil)
	}
	if r.To == "" {
		return refuse(ErrInvalidDecision, "name a person (person:<name>) or a group (group:<name>) to hand the approval to", nil)
	}
	if !env.People.Names(r.To) {
		return refuse(ErrInvalidDecision, fmt.Sprintf("%q is not a person or approver group the configuration names: hand it to person:<name> or group:<name>", r.To), nil)
	}
	person := env.People.Person(r.Actor)
	for _, d := range a.Decisions {
		if d.who() == person && !d.Superseded && (d.Action == ActionApprove || d.Action == ActionEdit) {
			return refuse(ErrInvalidDecision, "you approved this call already; your approval counts and cannot be handed on", nil)
		}
	}
	var added []string
	for _, id := range env.People.Expand([]string{r.To}) {
		if !env.People.SamePerson(id, r.Actor) && !env.People.SamePerson(id, a.Requester) {
			added = append(added, id)
		}
	}
	if len(added) == 0 {
		return refuse(ErrInvalidDecision, fmt.Sprintf("%s holds nobody but you and the requester: nobody else could decide it", r.To), nil)
	}

	next := a.Clone()
	next.Decisions = append(next.Decisions, Decision{Actor: r.Actor, Person: person, Channel: r.Channel, Action: ActionDelegate,
		To: r.To, Reason: r.Reason, At: r.At})
	// What the card promises now: the hand-over's people in, the
	// delegator out.
	eligible := slices.DeleteFunc(slices.Clone(next.Eligible), func(id string) bool { return env.People.SamePerson(id, r.Actor) })
	for _, id := range added {
		if !slices.Contains(eligible, id) {
			eligible = append(eligible, id)
		}
	}
	next.Eligible = eligible
	ae := base
	ae.Kind = AuditApprovalDelegated
	ae.Detail = detailJSON(map[string]any{"to": r.To, "reason": r.Reason, "channel": r.Channel, "person": person, "eligible": added})
	return Outcome{Approval: next, UpdateCard: true, Audit: []AuditEntry{ae}}
}

// LiveEligible is who may decide a now, with approvers the entries that
// ask for it (the approval's own, or the live rule's at dispatch)
// expanded through dir: those identities, plus everyone a delegation
// handed it to — in the order they were made, each standing only while
// its delegator is eligible by the entries or an earlier standing
// delegation — less every person who handed it on.
func LiveEligible(approvers []string, a *Approval, dir *Directory) []string {
	eligible, kept := standing(approvers, a, dir)
	if len(kept) == 0 {
		return eligible
	}
	handedOn := map[string]bool{}
	for _, d := range kept {
		handedOn[dir.Person(d.Actor)] = true
	}
	return slices.DeleteFunc(eligible, func(id string) bool { return handedOn[dir.Person(id)] })
}

// Delegations lists a's standing hand-overs for display, each as
// "<to> (handed on by <actor>)", judged as LiveEligible judges them.
func Delegations(approvers []string, a *Approval, dir *Directory) []string {
	kept := StandingDelegations(approvers, a, dir)
	out := make([]string, 0, len(kept))
	for _, d := range kept {
		out = append(out, d.To+" (handed on by "+d.Actor+")")
	}
	return out
}

// StandingDelegations are a's delegation records that stand under
// approvers and dir, in order (see LiveEligible).
func StandingDelegations(approvers []string, a *Approval, dir *Directory) []Decision {
	_, kept := standing(approvers, a, dir)
	return kept
}

// standing walks a's delegations in order: approvers expanded, widened by
// each delegation whose delegator is eligible so far; kept are those.
func standing(approvers []string, a *Approval, dir *Directory) (eligible []string, kept []Decision) {
	eligible = dir.Expand(approvers)
	for _, d := range a.Decisions {
		if d.Action != ActionDelegate || !slices.Contains(eligible, d.Actor) {
			continue
		}
		kept = append(kept, d)
		for _, id := range dir.Expand([]string{d.To}) {
			if !slices.Contains(eligible, id) {
				eligible = append(eligible, id)
			}
		}
	}
	return eligible, kept
}

// Names reports whether entry is a person ("person:<name>") or an
// approver group ("group:<name>") that d knows.
func (d *Directory) Names(entry string) bool {
	if d == nil {
		return false
	}
	if name, ok := strings.CutPrefix(entry, PersonPrefix); ok {
		_, known := d.people[name]
		return known
	}
	if name, ok := strings.CutPrefix(entry, GroupPrefix); ok {
		_, known := d.groups[name]
		return known
	}
	return false
}
