// Package agenttask serves the calls of agent_task flow steps: what an
// external agent (an MCP client, an Agent API caller) does with the task a
// run waits on — claim it, read its assets, call its declared tools, and
// complete or fail it (docs/mcp.md). Every tool call passes core/gate like
// any other; this package only maps the gate's outcome onto the task's
// receipts. The engine that runs the flow suspends the run at the step and
// settles it when the call ends; what this package needs of it is the Host
// interface below.
package agenttask

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/gate"
)

// The run events of agent calls (besides tool.started and tool.finished,
// which an agent's tool calls append with their call_id).
const (
	EventAgentCallRequested = "agent_call.requested"
	EventAgentCallClaimed   = "agent_call.claimed"
	EventAgentCallFinished  = "agent_call.finished"
)

// CodeRunInterrupted is the error code of a run (and an agent call) whose
// agent task was active when the replica serving it stopped.
const CodeRunInterrupted = "RUN_INTERRUPTED"

// Store is what agent tasks read and write: the agent calls with their
// receipts, the runs they belong to and the replicas' liveness leases.
// core.Store is one.
type Store interface {
	core.AgentCallStore
	RunGet(ctx context.Context, id string) (*core.Run, error)
	LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	LeaseRelease(ctx context.Context, name, owner string) error
}

// Host is what agent tasks need of the engine that runs their flows.
type Host interface {
	// Reply is an outbox reply in run's thread.
	Reply(run *core.Run, text string) core.OutboxMessage
	// ToThread returns ms unless thread takes no outbox messages.
	ToThread(thread core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage
	// ExpireApproval ends approval id if it is pending and due at now.
	ExpireApproval(ctx context.Context, id string, now time.Time) error
	// ExpireRunApprovals ends the pending approvals of a run whose task
	// ended: nobody is left to use them.
	ExpireRunApprovals(ctx context.Context, runID string) error
	// RunFinished counts a run the task ended with status.
	RunFinished(status core.RunStatus)
}

// Options configures Tasks; every field is required.
type Options struct {
	Store Store
	// Gate is the one path of every tool call.
	Gate *gate.Gate
	Host Host
	// Owner is this replica's id; Lease how long its liveness lease lasts.
	Owner string
	Lease time.Duration
	// ApprovalTTL is how long an approval waits before it expires.
	ApprovalTTL time.Duration
	// MaxReceipts bounds the tool calls one agent call may make; 0 means
	// MaxAgentReceipts.
	MaxReceipts int
	Now         func() time.Time
	Logger      *slog.Logger
}

// Tasks serves the agent calls of one replica.
type Tasks struct {
	o     Options
	store Store
	log   *slog.Logger
	mu    sync.Mutex
	// aliveUntil is how long the replica lease was last renewed for.
	aliveUntil time.Time
}

// New builds Tasks over o.
func New(o Options) (*Tasks, error) {
	if o.Store == nil || o.Gate == nil || o.Host == nil || o.Now == nil || o.Logger == nil || o.Owner == "" {
		return nil, errors.New("agenttask: store, gate, host, owner, clock and logger are required")
	}
	if o.MaxReceipts <= 0 {
		o.MaxReceipts = MaxAgentReceipts
	}
	return &Tasks{o: o, store: o.Store, log: o.Logger}, nil
}

func (t *Tasks) now() time.Time { return t.o.Now().UTC() }

// event builds a run event stamped now.
func (t *Tasks) event(runID, typ string, data any) core.RunEvent {
	return core.NewRunEvent(runID, typ, data, t.now())
}

// audit builds an audit entry stamped now; the store seals it into the chain.
func (t *Tasks) audit(kind approvals.AuditKind, actor, runID, approvalID, tool string, detail any) approvals.AuditEntry {
	return approvals.NewAuditEntry(t.now(), kind, actor, runID, approvalID, tool, detail)
}

// rejectedBy names the people whose rejection ended a, and their reasons:
// the text handed back to the agent.
func rejectedBy(a *approvals.Approval) (who, feedback string) {
	who = strings.Join(a.Winners(), ", ")
	if who == "" {
		who = "an approver"
	}
	return who, a.RejectionReasons()
}
