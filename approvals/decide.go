package approvals

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// ErrNotFound is the one not-found sentinel: every store lookup (approvals,
// runs, outbox, state) and the engine return an error matching it for an
// unknown id. It is declared here, the bottom of the import graph, so that
// approvals' own Store interface can name it; core.ErrNotFound is the same
// value, under the name the rest of the code uses.
var ErrNotFound = errors.New("not found")

// Refusal sentinels. Every refused decision is audited and changes nothing
// else; callers branch with errors.Is and map them to their surface
// (core.Refusal turns them into the *core.DecisionError every surface
// answers with).
var (
	ErrAlreadyDecided    = errors.New("approval already decided")
	ErrDuplicateApproval = errors.New("you already approved this call")
	ErrExpired           = errors.New("approval expired")
	ErrNotApprover       = errors.New("not an approver for this call")
	ErrSelfApproval      = errors.New("requesters may not approve their own high-impact call")
	ErrDeniedByPolicy    = errors.New("edited arguments are denied by policy")
	ErrInvalidDecision   = errors.New("invalid decision")
	ErrUnverified        = errors.New("the decider could not be verified")
)

// RefusedError carries a refusal sentinel with the details a surface shows:
// who won (for ErrAlreadyDecided) or which field failed validation.
type RefusedError struct {
	Reason error
	Detail string
	By     []string
	At     time.Time
	Field  string
}

func (e *RefusedError) Error() string {
	if e.Detail == "" {
		return e.Reason.Error()
	}
	return e.Reason.Error() + ": " + e.Detail
}

func (e *RefusedError) Unwrap() error { return e.Reason }

// Request is a decision as an approver made it, already authenticated by
// its surface.
type Request struct {
	Actor   string
	Channel string
	Action  Action
	Args    map[string]any
	Reason  string
	Scope   Scope
	At      time.Time
	// Unverified is the surface's reason for not trusting who decided; a
	// request carrying one is refused (and audited) before anything else.
	Unverified string
}

// Env is what deciding needs beyond the approval itself.
type Env struct {
	AllowSelfApproval bool
	// Validate applies the tool's schema to edited arguments.
	Validate func(args map[string]any) (map[string]any, error)
	// Recheck evaluates the policy for edited arguments; Eligible in the
	// result is filled by the caller from the verdict's approvers.
	Recheck func(args map[string]any) (Verdict, []string)
}

// Grant lets later calls of Tool in Thread skip asking (never over a deny).
type Grant struct {
	Thread     string
	Tool       string
	ApprovalID string
	Actor      string
	At         time.Time
}

// Outcome is the result of deciding: what to persist, in one transaction.
type Outcome struct {
	// Approval is the updated approval; nil when the request was refused
	// and nothing but the audit entry changes (except expiry, which also
	// finalizes it).
	Approval *Approval
	// Final is true when this decision ended the approval: the run resumes
	// and every card is updated.
	Final bool
	Grant *Grant
	Audit []AuditEntry
	// Err is the refusal, returned to the caller after the audit commits.
	Err error
}

