package approvals

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Status is an approval's state. Only pending approvals take decisions.
type Status string

// The approval statuses (docs/architecture.md, "Surfaces users depend on").
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	StatusEdited   Status = "edited"
	StatusExpired  Status = "expired"
)

// Final reports whether no further decision can change the approval.
func (s Status) Final() bool { return s != StatusPending }

// Statuses lists every approval status, so filters, schemas and pickers
// are built from one list instead of copies that drift.
var Statuses = []Status{StatusPending, StatusApproved, StatusRejected, StatusEdited, StatusExpired}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Action is what an approver answers.
type Action string

// The decision actions.
const (
	ActionApprove Action = "approve"
	ActionReject  Action = "reject"
	ActionEdit    Action = "edit"
	// ActionExpire is the system's decision when an approval times out (or
	// its run is cancelled); no person can send it.
	ActionExpire Action = "expire"
	// ActionDelegate records in the decisions that an approver handed the
	// approval to a person or group (Decision.To); see Delegate. It is
	// not a decision: it neither counts toward quorum nor ends anything.
	ActionDelegate Action = "delegate"
)

// Valid reports whether a is an action a person may send: approve, reject
// or edit (not the system's expire).
func (a Action) Valid() bool {
	switch a {
	case ActionApprove, ActionReject, ActionEdit:
		return true
	}
	return false
}

// Scope says how far an approval reaches: this call only; later calls of
// the same rule in the same run (task: the rest of an agent's turn, a
// flow's later steps); later calls of the same rule from the same
// requester in the same thread for a while (session); or a stored allow
// rule for the same arguments (forever). No scope reaches over a deny; see
// Grant.
type Scope string

// The decision scopes.
const (
	ScopeCall    Scope = "call"
	ScopeTask    Scope = "task"
	ScopeSession Scope = "session"
	ScopeForever Scope = "forever"
)

// Valid reports whether s is a known scope. The empty scope means
// ScopeCall and is not Valid itself; callers accept it first.
func (s Scope) Valid() bool {
	switch s {
	case ScopeCall, ScopeTask, ScopeSession, ScopeForever:
		return true
	}
	return false
}

// Risk is a tool's declared risk tier; it drives the default policy and is
// shown on every card.
type Risk string

// The risk tiers (docs/architecture.md), from harmless to dangerous.
const (
	RiskRead       Risk = "read"
	RiskReversible Risk = "reversible"
	RiskExternal   Risk = "external"
	RiskHighImpact Risk = "high_impact"
)

// Valid reports whether r is one of the risk tiers above.
func (r Risk) Valid() bool {
	switch r {
	case RiskRead, RiskReversible, RiskExternal, RiskHighImpact:
		return true
	}
	return false
}

