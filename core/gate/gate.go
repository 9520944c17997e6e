// Package gate is the one path every tool call takes: a flow step, an LLM
// agent's call, an "Approve all" batch, an external agent's task call over
// MCP or the Agent API, an upstream MCP tool. Its pipeline is
//
//	judge    the live policy (deny is final; destructive tools ask by
//	         default), grants bound to their rule and their granter's live
//	         eligibility, the requester, the risk, the arguments validated
//	         against the tool's schema;
//	suspend  an ask becomes an approval with its digest, a card and the
//	         caller's waiting record, in one transaction;
//	resume   a decided approval is judged again against the live
//	         configuration: deny still final, its deciders still eligible,
//	         its arguments still valid and still the ones its digest names,
//	         expiry;
//	dispatch recorded before (dispatching, with the idempotency key) and
//	         after (the result); at most once: after a crash in between only
//	         an idempotent tool is called again, with the same key, and any
//	         other call is interrupted — its outcome unknown.
//
// A caller owns its record (a run's step, an agent task's receipt) and
// hands the gate a Record that writes the gate's suspend, start and
// outcome into it, each in one transaction of the caller's store. The gate
// never writes anything else, and nothing else calls a tool: a tool's
// Runner is read only here (TestOnlyTheGateReadsRunners).
package gate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// Bounds of the dry run shown on cards: a slow or chatty tool delays or
// fills no card.
const (
	previewTimeout  = 30 * time.Second
	previewMaxChars = 4000
	// maxGrantScan bounds how many active grants of one tool a judgement
	// reads.
	maxGrantScan = 1000
)

// ErrShutdown is returned when the caller's context ended in the middle:
// a tool call was cut, or a lookup gave up. The record stays as it was last
// written (a call possibly dispatching) and crash recovery settles it.
var ErrShutdown = errors.New("gate: shutting down")

// Store is what the gate reads: the approvals it resumes and the grants
// it judges with. Writes go through the caller's Record.
type Store interface {
	ApprovalGet(ctx context.Context, id string) (*approvals.Approval, error)
	GrantList(ctx context.Context, p approvals.GrantListParams) (items []*approvals.Grant, next string, err error)
}

// Trust is the live configuration a call is judged against; Options.Trust
// returns it as it is now, so a reload applies to the next judgement and
// to every resume.
type Trust struct {
	Policy *approvals.Policy
	// PolicyVersion is Policy.Version(), computed once per reload.
	PolicyVersion string
	Dir           *approvals.Directory
}

// Observer receives the gate's timings (the engine's metrics).
type Observer interface {
	// ToolDispatched is called after every tool call.
	ToolDispatched(tool string, took time.Duration)
	// DecisionDispatched is called when a decided call starts, with the
	// time since its decision.
	DecisionDispatched(sinceDecision time.Duration)
}

// Options configures a Gate. Store, Tools and Trust are required.
type Options struct {
	Store Store
	// Tools resolves a call's tool as it is now: the configured tools, then
	// the upstream MCP servers'. A tool kind is never special-cased.
	Tools tools.ToolLookup
	Trust func() Trust
	// ApprovalTTL is how long an approval waits (default one hour).
	ApprovalTTL time.Duration
	Now         func() time.Time
	NewID       func() string
	Logger      *slog.Logger
	Observer    Observer
	// StartRecordDue, when set (tests), replaces the startRecordDelay
	// timer of a deferred start record (startRecordDelay).
	StartRecordDue func() <-chan time.Time
}

// Gate is the pipeline. It is safe for concurrent use.
type Gate struct {
	o   Options
	log *slog.Logger
}

