package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/tools"
)

// The LLM agent's loop lives in core/agentrun; the engine records the
// turns (StartAgentTurn, the default agent's free text), executes them
// (a claimed agent run is driven by agentrun.Loop.Drive through the
// execution below) and is the loop's agentrun.Host.

// Agent is an LLM agent runs are given to (agentrun.Agent); AgentInfo
// describes one (Engine.Agents); FileLimits bound the attachments it reads.
type (
	Agent      = agentrun.Agent
	AgentInfo  = agentrun.AgentInfo
	FileLimits = agentrun.FileLimits
)

// Defaults of FileLimits (README: agents[].attachments).
const DefaultFileMaxBytes = agentrun.DefaultFileMaxBytes

// DefaultFileKinds are read when an agent names none.
var DefaultFileKinds = agentrun.DefaultFileKinds

// StepWaitingInput is the step of an ask_user call waiting for an answer.
const StepWaitingInput = agentrun.StepWaitingInput

// Agents lists the configured agents by name.
func (e *Engine) Agents() []AgentInfo { return e.loop.Agents() }

// Deltas subscribes to the streamed text of run's model turns on this
// replica until cancel is called. A Delta with Restart voids the text
// streamed so far (the turn is retried).
func (e *Engine) Deltas(runID string) (<-chan llm.Delta, func()) { return e.loop.Deltas(runID) }