// Approval is a suspended tool call waiting for (or past) a human decision.
// Proposed, approved and executed arguments are kept apart so the audit can
// show what was asked, what was allowed and what actually ran.
type Approval struct {
	ID        string `json:"id"`
	RunID     string `json:"run_id"`
	StepIndex int    `json:"step_index"`
	// Thread is the run's thread in "<channel>:<key>" form.
	Thread    string `json:"thread"`
	Requester string `json:"requester"`
	Tool      string `json:"tool"`
	// Destructive and Risk are copied from the tool so a decision can be
	// judged without the config that created the call.
	Destructive  bool           `json:"destructive"`
	Risk         Risk           `json:"risk"`
	ProposedArgs map[string]any `json:"proposed_args"`
	ApprovedArgs map[string]any `json:"approved_args"`
	ExecutedArgs map[string]any `json:"executed_args"`
	Preview      string         `json:"dry_run_preview"`
	Reason       string         `json:"reason"`
	Status       Status         `json:"status"`
	// Approvers are the rule's entries as configured ("group:sre");
	// Eligible are the identities they expand to at creation time.
	Approvers []string `json:"approvers"`
	Eligible  []string `json:"eligible"`
	Quorum    int      `json:"quorum"`
	// Rule is the index of the policy rule that asked (-1: the default);
	// RuleKey is that rule's Key and PolicyVersion the policy's Version
	// when it asked (or when an edit was re-judged).
	Rule          int    `json:"rule"`
	RuleKey       string `json:"rule_key,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	// Digest names what the approval lets run (see Digest): set when the
	// gate asks, renewed by an edit; dispatch refuses arguments that no
	// longer hash to it.
	Digest string `json:"digest,omitempty"`
	// Why is the policy's one line on why it asked ("policy rule 3: deploy
	// to prod* by a non-lead: ask"), as judged when it asked (or when an
	// edit was re-judged).
	Why string `json:"why,omitempty"`
	// Receipt is the signed receipt of a decision people made (package
	// approvals/receipt), set in the deciding transaction; "" before, or
	// when no signing key is configured. It is served only by the receipt
	// endpoint, so it is left out of the approval's JSON.
	Receipt   string     `json:"-"`
	Decisions []Decision `json:"decisions"`
	CreatedAt time.Time  `json:"created_at"`
	// ExpiresAt is the approval's end: approvals.ttl after it asked, or
	// its ladder's terminal step (Climb).
	ExpiresAt time.Time  `json:"expires_at"`
	DecidedAt *time.Time `json:"decided_at"`

	// Ladder is the escalation ladder the approval climbs while pending
	// (its rule's escalation, or approvals.escalation), fixed when it
	// asked, as its expiry is.
	Ladder []Step `json:"escalation,omitempty"`
	// Escalated counts the ladder's steps fired so far; a sweeper claims
	// step Escalated by compare-and-set on it, so each fires once.
	Escalated int `json:"escalated"`
	// EscalationDue is when step Escalated fires; nil when only the end
	// (ExpiresAt: expiry or the terminal default) is left.
	EscalationDue *time.Time `json:"escalation_due,omitempty"`
	// AddedApprovers are the entries add_approvers steps added: they
	// decide this call beside Approvers (Entries).
	AddedApprovers []string `json:"added_approvers,omitempty"`
	// CardThreads are the threads besides Thread the card was sent to
	// (escalated approvers' direct messages): the card's update on the
	// decision goes to each.
	CardThreads []string `json:"card_threads,omitempty"`
}

// Decision is one approver's recorded answer (or the system's, for expiry).
type Decision struct {
	Actor string `json:"actor"`
	// Person is the human behind Actor when the decision was made
	// ("person:alice", or Actor itself): quorum counts distinct persons.
	Person  string         `json:"person,omitempty"`
	Channel string         `json:"channel"`
	Action  Action         `json:"action"`
	Args    map[string]any `json:"args,omitempty"`
	Reason  string         `json:"reason,omitempty"`
	Scope   Scope          `json:"scope,omitempty"`
	// For is the bound the decider set on a session or forever grant
	// ("2h"), as written.
	For string    `json:"for,omitempty"`
	At  time.Time `json:"at"`
	// Digest is the approval's Digest this decision was made on (an
	// edit's: the digest of the edited call).
	Digest string `json:"digest,omitempty"`
	// Via is the approver group the deciding surface vouched for when the
	// actor was eligible only through it (an identity provider's group at
	// console sign-in): dispatch judges the decider still eligible while
	// the live rule names that group.
	Via string `json:"via,omitempty"`
	// Superseded marks approvals of older arguments that an edit voided;
	// they stay in the record but no longer count toward quorum.
	Superseded bool `json:"superseded,omitempty"`
	// To is whom a delegation (ActionDelegate) handed the approval to:
	// "person:<name>" or "group:<name>".
	To string `json:"to,omitempty"`
}

// RejectionReasons joins the reasons people gave for rejecting a: the
// feedback handed back to whoever asked (a thread, a model, an agent task).
func (a *Approval) RejectionReasons() string {
	var parts []string
	for _, d := range a.Decisions {
		if d.Action == ActionReject && d.Reason != "" {
			parts = append(parts, d.Reason)
		}
	}
	return strings.Join(parts, "; ")
}

// Winners lists the actors whose decisions produced the final status, for
// "Approved by … at …" and for 409 answers.
func (a *Approval) Winners() []string {
	var out []string
	for _, d := range a.Decisions {
		if d.Superseded {
			continue
		}
		switch {
		case a.Status == StatusRejected && d.Action == ActionReject,
			a.Status == StatusExpired && d.Action == ActionExpire,
			(a.Status == StatusApproved || a.Status == StatusEdited) && (d.Action == ActionApprove || d.Action == ActionEdit):
			out = append(out, d.Actor)
		}
	}
	return out
}

// CountedApprovals is the number of distinct persons whose approval
// counts toward quorum now: two identities of one human count once.
func (a *Approval) CountedApprovals() int {
	seen := map[string]bool{}
	for _, d := range a.Decisions {
		if !d.Superseded && (d.Action == ActionApprove || d.Action == ActionEdit) {
			seen[d.who()] = true
		}
	}
	return len(seen)
}

// who is the person a decision counts for (decisions recorded before
// people existed name only their actor).
func (d Decision) who() string {
	if d.Person != "" {
		return d.Person
	}
	return d.Actor
}

// Clone returns a deep copy, so a decision can be computed on a copy and
// discarded if refused.
func (a *Approval) Clone() *Approval {
	b, err := json.Marshal(a)
	if err != nil {
		panic("approvals: clone: " + err.Error()) // only JSON-safe values are stored
	}
	var c Approval
	if err := json.Unmarshal(b, &c); err != nil {
		panic("approvals: clone: " + err.Error())
	}
	c.Receipt = a.Receipt // not part of the JSON
	return &c
}
