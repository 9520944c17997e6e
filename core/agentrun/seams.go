package agentrun

import (
	"context"
	"log/slog"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/gate"
)

// The loop drives an agent run's execution, which the engine owns: the
// run's claim and lease, its checkpoints with their read-back, the gate
// pass with its progress, and the run's end. Execution is that execution
// as the loop sees it; Host is what else the loop needs of the engine.
// Both are declared here and implemented by core/engine, which never is
// imported from here (TestPartsNeverImportTheEngine, core/imports_test.go).

// Execution is one claimed run's execution: the loop reads the run, writes
// its checkpoints and passes its calls through the gate.
type Execution interface {
	// Run is the run as this execution holds it; a checkpoint with a step
	// updates its Steps.
	Run() *core.Run
	// Log is the execution's logger (the run and flow named).
	Log() *slog.Logger
	// Checkpoint applies c under the run's lease, with the events queued so
	// far (Queue). A refusal (ErrConflict: the run changed) stops the
	// execution.
	Checkpoint(ctx context.Context, c core.Checkpoint) error
	// Queue adds events to the next checkpoint.
	Queue(evs ...core.RunEvent)
	// End finishes the run in one checkpoint with text as its reply.
	End(ctx context.Context, st *core.Step, status core.RunStatus, code, msg, text string, audit ...approvals.AuditEntry) error
	// EndReplacing makes the reply that ends the run the last of a stream
	// (core.KindStreamEnd) replacing the streamed message id.
	EndReplacing(id string)
	// SettleCancelled records st on a run cancelled under this execution
	// when err (a refused checkpoint) says so; it returns err.
	SettleCancelled(ctx context.Context, err error, st *core.Step, evs ...core.RunEvent) error
	// StepRecord is the record of the call at step idx (base: the step as
	// recorded, nil for a new call), which the loop's record settles.
	StepRecord(idx int, tool string, base *core.Step) StepRecord
	// Pass takes c through the gate (core/gate) with the run's progress on
	// its dispatch; rec settles it.
	Pass(ctx context.Context, c gate.Call, rec gate.Record) (*gate.Outcome, error)
}

// StepRecord is a gated call kept as a step of its run: it suspends and
// starts the call as checkpoints (gate.Record's Suspend and Start); the
// loop's record settles the outcome with the helpers it offers.
type StepRecord interface {
	Suspend(ctx context.Context, s *gate.Suspension) error
	Start(ctx context.Context, s *gate.Start) error
	// Call is the gate.Call of the step: new (args given), waiting on its
	// approval, or found dispatching.
	Call(args map[string]any, reason string) gate.Call
	// Wait releases the run to wait for approvalID again.
	Wait(ctx context.Context, approvalID string) error
	// StartRefused records the step of a run cancelled under its start.
	StartRefused(ctx context.Context, o *gate.Outcome) error
	// Dispatching is the step the start s records: dispatching, with its
	// key and attempt.
	Dispatching(s *gate.Start) *core.Step
	// Finished is the step of a call that ran, not yet recorded.
	Finished(o *gate.Outcome) core.Step
	// Ended is the step of an outcome that ends the call without running it.
	Ended(o *gate.Outcome, status core.StepStatus, errText string) *core.Step
	// KeepDispatch keeps the recorded dispatch on an interrupted step.
	KeepDispatch(st *core.Step)
}

// Host is what the loop needs of the engine besides the execution.
type Host interface {
	// Event builds a run event stamped now.
	Event(runID, typ string, data any) core.RunEvent
	// Reply builds an outbox reply for run's thread.
	Reply(run *core.Run, text string) core.OutboxMessage
	// ToThread is what of ms a thread gets: none for an Agent API session,
	// a sub-agent's messages at its root thread.
	ToThread(thread core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage
	// Streams says whether threads of channel get a turn's text as it
	// streams (Engine.StreamInto).
	Streams(channel string) bool
	// Fetcher fetches the files of channel's messages, or is nil.
	Fetcher(channel string) core.AttachmentFetcher
	// Question is the message asking ask as step idx of run, answerable
	// until expires; QuestionExpired updates the question message
	// questionID to say it expired at at.
	Question(run *core.Run, ask llm.Ask, idx int, expires time.Time) core.OutboxMessage
	QuestionExpired(run *core.Run, questionID string, ask llm.Ask, at time.Time) core.OutboxMessage
	// StartSubagent records the turn of the agent name that step idx of
	// parent starts with args (ChildArgs) and returns the child's run id:
	// recorded again (after a crash), the same run is found; "" when the
	// parent was cancelled first.
	StartSubagent(ctx context.Context, parent *core.Run, parentAgent, name string, idx int, args map[string]any) (string, error)
	// WakeParent requeues the parent of child, a sub-agent run that ended.
	WakeParent(ctx context.Context, child *core.Run)
}

// Store is what the loop reads and writes itself: the session's history,
// a child run, and the streamed text's outbox messages.
type Store interface {
	core.AgentHistoryStore
	RunGet(ctx context.Context, id string) (*core.Run, error)
	RunCheckpoint(ctx context.Context, c core.Checkpoint) error
}

// Observer receives the loop's figures (the engine's metrics).
type Observer interface {
	// TurnEnded counts a turn that ended with outcome (finished,
	// model_error, required_server_down).
	TurnEnded(agent, outcome string)
	// ModelCalled times one model call and counts the tokens of one that
	// answered (usage is nil for a call that failed).
	ModelCalled(agent string, took time.Duration, usage *llm.Usage)
}
