package approvals

import (
	"errors"
	"fmt"
	"slices"
	"strings"
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
	ErrSelfApproval      = errors.New("requesters may not approve their own call")
	ErrHumanRequired     = errors.New("approvals are decided by humans: an agent never decides")
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
	// Pattern, with Scope forever, saves the grant as per-argument globs
	// instead of the exact arguments; it must name every argument and
	// match the call being approved.
	Pattern map[string]string
	// For bounds a session or forever grant (0: session_ttl for a
	// session, no end for forever).
	For time.Duration
	At  time.Time
	// Unverified is the surface's reason for not trusting who decided; a
	// request carrying one is refused (and audited) before anything else.
	Unverified string
	// Groups are approver groups the deciding surface vouches the actor
	// belongs to now, beyond what the configuration lists: the web
	// console's OpenID Connect sign-in passes the identity provider's
	// groups that name configured approver groups (docs/console.md). An
	// approval whose approver entries name one of them ("group:sre") may
	// be decided by the actor; everything else (agents, self-approval,
	// quorum by person) is judged as for any approver.
	Groups []string
}

// viaGroup returns the first of the vouched groups that entries name
// ("group:<name>"), or "".
func viaGroup(groups, entries []string) string {
	for _, g := range groups {
		if g != "" && slices.Contains(entries, GroupPrefix+g) {
			return g
		}
	}
	return ""
}

// Env is what deciding needs beyond the approval itself, from the live
// configuration.
type Env struct {
	// People resolves identities to persons, for quorum and self-approval;
	// nil makes every identity its own person.
	People *Directory
	// Eligible, when not nil, is who the live configuration lets decide
	// this approval (its approver entries expanded now). A decider must be
	// in it and in the approval's stored Eligible (what the card promised),
	// so removing someone from a group ends their say over pending calls.
	Eligible []string
	// AllowSelfApproval lets the requester approve their own call whatever
	// the policy says (tests; the policy's own setting arrives through
	// Recheck's verdict).
	AllowSelfApproval bool
	// Validate applies the tool's schema to edited arguments.
	Validate func(args map[string]any) (map[string]any, error)
	// Recheck evaluates the live policy for arguments; Eligible in the
	// result is the verdict's approvers expanded by the caller. Decide
	// calls it for the arguments being approved: the verdict says whether
	// self-approval is allowed and which rule a grant is bound to.
	Recheck func(args map[string]any) (Verdict, []string)
	// SessionTTL is how long a session grant lasts (DefaultSessionTTL if 0).
	SessionTTL time.Duration
	// ForeverHighImpact lets a forever grant cover a high_impact tool.
	ForeverHighImpact bool
	// PolicyVersion is the live policy's Version: an edit's new Digest is
	// made under it.
	PolicyVersion string
}

func (env Env) recheck(args map[string]any) (Verdict, []string) {
	if env.Recheck == nil {
		return Verdict{Effect: EffectAsk, Quorum: 1, RuleKey: DefaultRuleKey}, nil
	}
	return env.Recheck(args)
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
	// Grant, when set, is stored with the decision (scope session or
	// forever).
	Grant *Grant
	// UpdateCard asks for the approval's card to be updated although the
	// approval is still pending (a delegation changed who may decide).
	UpdateCard bool
	Audit      []AuditEntry
	// Copies are other runs that get a copy of a final decision's
	// permission.decided event, in the same transaction, each with its
	// Data added: a sub-agent's approval, shown on its ancestors' streams
	// (docs/agents.md, "Sub-agents"). The caller of Decide sets them.
	Copies []EventCopy
	// Err is the refusal, returned to the caller after the audit commits.
	Err error
}

// EventCopy is one run that gets a copy of a decision's event, with Data
// added to the event's own.
type EventCopy struct {
	RunID string
	Data  map[string]any
}