// toThread returns ms unless thread is an API session, which gets no
// outbox messages; a sub-agent's go to its root thread (subagents.go).
func (e *Engine) toThread(thread core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage {
	if root, ok := core.SubSessionRoot(thread); ok {
		return e.toThread(root, rethread(root, ms)...)
	}
	if thread.Channel == core.AgentSessionChannel {
		return nil
	}
	return ms
}

// AgentTurn is one message to an agent: a chat message that matched no
// flow, or an Agent API turn.
type AgentTurn struct {
	// Thread is the session: a chat thread, or {AgentSessionChannel, id}.
	Thread core.Thread
	// Agent names the agent; "" is the default agent.
	Agent string
	Actor core.Actor
	Text  string
	// Channel and EventID deduplicate the turn (like HandleEvent): a
	// second StartAgentTurn with the same pair starts nothing. Default
	// Thread.Channel and a new id.
	Channel, EventID string
}

// StartAgentTurn records the turn as a queued agent run in its session;
// it runs when the session's earlier turns are done.
func (e *Engine) StartAgentTurn(ctx context.Context, t AgentTurn) (core.Receipt, error) {
	if t.Agent == "" {
		t.Agent = e.loop.Default()
	}
	if !e.loop.Has(t.Agent) {
		return core.Receipt{}, fmt.Errorf("engine: %w: no agent %q", core.ErrNotFound, t.Agent)
	}
	if t.Thread.IsZero() || t.Actor.ID == "" {
		return core.Receipt{}, errors.New("engine: agent turn without a thread or an actor")
	}
	ev := core.ChannelEvent{Channel: t.Channel, EventID: t.EventID, Actor: t.Actor, Thread: t.Thread, Text: t.Text, ReceivedAt: e.now()}
	if ev.Channel == "" {
		ev.Channel = t.Thread.Channel
	}
	if ev.EventID == "" {
		ev.EventID = "turn-" + e.opts.NewID()
	}
	p := core.InboxRecordParams{Event: ev}
	e.agentRun(&p, t.Agent)
	return e.record(ctx, p)
}

// agentRun makes p start a run of the named agent for p.Event.
func (e *Engine) agentRun(p *core.InboxRecordParams, name string) {
	ev, now := p.Event, e.now()
	run := &core.Run{
		ID: e.opts.NewID(), Flow: core.AgentFlow(name), Thread: ev.Thread, Requester: ev.Actor.ID,
		Status: core.RunQueued, Args: map[string]any{}, Reason: ev.Text, EventChannel: ev.Channel, EventID: ev.EventID,
		Attachments: ev.Attachments, CreatedAt: now, UpdatedAt: now,
	}
	p.Run = run
	// The person's message is the conversation's next entry, stored with
	// the event that brought it: its text and what came attached (as
	// references, fetched on demand: core/agentrun), each framed as external
	// content.
	parts := agentrun.RequestParts(ev.Channel, ev.Actor.ID, ev.Text, ev.Attachments)
	p.Events = []core.RunEvent{
		e.event(run.ID, core.EventRunQueued, map[string]any{"flow": run.Flow, "kind": core.RunKindAgent, "agent": name}),
		e.event(run.ID, core.EventAgentMessage, llm.UserMessage(now, parts...)),
	}
}

// StreamInto makes agent turns in threads of these channels stream their
// text into the thread: one message edited in place at most once a second
// while the model writes, then the final answer (chunked as usual, its
// first chunk in that message). cmd/opsgate names the channels whose
// adapter is a core.ReplyEditor; other threads get the final answer only.
func (e *Engine) StreamInto(channels ...string) {
	set := map[string]bool{}
	if old := e.streamTo.Load(); old != nil {
		for k := range *old {
			set[k] = true
		}
	}
	for _, c := range channels {
		set[c] = true
	}
	e.streamTo.Store(&set)
}

func (e *Engine) streams(channel string) bool {
	set := e.streamTo.Load()
	return set != nil && (*set)[channel]
}

// describeTool is the tool named name as an edit of its approval is
// validated against and its edit form shows it: a sub-agent tool of a
// configured agent (agentrun.Loop.DescribeTool), or what the gate would
// look up.
func (e *Engine) describeTool(ctx context.Context, name string) (*tools.Tool, error) {
	if t, err := e.loop.DescribeTool(name); t != nil || err != nil {
		return t, err
	}
	return e.lookupTool(ctx, name)
}

// loopHost is the engine as core/agentrun needs it.
type loopHost struct{ e *Engine }

func (h loopHost) Event(runID, typ string, data any) core.RunEvent {
	return h.e.event(runID, typ, data)
}

func (h loopHost) Reply(run *core.Run, text string) core.OutboxMessage { return h.e.reply(run, text) }

func (h loopHost) ToThread(thread core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage {
	return h.e.toThread(thread, ms...)
}

func (h loopHost) Streams(channel string) bool { return h.e.streams(channel) }

func (h loopHost) Fetcher(channel string) core.AttachmentFetcher { return h.e.fetcher(channel) }

func (h loopHost) Question(run *core.Run, ask llm.Ask, idx int, expires time.Time) core.OutboxMessage {
	return h.e.reply(run, questionText(ask, run, idx, h.e.opts.PublicURL, expires))
}

func (h loopHost) QuestionExpired(run *core.Run, questionID string, ask llm.Ask, at time.Time) core.OutboxMessage {
	return h.e.questionUpdate(run, questionID, expiredText(agentAsker, ask, at))
}

func (h loopHost) StartSubagent(ctx context.Context, parent *core.Run, parentAgent, name string, idx int, args map[string]any) (string, error) {
	return h.e.recordSubagent(ctx, parent, parentAgent, name, idx, args)
}

func (h loopHost) WakeParent(ctx context.Context, child *core.Run) { h.e.wakeParent(ctx, child) }

// agentExecution is a claimed run's execution as the loop drives it
// (agentrun.Execution).
type agentExecution struct{ x *execution }

func (a agentExecution) Run() *core.Run    { return a.x.run }
func (a agentExecution) Log() *slog.Logger { return a.x.log }

func (a agentExecution) Checkpoint(ctx context.Context, c core.Checkpoint) error {
	return a.x.checkpoint(ctx, c)
}

func (a agentExecution) Queue(evs ...core.RunEvent) { a.x.events = append(a.x.events, evs...) }

func (a agentExecution) End(ctx context.Context, st *core.Step, status core.RunStatus, code, msg, text string, audit ...approvals.AuditEntry) error {
	return a.x.end(ctx, st, status, code, msg, text, audit...)
}

func (a agentExecution) EndReplacing(id string) {
	a.x.replyKind, a.x.replyReplaces = core.KindStreamEnd, id
}

func (a agentExecution) SettleCancelled(ctx context.Context, err error, st *core.Step, evs ...core.RunEvent) error {
	return a.x.settleCancelled(ctx, err, st, evs...)
}

func (a agentExecution) StepRecord(idx int, tool string, base *core.Step) agentrun.StepRecord {
	return loopStep{&stepRecord{x: a.x, idx: idx, name: tool, base: base}}
}

func (a agentExecution) Pass(ctx context.Context, c gate.Call, rec gate.Record) (*gate.Outcome, error) {
	return a.x.pass(ctx, c, rec)
}

// loopStep is a stepRecord as the loop settles it (agentrun.StepRecord).
type loopStep struct{ r *stepRecord }

func (s loopStep) Suspend(ctx context.Context, su *gate.Suspension) error {
	return s.r.Suspend(ctx, su)
}
func (s loopStep) Start(ctx context.Context, st *gate.Start) error   { return s.r.Start(ctx, st) }
func (s loopStep) Call(args map[string]any, reason string) gate.Call { return s.r.call(args, reason) }
func (s loopStep) Wait(ctx context.Context, approvalID string) error {
	return s.r.wait(ctx, approvalID)
}

func (s loopStep) StartRefused(ctx context.Context, o *gate.Outcome) error {
	return s.r.startRefused(ctx, o)
}

func (s loopStep) Dispatching(st *gate.Start) *core.Step { return s.r.dispatching(st) }

func (s loopStep) Finished(o *gate.Outcome) core.Step { return s.r.finished(o) }

func (s loopStep) Ended(o *gate.Outcome, status core.StepStatus, errText string) *core.Step {
	return s.r.ended(o, status, errText)
}

func (s loopStep) KeepDispatch(st *core.Step) { s.r.keepDispatch(st) }

// TurnEnded implements agentrun.Observer.
func (m *metrics) TurnEnded(agent, outcome string) {
	m.agentTurns.WithLabelValues(agent, outcome).Inc()
}

// ModelCalled implements agentrun.Observer.
func (m *metrics) ModelCalled(agent string, took time.Duration, usage *llm.Usage) {
	m.agentModelCall.WithLabelValues(agent).Observe(took.Seconds())
	if usage == nil {
		return
	}
	m.agentTokens.WithLabelValues(agent, "input").Add(float64(usage.InputTokens))
	m.agentTokens.WithLabelValues(agent, "output").Add(float64(usage.OutputTokens))
}
