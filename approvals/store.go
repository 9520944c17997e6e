package approvals

import (
	"context"
	"errors"
	"time"
)

// Store persists approvals, grants and the audit log. Implementations live
// in store/postgres and store/sqlite and pass store/storetest.
type Store interface {
	// ApprovalGet returns one approval with its decisions, or ErrNotFound.
	ApprovalGet(ctx context.Context, id string) (*Approval, error)
	// ApprovalList lists approvals newest first.
	ApprovalList(ctx context.Context, p ApprovalListParams) (items []*Approval, nextCursor string, err error)
	// ApprovalDecide is the compare-and-set at the heart of invariant 2.
	// In ONE transaction it locks the approval row, loads it, calls decide,
	// and persists the Outcome: the updated approval and its new decision,
	// the audit entries, the grant, and — when Outcome.Final — requeues the
	// run (waiting_approval → queued) and queues a card update in the outbox.
	// When Event is set, (channel, event id) is recorded in the same
	// transaction and a duplicate returns ErrDuplicateEvent without calling
	// decide. It returns the approval as stored and Outcome.Err.
	ApprovalDecide(ctx context.Context, p ApprovalDecideParams) (*Approval, error)
	// ApprovalListExpired returns ids of pending approvals whose expiry is
	// at or before now, for the expiry sweeper (which decides each through
	// ApprovalDecide with Expire, so expiry races decisions safely).
	ApprovalListExpired(ctx context.Context, now time.Time, limit int) ([]string, error)
	// GrantList lists grants (session and forever) newest first. With
	// ActiveAt set, only grants active then (not revoked, not expired).
	GrantList(ctx context.Context, p GrantListParams) (items []*Grant, nextCursor string, err error)
	// GrantRevoke revokes a grant and appends Audit, in one transaction:
	// ErrNotFound for an unknown id, ErrGrantRevoked (with the grant) when
	// it was revoked already.
	GrantRevoke(ctx context.Context, p GrantRevokeParams) (*Grant, error)
	// AuditList returns entries with Seq > after, in order.
	AuditList(ctx context.Context, p AuditListParams) ([]AuditEntry, error)
}

// ApprovalListParams filters ApprovalList. Cursor is opaque.
type ApprovalListParams struct {
	Status Status
	RunID  string
	// IDPrefix keeps approvals whose id it names as a typed id
	// (core/shortid's Matches: a prefix of the id, or of a UUID's random
	// part); Tool is an exact match; Decided keeps every status but pending.
	IDPrefix string
	Tool     string
	Decided  bool
	Limit    int
	Cursor   string
}

// ApprovalDecideParams drives one ApprovalDecide transaction.
type ApprovalDecideParams struct {
	ID string
	// Event deduplicates decisions that arrive as platform events.
	Event *EventKey
	// Decide computes the outcome from the locked, current approval.
	Decide func(a *Approval) Outcome
}

// EventKey identifies an inbound platform event for deduplication.
type EventKey struct {
	Channel string
	EventID string
	Actor   string
	Thread  string
	// Text is the event's normalized text (an email reply, a typed
	// "approve"), kept so the thread's history shows it.
	Text string
	Raw  []byte
	At   time.Time
}

// AuditListParams pages through the audit log. Filters are exact matches.
type AuditListParams struct {
	After      int64
	Limit      int
	Actor      string
	Tool       string
	RunID      string
	ApprovalID string
	Kind       string
	// Newest lists newest first instead: entries with Seq < Before (all
	// when Before is 0), After ignored.
	Newest bool
	Before int64
}

// GrantListParams filters GrantList. Cursor is opaque.
type GrantListParams struct {
	Tool     string
	ActiveAt time.Time
	Limit    int
	Cursor   string
}

// GrantRevokeParams revokes one grant.
type GrantRevokeParams struct {
	ID    string
	Actor string
	At    time.Time
	// Audit is appended in the revoking transaction.
	Audit []AuditEntry
}

// ErrGrantRevoked reports a grant that was already revoked.
var ErrGrantRevoked = errors.New("grant already revoked")

// ErrDuplicateEvent reports an event already recorded; nothing changed.
var ErrDuplicateEvent = errors.New("event already recorded")