// Decide applies one request to an approval: the single place where
// eligibility, self-approval, quorum, edits and expiry are judged. It never
// mutates a; the caller persists Outcome atomically with a compare-and-set on
// the pending status it read.
func Decide(a *Approval, r Request, env Env) Outcome {
	base := AuditEntry{At: r.At, Actor: r.Actor, RunID: a.RunID, ApprovalID: a.ID, Tool: a.Tool}
	refuse := func(reason error, detail string, mod func(*RefusedError)) Outcome {
		e := &RefusedError{Reason: reason, Detail: detail}
		if mod != nil {
			mod(e)
		}
		ae := base
		ae.Kind = AuditApprovalRefused
		ae.Detail = detailJSON(map[string]any{"action": r.Action, "channel": r.Channel, "reason": e.Error()})
		return Outcome{Audit: []AuditEntry{ae}, Err: e}
	}

	if r.Unverified != "" {
		return refuse(ErrUnverified, r.Unverified, nil)
	}
	switch r.Action {
	case ActionApprove, ActionReject, ActionEdit:
	default:
		return refuse(ErrInvalidDecision, fmt.Sprintf("unknown action %q", r.Action), nil)
	}
	if r.Scope != "" && r.Scope != ScopeCall && r.Scope != ScopeSession {
		return refuse(ErrInvalidDecision, fmt.Sprintf("unknown scope %q", r.Scope), nil)
	}
	if a.Status == StatusExpired {
		// Expired is not "decided by someone": surfaces answer 410.
		at := a.ExpiresAt
		if a.DecidedAt != nil {
			at = *a.DecidedAt
		}
		return refuse(ErrExpired, "expired at "+at.UTC().Format(time.RFC3339), func(e *RefusedError) { e.At = at })
	}
	if a.Status.Final() {
		return refuse(ErrAlreadyDecided, fmt.Sprintf("%s by %v", a.Status, a.Winners()), func(e *RefusedError) {
			e.By = a.Winners()
			if a.DecidedAt != nil {
				e.At = *a.DecidedAt
			}
		})
	}
	if !r.At.Before(a.ExpiresAt) {
		out := Expire(a, r.At)
		out.Audit = append(refuse(ErrExpired, "", nil).Audit, out.Audit...)
		out.Err = &RefusedError{Reason: ErrExpired, At: a.ExpiresAt}
		return out
	}
	if !slices.Contains(a.Eligible, r.Actor) {
		return refuse(ErrNotApprover, r.Actor+" is not among "+fmt.Sprint(a.Approvers), nil)
	}
	if r.Action != ActionReject && r.Actor == a.Requester && a.Risk == RiskHighImpact && !env.AllowSelfApproval {
		return refuse(ErrSelfApproval, "", nil)
	}

	next := a.Clone()
	d := Decision{Actor: r.Actor, Channel: r.Channel, Action: r.Action, Reason: r.Reason, Scope: r.Scope, At: r.At}
	switch r.Action {
	case ActionReject:
		next.Status = StatusRejected
	case ActionEdit:
		args, err := env.Validate(r.Args)
		if err != nil {
			return refuse(err, "", func(e *RefusedError) {
				var ve *ValidationError
				if errors.As(err, &ve) {
					e.Field, e.Detail = ve.Field, ve.Message
				}
			})
		}
		verdict, eligible := env.Recheck(args)
		if verdict.Effect == EffectDeny {
			return refuse(ErrDeniedByPolicy, verdict.Why, nil)
		}
		if verdict.Effect == EffectAsk {
			if !slices.Contains(eligible, r.Actor) {
				return refuse(ErrNotApprover, "the edited call needs approval from "+fmt.Sprint(verdict.Approvers), nil)
			}
			next.Quorum = max(verdict.Quorum, 1)
			next.Approvers, next.Eligible = verdict.Approvers, eligible
		} else {
			next.Quorum = 1
		}
		// Approvals of the old arguments no longer count.
		for i := range next.Decisions {
			next.Decisions[i].Superseded = true
		}
		d.Args = args
		next.ApprovedArgs = args
	case ActionApprove:
		for _, prev := range next.Decisions {
			if prev.Actor == r.Actor && !prev.Superseded && (prev.Action == ActionApprove || prev.Action == ActionEdit) {
				return refuse(ErrDuplicateApproval, fmt.Sprintf("%d of %d approvals so far", next.CountedApprovals(), next.Quorum), nil)
			}
		}
	}
	next.Decisions = append(next.Decisions, d)

	out := Outcome{Approval: next}
	if r.Action != ActionReject && next.CountedApprovals() >= max(next.Quorum, 1) {
		next.Status = StatusApproved
		if next.ApprovedArgs != nil {
			next.Status = StatusEdited
		} else {
			next.ApprovedArgs = next.ProposedArgs
		}
	}
	if next.Status.Final() {
		at := r.At
		next.DecidedAt = &at
		out.Final = true
		if r.Scope == ScopeSession && next.Status != StatusRejected {
			out.Grant = &Grant{Thread: a.Thread, Tool: a.Tool, ApprovalID: a.ID, Actor: r.Actor, At: r.At}
		}
	}
	ae := base
	ae.Kind = AuditApprovalDecided
	ae.Detail = detailJSON(map[string]any{"action": r.Action, "channel": r.Channel, "status": next.Status,
		"reason": r.Reason, "args": d.Args, "scope": r.Scope, "approvals": next.CountedApprovals(), "quorum": next.Quorum})
	out.Audit = []AuditEntry{ae}
	return out
}

// Expire finalizes a pending approval whose time ran out.
func Expire(a *Approval, now time.Time) Outcome {
	next := a.Clone()
	next.Status = StatusExpired
	next.DecidedAt = &now
	next.Decisions = append(next.Decisions, Decision{Actor: "system", Channel: "system", Action: ActionExpire, At: now})
	ae := AuditEntry{At: now, Kind: AuditApprovalExpired, Actor: "system", RunID: a.RunID, ApprovalID: a.ID, Tool: a.Tool,
		Detail: detailJSON(map[string]any{"expires_at": a.ExpiresAt})}
	return Outcome{Approval: next, Final: true, Audit: []AuditEntry{ae}}
}
