package gate

import (
	"context"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// Record is how one kind of caller keeps its calls: a run's steps (flow
// steps, an LLM agent's calls) or an agent task's receipts. Each method
// writes what the gate hands it into the caller's own record in ONE
// transaction, with the audit entries and run events it carries; an error
// stops the call where it is.
type Record interface {
	// Suspend writes the approvals, the card, their audit entries and
	// events, and the caller's waiting state for each ask.
	Suspend(ctx context.Context, s *Suspension) error
	// Start writes the call dispatching, with its idempotency key and
	// attempt, before the tool runs (or, for a deferred start, while it
	// runs). A refusal (the run was cancelled) is settled as StartRefused.
	Start(ctx context.Context, s *Start) error
	// Settle maps an outcome onto the record: every kind but Suspended.
	Settle(ctx context.Context, o *Outcome) error
}

// DeferringRecord is the optional capability of a Record whose Start may
// be written late (startRecordDelay): the caller's start record holds nothing
// but the start. Only an idempotent call without an approval or an audited
// start is deferred.
type DeferringRecord interface {
	Record
	DeferStart() bool
}

// Kind is what became of a call.
type Kind string

// The outcomes the gate settles.
const (
	// Ran: the tool was called (allowed by rule, grant or approval, or
	// re-dispatched after a crash); Result and RunErr say how it went.
	Ran Kind = "ran"
	// Denied: a policy rule denies the call (when judged, or on resume).
	Denied Kind = "denied"
	// Invalid: the tool's schema or argument check refused the arguments.
	Invalid Kind = "invalid"
	// Unavailable: the tool cannot be had now (unknown, its server down).
	Unavailable Kind = "unavailable"
	// NeedsReason: a call the gate would ask about came without the reason
	// its caller requires; no card was posted.
	NeedsReason Kind = "needs_reason"
	// NoApprover: the call needed an approval nobody can give now.
	NoApprover Kind = "no_approver"
	// Suspended: an approval waits (Record.Suspend wrote it).
	Suspended Kind = "suspended"
	// Waiting: resumed, but the approval is still pending.
	Waiting Kind = "waiting"
	// Rejected, Expired: the approval ended without approving the call.
	Rejected Kind = "rejected"
	Expired  Kind = "expired"
	// Released: the approval was withdrawn because nobody could answer it
	// (approvals.Release); Problem says why.
	Released Kind = "released"
	// Refused: decided, but dispatch refused it: Code is
	// CodeDigestMismatch, CodeApprovalStale or CodeInvalidArgs.
	Refused Kind = "refused"
	// Interrupted: found dispatching after a crash and not idempotent (or
	// gone): its outcome is unknown and it was not called again.
	Interrupted Kind = "interrupted"
	// StartRefused: Record.Start failed (the run was cancelled or lost);
	// Running says whether the call had begun (a deferred start: it was
	// cut). Err is the refusal.
	StartRefused Kind = "start_refused"
)

// The codes of a Refused outcome.
const (
	// CodeDigestMismatch: the arguments to run are not the ones the
	// deciders saw (the approval's digest).
	CodeDigestMismatch = "digest_mismatch"
	// CodeApprovalStale: under the live configuration the call's deciders
	// no longer make its quorum (removed from the rule's approvers, a
	// higher quorum, or their own call).
	CodeApprovalStale = "approval_stale"
	// CodeInvalidArgs: the approved arguments no longer pass the tool's
	// schema as it is now.
	CodeInvalidArgs = "invalid_args"
)

// Outcome is what the gate settled for a call.
type Outcome struct {
	Kind Kind
	// Tool is the tool as resolved (nil when Unavailable).
	Tool *tools.Tool
	// Args are the arguments judged, run or refused.
	Args map[string]any
	// Verdict is the policy's answer (Denied, and every judged call).
	Verdict approvals.Verdict
	// Approval is the call's approval once one exists (resumed calls, and
	// the Ran of an approved call).
	Approval *approvals.Approval
	// Problem is one sentence for people or the model (Invalid,
	// Unavailable, NeedsReason, NoApprover, Released, Refused).
	Problem string
	// Code is a Refused outcome's code.
	Code string
	// Err is the underlying error (Invalid, Unavailable, StartRefused).
	Err error
	// Start is the start record of a dispatched call (Ran, StartRefused).
	Start *Start
	// Running: a StartRefused call had already begun and was cut.
	Running bool
	// Result and RunErr are the tool's (Ran); RunErr is its failure.
	Result tools.Result
	RunErr error
	// Suspension is what Suspend wrote (Suspended).
	Suspension *Suspension
	// At is when the outcome was reached.
	At time.Time
	// Audit and Events go into the record's settling transaction.
	Audit  []approvals.AuditEntry
	Events []core.RunEvent
}

// Start is the record written before a tool runs.
type Start struct {
	Tool *tools.Tool
	// Key is the idempotency key the tool receives; Attempt counts the
	// dispatches of the call (a re-dispatch after a crash is the second).
	Key     string
	Attempt int
	At      time.Time
	Args    map[string]any
	// ApprovalID is the approval the call runs under, if any; Approval is
	// set when it was decided just now (a resume).
	ApprovalID string
	Approval   *approvals.Approval
	// Late is set when the start is written after the call began (a
	// deferred start).
	Late   bool
	Audit  []approvals.AuditEntry
	Events []core.RunEvent
}

// Suspension is one suspend: one or more asks on one card.
type Suspension struct {
	Asks []Ask
	// Card is the card for the first ask (a card of several lists the
	// others); a caller whose thread takes no messages leaves it out.
	Card   core.OutboxMessage
	Audit  []approvals.AuditEntry
	Events []core.RunEvent
}

// Ask is one call waiting on an approval.
type Ask struct {
	Index    int
	Tool     *tools.Tool
	Args     map[string]any
	Approval *approvals.Approval
}
