package approvals

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Step is one rung of an escalation ladder: After the request, with the
// approval still pending, it does exactly one thing — remind the eligible
// approvers again, widen who may decide (AddApprovers), or end the
// approval with a terminal default (Outcome). A ladder is the rule's
// escalation (or the policy's default, approvals.escalation), in order of
// After, with at most one Outcome, last.
type Step struct {
	After        time.Duration `json:"after"`
	Remind       bool          `json:"remind,omitempty"`
	AddApprovers []string      `json:"add_approvers,omitempty"`
	Outcome      Terminal      `json:"outcome,omitempty"`
}

// stepJSON is Step's JSON form: After as duration text ("10m0s"), as
// the API shows it and the store keeps it.
type stepJSON struct {
	After        string   `json:"after"`
	Remind       bool     `json:"remind,omitempty"`
	AddApprovers []string `json:"add_approvers,omitempty"`
	Outcome      Terminal `json:"outcome,omitempty"`
}

// MarshalJSON writes After as duration text.
func (s Step) MarshalJSON() ([]byte, error) {
	return json.Marshal(stepJSON{After: s.After.String(), Remind: s.Remind, AddApprovers: s.AddApprovers, Outcome: s.Outcome})
}

// UnmarshalJSON reads After as duration text.
func (s *Step) UnmarshalJSON(b []byte) error {
	var j stepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d, err := time.ParseDuration(j.After)
	if err != nil {
		return fmt.Errorf("escalation step: after: %w", err)
	}
	*s = Step{After: d, Remind: j.Remind, AddApprovers: j.AddApprovers, Outcome: j.Outcome}
	return nil
}

// Terminal is the default a ladder's last step applies to an approval
// nobody decided.
type Terminal string

// The terminal defaults. TerminalApprove is never applied to a
// high_impact or destructive call: such a call is denied instead (and
// config check refuses the ladder).
const (
	TerminalDeny    Terminal = "deny"
	TerminalApprove Terminal = "approve"
)

// The kinds of step, as audit entries and the escalations metric name them.
const (
	StepRemind       = "remind"
	StepAddApprovers = "add_approvers"
	StepDeny         = "deny"
	StepApprove      = "approve"
)

// EscalationChannel is the channel of the system's decision a terminal
// step makes ("decided by system via escalation").
const EscalationChannel = "escalation"

// Kind names what the step does: remind, add_approvers, deny or approve.
func (s Step) Kind() string {
	switch {
	case s.Outcome != "":
		return string(s.Outcome)
	case len(s.AddApprovers) > 0:
		return StepAddApprovers
	case s.Remind:
		return StepRemind
	}
	return ""
}

// Check reports what is wrong with the step alone: it must do exactly one
// thing, after a positive time.
func (s Step) Check() error {
	n := 0
	if s.Remind {
		n++
	}
	if len(s.AddApprovers) > 0 {
		n++
	}
	if s.Outcome != "" {
		n++
		if s.Outcome != TerminalDeny && s.Outcome != TerminalApprove {
			return fmt.Errorf("outcome %q: want deny or approve", s.Outcome)
		}
	}
	switch {
	case n == 0:
		return errors.New("a step needs remind: true, add_approvers or outcome")
	case n > 1:
		return errors.New("a step does one thing: remind: true, add_approvers or outcome")
	case s.After <= 0:
		return errors.New("after must be a positive duration")
	}
	return nil
}

// CheckLadder reports the first problem of a ladder as a whole (each
// step's own problems first): steps in strictly increasing order of After,
// an outcome only as the last step.
func CheckLadder(ladder []Step) (int, error) {
	for i, s := range ladder {
		if err := s.Check(); err != nil {
			return i, err
		}
		if i > 0 && s.After <= ladder[i-1].After {
			return i, fmt.Errorf("after %s is not later than the step before (%s): steps go in order", s.After, ladder[i-1].After)
		}
		if s.Outcome != "" && i != len(ladder)-1 {
			return i, errors.New("an outcome ends the ladder: it must be the last step")
		}
	}
	return -1, nil
}

// Ladder is the escalation ladder of the verdict's rule: the rule's own
// escalation when it has one (an empty list turns escalation off for it),
// else the policy's default (approvals.escalation).
func (p *Policy) Ladder(v Verdict) []Step {
	if p == nil {
		return nil
	}
	if v.Rule >= 0 && v.Rule < len(p.Rules) && p.Rules[v.Rule].Escalation != nil {
		return p.Rules[v.Rule].Escalation
	}
	return p.Escalation
}

