package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/router"
	"github.com/opsgate/opsgate/core/telemetry"
)

var _ core.Sink = (*Engine)(nil)

// HandleEvent records an inbound event durably and returns what became of
// it; an adapter may acknowledge the platform once it returns.
//
// A Decision event is decided with (channel, event id) as its dedup key; a
// refused decision returns the Receipt and a *core.DecisionError (the
// refusal is recorded in the audit log, so the platform may still be
// acknowledged). Any other event is routed: a matching command creates a
// queued run in the same transaction that records the event; anything else
// records the event with the flow help as the reply. A redelivered event
// returns Receipt{Duplicate: true} with the run the first delivery started.
func (e *Engine) HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	if ev.Channel == "" || ev.EventID == "" {
		return core.Receipt{}, fmt.Errorf("engine: event without channel or event id")
	}
	if err := ev.Check(); err != nil {
		var ie *core.InputError
		if (ev.Decision != nil || ev.Answer != nil) && errors.As(err, &ie) {
			// Every surface tells the decider a refusal it understands.
			return core.Receipt{}, &core.DecisionError{Code: core.DecisionBadRequest, Message: err.Error(), Field: ie.Field}
		}
		return core.Receipt{}, fmt.Errorf("engine: refused event: %w", err)
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = e.now()
	}
	ctx, span := telemetry.StartEvent(ctx, ev.Channel)
	defer span.End()
	if ev.Decision != nil {
		return e.handleDecisionEvent(ctx, ev)
	}
	if ev.Answer != nil {
		return e.handleAnswerEvent(ctx, ev)
	}
	if err := e.continueThread(ctx, &ev); err != nil {
		return core.Receipt{}, err
	}

	if why := e.trust().mayRequest(ev.Channel, ev.Actor.ID); why != "" {
		p := e.refusedRequest(ev, why)
		res, err := e.store.InboxRecord(ctx, p)
		if err != nil {
			return core.Receipt{}, fmt.Errorf("engine: record refused event %s/%s: %w", ev.Channel, ev.EventID, err)
		}
		if !res.Duplicate {
			e.log.Info("request refused: sender may not start runs here", "channel", ev.Channel, "actor", ev.Actor.ID, "why", why)
		}
		return core.Receipt{Duplicate: res.Duplicate, Refused: true}, nil
	}
	if e.loop.Any() {
		// A message in a thread whose agent waits for an answer is the
		// answer, when its sender may give it.
		if rc, ok, err := e.answerFromThread(ctx, ev); ok || err != nil {
			return rc, err
		}
	}
	p, err := e.route(ev)
	if err != nil {
		return core.Receipt{}, err
	}
	return e.record(ctx, p)
}

// route makes what an event that asks for work records: the run of the
// flow its command matches, a turn of the default agent, or the help reply.
func (e *Engine) route(ev core.ChannelEvent) (core.InboxRecordParams, error) {
	p := core.InboxRecordParams{Event: ev}
	rt, err := e.router.Route(ev.Text)
	var nm *router.NoMatchError
	switch {
	case err == nil:
		now := e.now()
		args := make(map[string]any, len(rt.Args))
		for k, v := range rt.Args {
			args[k] = v
		}
		run := &core.Run{
			ID: e.opts.NewID(), Flow: rt.Flow, Thread: ev.Thread, Requester: ev.Actor.ID,
			Status: core.RunQueued, Args: args, Reason: ev.Text, EventChannel: ev.Channel, EventID: ev.EventID,
			Attachments: ev.Attachments, CreatedAt: now, UpdatedAt: now,
		}
		p.Run = run
		p.Events = []core.RunEvent{e.event(run.ID, core.EventRunQueued, map[string]any{"flow": run.Flow, "args": maps.Clone(args)})}
	case errors.As(err, &nm) && e.loop.Default() != "":
		e.agentRun(&p, e.loop.Default())
	case errors.As(err, &nm):
		text := markdown.Escape(nm.Error()) // it quotes the sender's words: text, never markup
		if len(ev.Attachments) > 0 && strings.TrimSpace(ev.Text) == "" {
			text = filesWithoutAgent(ev.Attachments)
		}
		p.Replies = []core.OutboxMessage{{ID: e.opts.NewID(), Thread: ev.Thread, Kind: core.KindReply, Text: text, CreatedAt: e.now()}}
	default:
		return core.InboxRecordParams{}, fmt.Errorf("engine: route: %w", err)
	}
	return p, nil
}

