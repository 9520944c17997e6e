package core

import (
	"context"
	"slices"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// Store is everything the core persists. store/postgres and store/sqlite
// implement it (with approvals.Store and the agents' stores); store/storetest holds the one
// conformance suite both pass. Every method that changes state does so in
// ONE transaction.
type Store interface {
	RunStore
	OutboxStore
	StateStore
	ThreadStore
	approvals.Store
	EscalationStore
	// The agents' stores: an agent_task step's calls and receipts, an
	// agent's conversations, Agent API sessions, MCP task handles and the
	// trace a run was started under. Both backends keep them, so the
	// engine and the surfaces take them from the one Store.
	AgentCallStore
	AgentHistoryStore
	AgentSessionStore
	MCPTaskStore
	RunTraceStore
	// Subscribe returns a channel that receives a value (coalesced, never
	// blocking the sender) after a commit touching topic: TopicRuns when a
	// run becomes claimable, TopicOutbox when a message is queued,
	// TopicEvents when a run event is appended. Postgres uses
	// LISTEN/NOTIFY so other replicas wake too; callers still poll as a
	// fallback. cancel releases the subscription.
	Subscribe(topic string) (ch <-chan struct{}, cancel func())
	// Ping reports whether the store is reachable, for /readyz.
	Ping(ctx context.Context) error
	Close() error
}

// The wake-up topics of Store.Subscribe.
const (
	TopicRuns   = "runs"
	TopicOutbox = "outbox"
	TopicEvents = "events"
)

// RunStore persists events, runs, steps and run events.
type RunStore interface {
	// InboxRecord records an inbound event and, in the same transaction,
	// the run it starts (status queued, with a run.queued event) and any
	// immediate replies (e.g. the help text for an unknown command). A
	// (channel, event id) seen before changes nothing and returns
	// Duplicate with the run the first delivery started.
	InboxRecord(ctx context.Context, p InboxRecordParams) (InboxResult, error)
	// RunClaim hands up to Limit runs to Owner under a lease: queued runs
	// whose thread has no active run and no older queued run, oldest
	// first, and running runs whose lease expired (their owner died). It
	// sets them running. Postgres claims with FOR UPDATE SKIP LOCKED.
	RunClaim(ctx context.Context, p RunClaimParams) ([]*Run, error)
	// RunHeartbeat extends the leases of the runs p.RunIDs that p.Owner
	// holds and that are still running. A run Owner holds but does not list
	// is left alone, so its lease lapses and another claim takes it: a
	// process renews only the runs it is executing, never one it lost track
	// of (after a store outage, say).
	RunHeartbeat(ctx context.Context, p RunHeartbeatParams) error
	// RunCheckpoint applies one step-boundary transition atomically; see
	// Checkpoint. It returns ErrConflict when the guard fails.
	RunCheckpoint(ctx context.Context, c Checkpoint) error
	// RunGet returns a run with its steps, or ErrNotFound.
	RunGet(ctx context.Context, id string) (*Run, error)
	// RunList lists runs newest first.
	RunList(ctx context.Context, p RunListParams) (items []*Run, nextCursor string, err error)
	// RunEventList returns a run's events with Seq > after, in order.
	RunEventList(ctx context.Context, runID string, after int64, limit int) ([]RunEvent, error)
}

// StateStore is a small durable key/value space for adapters: positions
// that must survive restarts and be shared by replicas (the email adapter's
// IMAP cursor), so no adapter keeps state in a local file the next replica
// cannot see. Keys are namespaced by their owner ("email:cursor:…"); values
// are opaque bytes the owner encodes. An adapter that needs it declares its
// own smaller interface; this one exists so every backend implements it.
type StateStore interface {
	// StateGet returns the value stored under key, or ErrNotFound.
	StateGet(ctx context.Context, key string) ([]byte, error)
	// StatePut stores value under key (insert or overwrite) at now, in one
	// transaction; the last put wins.
	StatePut(ctx context.Context, key string, value []byte, now time.Time) error
}

// ThreadStore reads conversations back: what was said in a thread, both
// ways, and which threads a channel has. The web console renders its chat
// from it, so a message that started no run (a typo, "help") is shown with
// its reply, and the thread list covers every thread, not just recent runs.
// Both are keyset-paginated newest first and served by indexes on
// (thread, time), so a long history costs a page, not a scan.
type ThreadStore interface {
	// ThreadMessages returns Thread's inbound events (with the text
	// InboxRecord stored) and outbound outbox messages (replies, cards,
	// card updates) merged newest first: by time, an outbound message
	// before an inbound event of the same instant (a reply is written in
	// the same transaction as its request), then by outbox seq or event id.
	// next is the Before of the following page, "" after the last.
	ThreadMessages(ctx context.Context, p ThreadMessagesParams) (items []ThreadMessage, next string, err error)
	// ThreadList lists the threads of Channel that hold inbound events or
	// outbox messages, most recently active first (LastAt, then thread
	// descending). next is the Cursor of the following page.
	ThreadList(ctx context.Context, p ThreadListParams) (items []ThreadSummary, next string, err error)
	// ThreadOfMessage returns the thread a message opsgate sent went to,
	// by the platform reference its channel returned (any chunk of it), or
	// ErrNotFound: how a reply to the bot finds its conversation.
	ThreadOfMessage(ctx context.Context, ref MessageRef) (Thread, error)
	// ThreadSeen reports whether the thread holds an inbound event opsgate
	// recorded or an outbox message it queued: whether opsgate takes part
	// in it. A chat adapter asks, to take a follow-up without a mention in
	// a thread the bot answered before a restart or on another replica,
	// from what the inbox and the outbox record anyway — no write of its
	// own on the reply path. Served by the (thread, time) indexes.
	ThreadSeen(ctx context.Context, thread Thread) (bool, error)
}

// ThreadMessagesParams selects one page of a thread's messages. Before is
// an opaque cursor from a previous page; Limit ≤ 0 means the default.
type ThreadMessagesParams struct {
	Thread Thread
	Before string
	Limit  int
}

// MessageDirection says which way a thread message went.
type MessageDirection string

// The directions of a ThreadMessage.
const (
	// MessageIn is an inbound event (someone wrote to opsgate).
	MessageIn MessageDirection = "in"
	// MessageOut is an outbox message (opsgate wrote to the thread).
	MessageOut MessageDirection = "out"
)

// ThreadMessage is one message of a conversation as ThreadMessages returns
// it. Inbound messages carry ID (the event id), Actor, Text, At (received)
// and RunID when the event started a run; outbound ones carry ID (the
// outbox id), Kind, Text, ApprovalID, RunID, Status and At (created).
type ThreadMessage struct {
	Direction  MessageDirection `json:"direction"`
	ID         string           `json:"id"`
	Actor      string           `json:"actor,omitempty"`
	Kind       MessageKind      `json:"kind,omitempty"`
	Text       string           `json:"text"`
	ApprovalID string           `json:"approval_id,omitempty"`
	RunID      string           `json:"run_id,omitempty"`
	Status     DeliveryStatus   `json:"status,omitempty"`
	At         time.Time        `json:"at"`
}

// ThreadListParams selects one page of a channel's threads. Cursor is
// opaque; Limit ≤ 0 means the default.
type ThreadListParams struct {
	Channel string
	Limit   int
	Cursor  string
}

// ThreadSummary is one thread of ThreadList: when it last saw a message
// (either way) and how many it holds (inbound events plus outbox messages).
type ThreadSummary struct {
	Thread   Thread    `json:"thread"`
	LastAt   time.Time `json:"last_at"`
	Messages int       `json:"messages"`
}

// InboxRecordParams is one inbound event and what it starts.
type InboxRecordParams struct {
	Event ChannelEvent
	// Run, if set, is created queued (ID, Flow, Thread, Requester, Args,
	// Reason, CreatedAt are used).
	Run     *Run
	Replies []OutboxMessage
	Events  []RunEvent
	// Audit entries are appended (sealed into the chain) with the event,
	// e.g. a request refused because its sender may not start runs.
	Audit []approvals.AuditEntry
}

// InboxResult says what InboxRecord did.
type InboxResult struct {
	Duplicate bool
	// RunID is the run this event started (now or on first delivery).
	RunID string
}

// RunClaimParams bounds one claim.
type RunClaimParams struct {
	Owner      string
	Limit      int
	Now        time.Time
	LeaseUntil time.Time
}

// RunHeartbeatParams names the runs one heartbeat renews.
type RunHeartbeatParams struct {
	Owner      string
	RunIDs     []string
	LeaseUntil time.Time
}

// Checkpoint is one atomic transition of a run at a step boundary. The
// guard: when Owner is set the run must be held by Owner (its lease may be
// renewed); when ExpectStatus is set the run's status must be one of them.
// Then, in one transaction: the step is upserted, the approval inserted,
// the run's fields updated, and outbox messages, audit entries (sealed into
// the chain) and run events appended.
type Checkpoint struct {
	RunID        string
	Owner        string
	ExpectStatus []RunStatus
	Now          time.Time

	// Status, when set, is the run's new status. Release clears the owner
	// and lease (for waiting and final states).
	Status       RunStatus
	Release      bool
	StepIndex    *int
	ErrorCode    string
	ErrorMessage string

	// Step, when set, is upserted by (run, index).
	Step *Step
	// Approval, when set, is inserted (the suspend of an ask).
	Approval *approvals.Approval
	// MoreSteps are upserted and MoreApprovals inserted beside Step and
	// Approval: the other gated calls of an agent's turn, suspended with
	// it on one card.
	MoreSteps     []Step
	MoreApprovals []*approvals.Approval
	Outbox        []OutboxMessage
	Audit         []approvals.AuditEntry
	Events        []RunEvent
}

// RunListParams filters RunList. Cursor is opaque.
type RunListParams struct {
	Status RunStatus
	Thread string
	// IDPrefix keeps runs whose id it names as a typed id (shortid.Matches:
	// a prefix of the id, or of a UUID's random part).
	IDPrefix string
	// Channel keeps runs whose thread is in this channel; Flow and
	// Requester are exact matches (the console's filters).
	Channel   string
	Flow      string
	Requester string
	Limit     int
	Cursor    string
}

// DeliveryStatus is an outbox message's delivery state.
type DeliveryStatus string

// The delivery statuses. A dead message waits for an admin to requeue it.
const (
	DeliveryPending DeliveryStatus = "pending"
	DeliverySent    DeliveryStatus = "sent"
	DeliveryDead    DeliveryStatus = "dead"
)

// DeliveryStatuses lists every delivery status, so filters and schemas are
// built from one list instead of copies that drift.
var DeliveryStatuses = []DeliveryStatus{DeliveryPending, DeliverySent, DeliveryDead}

// Valid reports whether s is one of the delivery statuses above.
func (s DeliveryStatus) Valid() bool { return slices.Contains(DeliveryStatuses, s) }

// Delivery is an outbox message with its delivery state, as the pipeline
// and the API see it.
type Delivery struct {
	OutboxMessage
	Seq           int64          `json:"seq"`
	Status        DeliveryStatus `json:"status"`
	Attempts      int            `json:"attempts"`
	NextAttemptAt time.Time      `json:"next_attempt_at"`
	// ChunksSent counts chunks already accepted by the platform: after a
	// crash the reply resumes at the first unsent chunk.
	ChunksSent int          `json:"chunks_sent"`
	Refs       []MessageRef `json:"refs"`
	LastError  string       `json:"last_error,omitempty"`
	SentAt     *time.Time   `json:"sent_at,omitempty"`
}

// OutboxStore is the durable outbox the delivery pipeline drains.
type OutboxStore interface {
	// OutboxClaim leases, for Owner, up to Limit pending messages of one
	// channel that are due (NextAttemptAt ≤ Now) and are each the oldest
	// unsent message of their thread, so a thread's messages leave in
	// order. A message leased by another owner is skipped until its lease
	// ends.
	OutboxClaim(ctx context.Context, p OutboxClaimParams) ([]*Delivery, error)
	// OutboxChunkSent records that chunk (0-based) was accepted with ref.
	OutboxChunkSent(ctx context.Context, id, owner string, chunk int, ref MessageRef, now time.Time) error
	// OutboxDone marks a message sent and releases its lease.
	OutboxDone(ctx context.Context, id, owner string, now time.Time) error
	// OutboxRetry records a failed attempt: retry at RetryAt, or dead.
	OutboxRetry(ctx context.Context, p OutboxRetryParams) error
	// OutboxList lists messages by status, oldest first.
	OutboxList(ctx context.Context, p OutboxListParams) (items []*Delivery, nextCursor string, err error)
	// OutboxRequeue makes a dead message pending again (admin action).
	OutboxRequeue(ctx context.Context, id string, now time.Time) error
	// OutboxCardRef returns the reference of the card for approvalID sent
	// in thread, so a card update can edit it in place; ErrNotFound if none.
	OutboxCardRef(ctx context.Context, approvalID string, thread Thread) (*MessageRef, error)
	// LeaseAcquire takes or renews the named lease for owner until
	// Until; it reports false while another owner holds an unexpired one.
	// The pipeline uses it so one replica at a time sends for an account.
	LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	// LeaseRelease gives a lease up early (on shutdown).
	LeaseRelease(ctx context.Context, name, owner string) error
	// SendLeaseAcquire is LeaseAcquire for the lease that makes one
	// replica at a time the sender for a channel's account: it also
	// stores State on the lease, and says what the lease held before, so
	// a new holder paces from where the last one stopped (invariant 7
	// across replicas) instead of guessing.
	SendLeaseAcquire(ctx context.Context, p SendLeaseParams) (SendLease, error)
	// SendLeaseHandOver ends Owner's send lease at once, leaving State
	// for the next holder, and frees Owner's claims on Channel's pending
	// messages so the next holder sends them without waiting for the
	// claims to lapse. It changes nothing when Owner does not hold it.
	SendLeaseHandOver(ctx context.Context, p SendLeaseParams) error
}

// SendLeaseParams takes, renews or hands over a channel's send lease.
type SendLeaseParams struct {
	Name  string
	Owner string
	// Channel is the outbox channel sent under the lease.
	Channel    string
	Now, Until time.Time
	// State is what the holder tells its successor, stored as given
	// (core/delivery writes its pacing state as JSON).
	State []byte
}

// SendLease is what SendLeaseAcquire found and did.
type SendLease struct {
	Acquired bool
	// PriorOwner is who held the lease before this call ("" when nobody
	// ever did); PriorUntil when that holding ended or ends — zero when it
	// was handed over, so PriorState is complete; otherwise the holder may
	// have sent until then, and PriorState is only as fresh as its last
	// renewal.
	PriorOwner string
	PriorUntil time.Time
	PriorState []byte
}

// OutboxClaimParams bounds one outbox claim.
type OutboxClaimParams struct {
	Channel    string
	Owner      string
	Limit      int
	Now        time.Time
	LeaseUntil time.Time
}

// OutboxRetryParams records one failed delivery attempt.
type OutboxRetryParams struct {
	ID      string
	Owner   string
	Error   string
	RetryAt time.Time
	Dead    bool
	Now     time.Time
}

// OutboxListParams filters OutboxList.
type OutboxListParams struct {
	Status DeliveryStatus
	Limit  int
	Cursor string
}