// LadderApprovers lists every entry the ladder's add_approvers steps name.
func LadderApprovers(ladder []Step) []string {
	var out []string
	for _, s := range ladder {
		out = append(out, s.AddApprovers...)
	}
	return out
}

// Climb gives a new approval its ladder and its end: ttl after its
// creation, unless the ladder ends in an outcome, whose After is then the
// end (the terminal default replaces expiry, later or sooner than ttl).
// It schedules the first step.
func (a *Approval) Climb(ladder []Step, ttl time.Duration) {
	a.Ladder = slices.Clone(ladder)
	a.ExpiresAt = a.CreatedAt.Add(ttl)
	if t, ok := a.terminal(); ok {
		a.ExpiresAt = a.CreatedAt.Add(t.After)
	}
	a.Escalated = 0
	a.schedule()
}

// terminal is the ladder's outcome step, if it ends in one.
func (a *Approval) terminal() (Step, bool) {
	if n := len(a.Ladder); n > 0 && a.Ladder[n-1].Outcome != "" {
		return a.Ladder[n-1], true
	}
	return Step{}, false
}

// schedule sets EscalationDue to when step Escalated is due, or nil when
// no step but the end (expiry or the outcome) is left.
func (a *Approval) schedule() {
	a.EscalationDue = nil
	if a.Escalated >= len(a.Ladder) {
		return
	}
	s := a.Ladder[a.Escalated]
	due := a.CreatedAt.Add(s.After)
	if s.Outcome != "" || !due.Before(a.ExpiresAt) {
		return
	}
	a.EscalationDue = &due
}