// New checks the options and builds a Gate.
func New(o Options) (*Gate, error) {
	if o.Store == nil || o.Tools == nil || o.Trust == nil {
		return nil, errors.New("gate: a store, a tool lookup and the trust configuration are required")
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.NewID == nil {
		return nil, errors.New("gate: an id source is required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Gate{o: o, log: o.Logger.With("component", "gate")}, nil
}

func (g *Gate) now() time.Time { return g.o.Now().UTC() }

// Call is one tool call as its caller presents it, with the state its
// record holds: new, waiting on an approval, or found dispatching.
type Call struct {
	// Tool is the tool's name; the gate looks it up as it is now.
	Tool  string
	RunID string
	// Index is the call's step index in its run (the approval's
	// StepIndex); Key its idempotency key, stable across retries and
	// replicas.
	Index int
	Key   string
	// Thread and Requester are whose call it is: the run's thread, and
	// the run's requester (or the agent that asked, for an agent task).
	Thread    core.Thread
	Requester string
	// Args are the arguments: as proposed for a new call (the gate
	// validates them), as recorded for one found dispatching.
	Args map[string]any
	// Reason is the one line shown on the card.
	Reason string
	// RequireReason refuses a call the gate would ask about that has no
	// Reason (an LLM agent's: the model must say why).
	RequireReason bool
	// NoApprover, when set, says why nobody can answer an approval now (an
	// Agent API session nobody attends): an ask is denied at once.
	NoApprover string
	// Tags are added to the data of every event and audit entry the gate
	// makes for the call (a tool_call_id, an agent call's id).
	Tags map[string]any
	// Output, when set, is handed to the tool as it is dispatched
	// (tools.Call.Output): the caller's sink for the output of long work,
	// bounded and redacted there. The gate only passes it on.
	Output tools.OutputSink

	// Waiting is the approval the record waits on, "" for none.
	Waiting string
	// Dispatching is set when the record shows the call dispatching with
	// no outcome: the process died (or lost the run) in the middle.
	Dispatching *Dispatching

	// Later are calls of the same turn after this one: when this one
	// suspends, those the gate would ask about too wait on the same card.
	Later []Call
}

// Dispatching is what a record found dispatching says of the call.
type Dispatching struct {
	Attempts   int
	ApprovalID string
}

// tag returns data with the call's tags added.
func (c *Call) tag(data map[string]any) map[string]any {
	maps.Copy(data, c.Tags)
	return data
}

// Pass takes one call through the pipeline from where its record stands,
// has rec write every step of it, and returns the outcome rec settled. A
// non-nil error means the caller stops: the store failed, rec refused a
// write (a cancelled run), or ctx ended (ErrShutdown).
func (g *Gate) Pass(ctx context.Context, c Call, rec Record) (*Outcome, error) {
	ctx, span := startPass(ctx, &c)
	o, err := g.pass(ctx, c, rec)
	endPass(span, o, err)
	return o, err
}

func (g *Gate) pass(ctx context.Context, c Call, rec Record) (*Outcome, error) {
	t, err := g.lookup(ctx, c.Tool)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ErrShutdown
		}
		if c.Dispatching != nil {
			// In flight when the tool went away: its outcome is unknown and
			// it cannot be called again.
			return g.interrupt(ctx, &tools.Tool{Name: c.Tool}, c, rec)
		}
		return g.settle(ctx, rec, &Outcome{Kind: Unavailable, Args: c.Args, Err: err,
			Problem: fmt.Sprintf("tool %s is unavailable: %v", c.Tool, err)})
	}
	switch {
	case c.Dispatching != nil:
		return g.recover(ctx, t, c, rec)
	case c.Waiting != "":
		return g.resume(ctx, t, c, rec)
	}
	return g.judge(ctx, t, c, rec)
}

// Lookup resolves a tool by name as the gate would (for a caller that
// describes tools: an agent task's tool list, an edit's schema).
func (g *Gate) Lookup(ctx context.Context, name string) (*tools.Tool, error) {
	return g.lookup(ctx, name)
}

func (g *Gate) lookup(ctx context.Context, name string) (*tools.Tool, error) {
	t, err := g.o.Tools.LookupTool(ctx, name)
	if err == nil && t == nil {
		err = fmt.Errorf("%w %q", tools.ErrUnknownTool, name)
	}
	return t, err
}

// settle has rec write o and returns it.
func (g *Gate) settle(ctx context.Context, rec Record, o *Outcome) (*Outcome, error) {
	if o.At.IsZero() {
		o.At = g.now()
	}
	if err := rec.Settle(ctx, o); err != nil {
		return o, err
	}
	if o.Kind == StartRefused {
		// A refused start always stops the caller.
		return o, o.Err
	}
	return o, nil
}

func (g *Gate) event(c *Call, typ string, data map[string]any) core.RunEvent {
	return core.NewRunEvent(c.RunID, typ, c.tag(data), g.now())
}

func (g *Gate) audit(c *Call, kind approvals.AuditKind, actor, approvalID, tool string, detail map[string]any) approvals.AuditEntry {
	return approvals.NewAuditEntry(g.now(), kind, actor, c.RunID, approvalID, tool, c.tag(detail))
}