// PrepareEvent judges and routes ev exactly as HandleEvent does — may its
// sender start runs on its channel, then a flow command, a prompt for the
// default agent or the help reply — or, when agent is set, makes it a turn
// of that agent, and returns the record without writing it (refused says
// the sender may not start runs there: the record is then the polite
// refusal, its audit entry and no run). It is for a
// caller that records the event in a transaction of its own: a schedule's
// tick, whose tick row and run commit together (core/schedule). The event
// is never taken as a decision, nor as the answer to a question waiting in
// its thread. An unknown agent is an error matching core.ErrNotFound.
func (e *Engine) PrepareEvent(ev core.ChannelEvent, agent string) (p core.InboxRecordParams, refused bool, err error) {
	if ev.Channel == "" || ev.EventID == "" || ev.Thread.IsZero() || ev.Actor.ID == "" {
		return p, false, fmt.Errorf("engine: prepare event: channel, event id, thread and actor are required")
	}
	if ev.Decision != nil || ev.Answer != nil {
		return p, false, fmt.Errorf("engine: prepare event %s: decisions and answers are never prepared", ev.EventID)
	}
	if agent != "" && !e.loop.Has(agent) {
		return p, false, fmt.Errorf("engine: prepare event %s: %w: no agent %q", ev.EventID, core.ErrNotFound, agent)
	}
	if ev.ReceivedAt.IsZero() {
		ev.ReceivedAt = e.now()
	}
	if why := e.trust().mayRequest(ev.Channel, ev.Actor.ID); why != "" {
		return e.refusedRequest(ev, why), true, nil
	}
	if agent != "" {
		p = core.InboxRecordParams{Event: ev}
		e.agentRun(&p, agent)
		return p, false, nil
	}
	p, err = e.route(ev)
	return p, false, err
}

// continueThread moves a reply to one of opsgate's messages into the
// thread that message went to, so it continues that conversation: the
// session's next turn, or the answer to its question. Only a thread of the
// event's own channel is taken; a message the store does not know (sent
// before it kept references, or not by opsgate) leaves the event where
// the adapter put it.
func (e *Engine) continueThread(ctx context.Context, ev *core.ChannelEvent) error {
	if ev.ReplyTo == nil || ev.ReplyTo.ID == "" {
		return nil
	}
	th, err := e.store.ThreadOfMessage(ctx, *ev.ReplyTo)
	switch {
	case errors.Is(err, core.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("engine: thread of the message %s/%s replies to: %w", ev.Channel, ev.EventID, err)
	case th.Channel == ev.Channel && th != ev.Thread:
		e.log.Debug("a reply continues its thread", "channel", ev.Channel, "event", ev.EventID, "thread", th.String())
		ev.Thread = th
	}
	return nil
}

// record stores an inbound event and what it starts.
func (e *Engine) record(ctx context.Context, p core.InboxRecordParams) (core.Receipt, error) {
	ev := p.Event
	if p.Run != nil {
		telemetry.RememberRun(ctx, e.store, p.Run.ID, e.log)
	}
	res, err := e.store.InboxRecord(ctx, p)
	if err != nil {
		return core.Receipt{}, fmt.Errorf("engine: record event %s/%s: %w", ev.Channel, ev.EventID, err)
	}
	if !res.Duplicate {
		e.m.eventsIngested.WithLabelValues(ev.Channel).Inc()
	}
	rc := core.Receipt{Duplicate: res.Duplicate, RunID: res.RunID}
	if !res.Duplicate && p.Run != nil {
		rc.Run = p.Run
	}
	return rc, nil
}

func (e *Engine) handleDecisionEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	key := &approvals.EventKey{
		Channel: ev.Channel, EventID: ev.EventID, Actor: ev.Actor.ID, Thread: ev.Thread.String(),
		Text: ev.Text, Raw: ev.Raw, At: ev.ReceivedAt,
	}
	a, err := e.decide(ctx, ev.Actor, ev.Channel, *ev.Decision, key)
	if errors.Is(err, approvals.ErrDuplicateEvent) {
		rc := core.Receipt{Duplicate: true}
		if cur, gerr := e.store.ApprovalGet(ctx, ev.Decision.ApprovalID); gerr == nil {
			rc.RunID, rc.ApprovalStatus = cur.RunID, string(cur.Status)
		}
		return rc, nil
	}
	var rc core.Receipt
	if a != nil {
		rc.RunID, rc.ApprovalStatus = a.RunID, string(a.Status)
	}
	if err == nil {
		e.m.eventsIngested.WithLabelValues(ev.Channel).Inc()
	}
	return rc, err
}

// event builds a run event stamped now.
func (e *Engine) event(runID, typ string, data any) core.RunEvent {
	return core.NewRunEvent(runID, typ, data, e.now())
}

// audit builds an audit entry stamped now; the store seals it into the chain.
func (e *Engine) audit(kind approvals.AuditKind, actor, runID, approvalID, tool string, detail any) approvals.AuditEntry {
	return approvals.NewAuditEntry(e.now(), kind, actor, runID, approvalID, tool, detail)
}

// reply builds an outbox reply for a run's thread.
func (e *Engine) reply(run *core.Run, text string) core.OutboxMessage {
	return core.OutboxMessage{ID: e.opts.NewID(), Thread: run.Thread, Kind: core.KindReply, Text: text, RunID: run.ID, CreatedAt: e.now()}
}