// Entries are the approver entries that decide the approval now: the
// rule's (Approvers) and those escalation added (AddedApprovers).
func (a *Approval) Entries() []string {
	if len(a.AddedApprovers) == 0 {
		return a.Approvers
	}
	out := slices.Clone(a.Approvers)
	for _, e := range a.AddedApprovers {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// Next is what happens to a pending approval next if nobody decides it:
// a step of its ladder, or its expiry (Kind "expire").
type Next struct {
	Kind string
	At   time.Time
	// Approvers are the entries an add_approvers step adds.
	Approvers []string
}

// NextStep says what happens next and when; ok is false once the
// approval is decided.
func (a *Approval) NextStep() (Next, bool) {
	if a.Status != StatusPending {
		return Next{}, false
	}
	if a.EscalationDue != nil && a.Escalated < len(a.Ladder) {
		s := a.Ladder[a.Escalated]
		return Next{Kind: s.Kind(), At: *a.EscalationDue, Approvers: s.AddApprovers}, true
	}
	if t, ok := a.terminal(); ok {
		return Next{Kind: string(t.Outcome), At: a.ExpiresAt}, true
	}
	return Next{Kind: "expire", At: a.ExpiresAt}, true
}

// Sentence says it for people: "a reminder to the approvers at …".
func (n Next) Sentence() string {
	at := n.At.UTC().Format("2006-01-02 15:04 UTC")
	switch n.Kind {
	case StepRemind:
		return "the approvers are reminded at " + at
	case StepAddApprovers:
		return strings.Join(n.Approvers, ", ") + " may also decide from " + at
	case StepDeny:
		return "denied by default at " + at + " if still undecided"
	case StepApprove:
		return "approved by default at " + at + " if still undecided"
	}
	return "expires at " + at + " with no decision"
}

// Fired is one non-terminal step an approval climbed (Escalate).
type Fired struct {
	// Approval is the approval after the step: Escalated advanced, the
	// next step scheduled, approvers added.
	Approval *Approval
	Index    int
	Step     Step
	// Notify are the identities to tell: for a reminder, everyone who may
	// decide and has not approved yet; for add_approvers, the identities
	// it made eligible. Never the requester, never an agent.
	Notify []string
	Audit  AuditEntry
}

// Escalate fires the step the pending approval a is due for at now, if
// any: a reminder (who to notify) or add_approvers (who is added, through
// the live directory dir). Terminal steps are not fired here: they end the
// approval through Lapse, as a decision. The caller persists Fired with a
// compare-and-set on a's Escalated, so a step fires exactly once however
// many sweepers look.
func Escalate(a *Approval, now time.Time, dir *Directory) (*Fired, bool) {
	if a.Status != StatusPending || a.EscalationDue == nil || now.Before(*a.EscalationDue) || a.Escalated >= len(a.Ladder) ||
		!now.Before(a.ExpiresAt) {
		// Past its end the approval lapses (Lapse) instead.
		return nil, false
	}
	i, s := a.Escalated, a.Ladder[a.Escalated]
	next := a.Clone()
	f := &Fired{Approval: next, Index: i, Step: s}
	detail := map[string]any{"step": i, "kind": s.Kind(), "after": s.After.String(), "due": a.EscalationDue.UTC()}
	switch {
	case len(s.AddApprovers) > 0:
		for _, e := range s.AddApprovers {
			if !slices.Contains(next.AddedApprovers, e) {
				next.AddedApprovers = append(next.AddedApprovers, e)
			}
		}
		for _, id := range dir.Expand(s.AddApprovers) {
			if !slices.Contains(next.Eligible, id) {
				next.Eligible = append(next.Eligible, id)
				f.Notify = append(f.Notify, id)
			}
		}
		detail["approvers"], detail["added"] = s.AddApprovers, f.Notify
	case s.Remind:
		voted := map[string]bool{}
		for _, d := range a.Decisions {
			if !d.Superseded && (d.Action == ActionApprove || d.Action == ActionEdit) {
				voted[d.who()] = true
			}
		}
		live := dir.Expand(a.Entries())
		for _, id := range a.Eligible {
			if slices.Contains(live, id) && !voted[dir.Person(id)] && !voted[id] {
				f.Notify = append(f.Notify, id)
			}
		}
	}
	f.Notify = slices.DeleteFunc(f.Notify, func(id string) bool { return NeverDecides(id) || dir.SamePerson(id, a.Requester) })
	if len(s.AddApprovers) == 0 {
		detail["notified"] = f.Notify
	}
	next.Escalated = i + 1
	next.schedule()
	if next.EscalationDue != nil {
		detail["next_due"] = next.EscalationDue.UTC()
	}
	f.Audit = NewAuditEntry(now, AuditApprovalEscalated, "system", a.RunID, a.ID, a.Tool, detail)
	return f, true
}

// Lapse is what becomes of a pending approval whose time is up: its
// ladder's terminal default when it ends in one — deny as a rejection,
// approve as the system's approval (never for a high_impact or
// destructive call, which is denied instead) — else expiry. A terminal
// default is a decision by "system" on channel "escalation", audited as
// both the step and the decision.
func Lapse(a *Approval, now time.Time) Outcome {
	t, ok := a.terminal()
	if !ok {
		return Expire(a, now)
	}
	i := len(a.Ladder) - 1
	next := a.Clone()
	next.Escalated = len(a.Ladder)
	next.EscalationDue = nil
	next.DecidedAt = &now
	d := Decision{Actor: "system", Person: "system", Channel: EscalationChannel, At: now, Digest: a.Digest}
	outcome := t.Outcome
	why := fmt.Sprintf("no decision within %s: the escalation ladder's default", t.After)
	if outcome == TerminalApprove && (a.Risk == RiskHighImpact || a.Destructive) {
		outcome = TerminalDeny
		why += " would approve, but a default never approves a high_impact or destructive call; denied"
	} else {
		why += " " + map[Terminal]string{TerminalDeny: "denies", TerminalApprove: "approves"}[outcome]
	}
	d.Reason = why
	if outcome == TerminalApprove {
		d.Action = ActionApprove
		next.Status = StatusApproved
		if next.ApprovedArgs != nil {
			next.Status = StatusEdited
			d.Digest = next.Digest
		} else {
			next.ApprovedArgs = next.ProposedArgs
		}
	} else {
		d.Action = ActionReject
		next.Status = StatusRejected
	}
	next.Decisions = append(next.Decisions, d)
	step := NewAuditEntry(now, AuditApprovalEscalated, "system", a.RunID, a.ID, a.Tool,
		map[string]any{"step": i, "kind": string(t.Outcome), "after": t.After.String(), "applied": string(outcome), "why": why})
	decided := NewAuditEntry(now, AuditApprovalDecided, "system", a.RunID, a.ID, a.Tool,
		map[string]any{"action": d.Action, "channel": EscalationChannel, "status": next.Status, "reason": why})
	return Outcome{Approval: next, Final: true, Audit: []AuditEntry{step, decided}}
}

// ByEscalation reports whether the decision is a ladder's terminal
// default rather than a person's.
func (d Decision) ByEscalation() bool { return d.Actor == "system" && d.Channel == EscalationChannel }
