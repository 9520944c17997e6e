package core

import (
	"context"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// EscalationStore keeps what the escalation of pending approvals needs:
// the steps due, a step's effects written once, and the backlog /metrics
// reports. The engine's sweeper is its one caller (docs/architecture.md,
// "Escalation").
type EscalationStore interface {
	// ApprovalListEscalating returns the ids of pending approvals whose
	// next escalation step is due at or before now, soonest first.
	ApprovalListEscalating(ctx context.Context, now time.Time, limit int) ([]string, error)
	// ApprovalEscalate, in ONE transaction, locks the approval, calls Fire
	// with it and, when Fire returns a step, writes the approval's
	// escalation state (escalated, escalation_due, eligible,
	// added_approvers, card_threads) guarded by compare-and-set on its
	// pending status and Escalated as read, with the step's outbox
	// messages and audit entries. fired is false when Fire declined or the
	// guard found the step taken; an unknown id matches ErrNotFound.
	ApprovalEscalate(ctx context.Context, p ApprovalEscalateParams) (a *approvals.Approval, fired bool, err error)
	// ApprovalPendingStats counts the pending approvals per risk, with
	// the creation time of the oldest of each.
	ApprovalPendingStats(ctx context.Context) ([]PendingStat, error)
}

// ApprovalEscalateParams drives one ApprovalEscalate transaction.
type ApprovalEscalateParams struct {
	ID string
	// Fire computes the step from the locked, current approval; nil when
	// no step is due.
	Fire func(a *approvals.Approval) *Escalation
}

// Escalation is what one step writes.
type Escalation struct {
	// Approval is the approval after the step (approvals.Fired.Approval).
	Approval *approvals.Approval
	Outbox   []OutboxMessage
	Audit    []approvals.AuditEntry
}

// PendingStat is the backlog of one risk tier.
type PendingStat struct {
	Risk   approvals.Risk
	Count  int
	Oldest time.Time
}

// DirectMessenger is the optional capability of an adapter that can write
// to one person directly (a Slack DM, a Telegram private chat): escalation
// reminds approvers there and hands escalated approvers the card there.
// DirectThread returns the thread of the direct conversation with the
// platform user id (an identity without its "<channel>:" prefix), false
// when there is none. Approvers on a platform without it are reminded in
// the request's thread and see the approval in the console.
type DirectMessenger interface {
	DirectThread(userID string) (Thread, bool)
}