// Decide applies one request to an approval: the single place where
// eligibility, self-approval, quorum, edits and expiry are judged. It never
// mutates a; the caller persists Outcome atomically with a compare-and-set on
// the pending status it read.
func Decide(a *Approval, r Request, env Env) Outcome {
	base := AuditEntry{At: r.At, Actor: r.Actor, RunID: a.RunID, ApprovalID: a.ID, Tool: a.Tool}
	refuse := refuser(base, r.Action, r.Channel)

	if r.Unverified != "" {
		return refuse(ErrUnverified, r.Unverified, nil)
	}
	switch r.Action {
	case ActionApprove, ActionReject, ActionEdit:
	default:
		return refuse(ErrInvalidDecision, fmt.Sprintf("unknown action %q", r.Action), nil)
	}
	if r.Scope != "" && !r.Scope.Valid() {
		return refuse(ErrInvalidDecision, fmt.Sprintf("unknown scope %q", r.Scope), nil)
	}
	if out, done := open(a, r.At, refuse); done {
		return out
	}
	var who *RefusedError
	if errors.As(MayDecide(a, r.Actor, env, r.Groups...), &who) {
		return refuse(who.Reason, who.Detail, nil)
	}
	if why := escalatedGrant(a, r, env); why != "" {
		return refuse(ErrInvalidDecision, why, nil)
	}
	via := vouchedGroup(a, env, r.Groups)
	person := env.People.Person(r.Actor)
	self := env.People.SamePerson(r.Actor, a.Requester)

	next := a.Clone()
	d := Decision{Actor: r.Actor, Person: person, Channel: r.Channel, Action: r.Action, Reason: r.Reason, Scope: r.Scope, At: r.At, Digest: a.Digest}
	if via != "" && !slices.Contains(a.Eligible, r.Actor) {
		d.Via = via
	}
	if r.For > 0 {
		d.For = r.For.String()
	}
	// verdict is the live policy's answer for the arguments this decision
	// approves: whether self-approval is allowed, and the rule a grant is
	// bound to.
	var verdict Verdict
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
		v, eligible := env.recheck(args)
		verdict = v
		if verdict.Effect == EffectDeny {
			return refuse(ErrDeniedByPolicy, verdict.Why, nil)
		}
		if verdict.Effect == EffectAsk {
			// Under the same rule, what escalation added still decides.
			entries := verdict.Approvers
			if verdict.RuleKey == a.RuleKey && len(a.AddedApprovers) > 0 {
				eligible = append(slices.Clone(eligible), env.People.Expand(a.AddedApprovers)...)
				entries = append(slices.Clone(entries), a.AddedApprovers...)
			} else {
				next.AddedApprovers = nil
			}
			d.Via = ""
			if !slices.Contains(eligible, r.Actor) {
				if d.Via = viaGroup(r.Groups, entries); d.Via == "" {
					return refuse(ErrNotApprover, "the edited call needs approval from "+fmt.Sprint(verdict.Approvers), nil)
				}
			}
			next.Quorum = max(verdict.Quorum, 1)
			next.Approvers, next.Eligible = verdict.Approvers, eligible
		} else {
			next.Quorum = 1
		}
		// Approvals of the old arguments no longer count (a delegation
		// stands: it said who decides, not what).
		for i, prev := range next.Decisions {
			if prev.Action == ActionApprove || prev.Action == ActionEdit {
				next.Decisions[i].Superseded = true
			}
		}
		d.Args = args
		next.ApprovedArgs = args
		// The edited call is a new call: its own digest, under the rule
		// and policy that judged it now.
		next.Rule, next.RuleKey, next.PolicyVersion, next.Why = verdict.Rule, verdict.RuleKey, env.PolicyVersion, verdict.Why
		next.Digest = Digest(next.Tool, args, next.RuleKey, next.PolicyVersion)
		d.Digest = next.Digest
	case ActionApprove:
		for _, prev := range next.Decisions {
			if prev.who() == person && !prev.Superseded && (prev.Action == ActionApprove || prev.Action == ActionEdit) {
				detail := fmt.Sprintf("%d of %d approvals so far", next.CountedApprovals(), next.Quorum)
				if prev.Actor != r.Actor {
					detail += "; " + prev.Actor + " is also you"
				}
				return refuse(ErrDuplicateApproval, detail, nil)
			}
		}
		args := next.ApprovedArgs
		if args == nil {
			args = next.ProposedArgs
		}
		verdict, _ = env.recheck(args)
	}
	if r.Action != ActionReject && self && !env.AllowSelfApproval && !verdict.AllowSelfApproval {
		return refuse(ErrSelfApproval, selfDetail(r.Actor, a.Requester), nil)
	}
	if r.Action != ActionReject {
		args := next.ApprovedArgs
		if args == nil {
			args = next.ProposedArgs
		}
		if why := grantProblem(r.Scope, next, args, r.Pattern, r.For, env.sessionTTL(), env.ForeverHighImpact); why != "" {
			return refuse(ErrInvalidDecision, why, nil)
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
	ae := base
	ae.Kind = AuditApprovalDecided
	detail := map[string]any{"action": r.Action, "channel": r.Channel, "status": next.Status, "person": person,
		"reason": r.Reason, "args": d.Args, "scope": r.Scope, "for": d.For, "approvals": next.CountedApprovals(), "quorum": next.Quorum}
	if r.Action == ActionEdit {
		// The edit as a change: what this approver changed from the
		// arguments the approval carried before.
		detail["changes"] = Changes(a.Args(), d.Args)
		// Other approvers decide on the edited call now: its card shows it.
		out.UpdateCard = true
	}
	if d.Via != "" {
		// Eligible only through the identity provider's group: say so.
		detail["via_group"] = d.Via
	}
	ae.Detail = detailJSON(detail)
	out.Audit = []AuditEntry{ae}
	if next.Status.Final() {
		at := r.At
		next.DecidedAt = &at
		out.Final = true
		if next.Status != StatusRejected && r.Scope.Saves() {
			out.Grant = newGrant(next, r, verdict, env.sessionTTL())
			ge := base
			ge.Kind = AuditGrantCreated
			ge.Detail = detailJSON(map[string]any{"grant": out.Grant.ID, "scope": out.Grant.Scope, "thread": out.Grant.Thread,
				"requester": out.Grant.Requester, "run_id": out.Grant.RunID, "rule": out.Grant.RuleKey, "args": out.Grant.Args,
				"pattern": out.Grant.Pattern, "for": d.For, "expires_at": out.Grant.ExpiresAt})
			out.Audit = append(out.Audit, ge)
		}
	}
	return out
}

// refuseFunc refuses a request: an outcome with only the refusal's audit
// entry and the error.
type refuseFunc func(reason error, detail string, mod func(*RefusedError)) Outcome

// refuser returns the refuseFunc of a request by base's actor, audited
// approval.refused with its action and channel.
func refuser(base AuditEntry, action Action, channel string) refuseFunc {
	return func(reason error, detail string, mod func(*RefusedError)) Outcome {
		e := &RefusedError{Reason: reason, Detail: detail}
		if mod != nil {
			mod(e)
		}
		ae := base
		ae.Kind = AuditApprovalRefused
		ae.Detail = detailJSON(map[string]any{"action": action, "channel": channel, "reason": e.Error()})
		return Outcome{Audit: []AuditEntry{ae}, Err: e}
	}
}

// open refuses a request at `at` on an approval that takes none any more:
// expired (410), decided (409, naming who won), or past its expiry (which
// then expires it). done is false while it is pending and in time.
func open(a *Approval, at time.Time, refuse refuseFunc) (out Outcome, done bool) {
	if a.Status == StatusExpired {
		// Expired is not "decided by someone": surfaces answer 410.
		exp := a.ExpiresAt
		if a.DecidedAt != nil {
			exp = *a.DecidedAt
		}
		return refuse(ErrExpired, "expired at "+exp.UTC().Format(time.RFC3339), func(e *RefusedError) { e.At = exp }), true
	}
	if a.Status.Final() {
		return refuse(ErrAlreadyDecided, fmt.Sprintf("%s by %v", a.Status, a.Winners()), func(e *RefusedError) {
			e.By = a.Winners()
			if a.DecidedAt != nil {
				e.At = *a.DecidedAt
			}
		}), true
	}
	if !at.Before(a.ExpiresAt) {
		// Too late: the approval ends as its time says (expiry, or its
		// ladder's terminal default), and the decision is refused.
		out := Lapse(a, at)
		out.Audit = append(refuse(ErrExpired, "", nil).Audit, out.Audit...)
		out.Err = &RefusedError{Reason: ErrExpired, At: a.ExpiresAt}
		if st := out.Approval.Status; st != StatusExpired {
			out.Err = &RefusedError{Reason: ErrAlreadyDecided, By: []string{"system"}, At: a.ExpiresAt,
				Detail: fmt.Sprintf("%s by the escalation's default at %s", st, a.ExpiresAt.UTC().Format(time.RFC3339))}
		}
		return out, true
	}
	return Outcome{}, false
}

// selfDetail explains a self-approval refusal, naming the other identity
// when the requester asked through another one.
func selfDetail(actor, requester string) string {
	if actor == requester {
		return "ask another approver, or allow it on the rule (allow_self_approval: true)"
	}
	return actor + " and " + requester + " are the same person; ask another approver"
}

// newGrant is the grant a final approval with scope task, session or
// forever makes, bound to its final arguments and the live rule that asks
// for them; r.For bounds a session or forever grant.
func newGrant(a *Approval, r Request, v Verdict, ttl time.Duration) *Grant {
	g := &Grant{ID: GrantID(a.ID), Scope: r.Scope, Tool: a.Tool, ApprovalID: a.ID, Actor: r.Actor, At: r.At, RuleKey: v.RuleKey}
	until := func(d time.Duration) *time.Time {
		t := r.At.Add(d)
		return &t
	}
	switch r.Scope {
	case ScopeTask:
		g.RunID, g.Thread, g.Requester, g.ExpiresAt = a.RunID, a.Thread, a.Requester, until(ttl)
	case ScopeSession:
		if r.For > 0 {
			ttl = r.For
		}
		g.Thread, g.Requester, g.ExpiresAt = a.Thread, a.Requester, until(ttl)
	case ScopeForever:
		if r.Pattern != nil {
			g.Pattern = r.Pattern
		} else {
			g.Args = a.ApprovedArgs
		}
		if r.For > 0 {
			g.ExpiresAt = until(r.For)
		}
	}
	return g
}

// escalatedGrant says why r may not save a grant, or "": an approver whom
// only escalation made eligible decides the call in front of them, but a
// grant covers later calls only while its granter is among the rule's own
// approvers (Grant.Covers), so they may not make one.
func escalatedGrant(a *Approval, r Request, env Env) string {
	if !r.Scope.Saves() || len(a.AddedApprovers) == 0 || r.Action == ActionReject {
		return ""
	}
	if slices.Contains(env.People.Expand(a.Approvers), r.Actor) || viaGroup(r.Groups, a.Approvers) != "" {
		return ""
	}
	return fmt.Sprintf("%s may decide this call because escalation added %v; a grant (scope %s) needs one of the rule's approvers %v: approve with scope call",
		r.Actor, a.AddedApprovers, r.Scope, a.Approvers)
}

func (env Env) sessionTTL() time.Duration {
	if env.SessionTTL <= 0 {
		return DefaultSessionTTL
	}
	return env.SessionTTL
}

// Release ends a pending approval that nobody can answer any more (an
// Agent API caller hung up, or its turn was released at shutdown): it
// expires now, with why recorded on the expiry, so the run's model hears
// that nobody could approve rather than that time ran out. Like Expire it
// is a system action, never a person's decision.
func Release(a *Approval, now time.Time, why string) Outcome {
	o := Expire(a, now)
	o.Approval.Decisions[len(o.Approval.Decisions)-1].Reason = ReleasedPrefix + why
	o.Audit[0].Detail = detailJSON(map[string]any{"expires_at": a.ExpiresAt, "released": why})
	return o
}

// ReleasedPrefix starts the reason of an expiry that Release recorded.
const ReleasedPrefix = "released: "

// Released reports why a was released (Release), if it was.
func (a *Approval) Released() (string, bool) {
	if a.Status != StatusExpired || len(a.Decisions) == 0 {
		return "", false
	}
	d := a.Decisions[len(a.Decisions)-1]
	if d.Action != ActionExpire || !strings.HasPrefix(d.Reason, ReleasedPrefix) {
		return "", false
	}
	return strings.TrimPrefix(d.Reason, ReleasedPrefix), true
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
