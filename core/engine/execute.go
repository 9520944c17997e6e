package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"text/template"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/tools"
)

// errShutdown stops a run when the shutdown bound cancels its tool call,
// or ends a checkpoint still waiting for the store: the run stays as the
// store last recorded it (a step possibly dispatching) and crash recovery
// settles it once the lease lapses.
var errShutdown = errors.New("engine: shutting down")

// execution is one claimed run, driven from its checkpoint until it
// suspends, finishes, or loses its lease.
type execution struct {
	e    *Engine
	run  *core.Run
	flow *compiledFlow
	log  *slog.Logger
	// events wait for the next checkpoint, so a turn costs no extra
	// transaction just to say it started.
	events []core.RunEvent
	// callID, while an agent's call dispatches, is the model's id of it,
	// added to the tool events.
	callID string
	// replyKind, when set, is the kind of the reply that ends the run
	// (core.KindStreamEnd after an agent streamed into the thread).
	replyKind core.MessageKind
}

// execute runs one claimed run. ErrConflict from a checkpoint means the run
// changed under us (cancelled, or the lease went to another replica): we
// stop without touching it.
func (e *Engine) execute(ctx context.Context, run *core.Run) {
	x := &execution{e: e, run: run, flow: e.flows[run.Flow], log: e.log.With("run", run.ID, "flow", run.Flow)}
	started := map[string]any{"step_index": run.StepIndex}
	if name, ok := core.AgentOf(run.Flow); ok {
		started["agent"] = name
		if ag := e.assistants[name]; ag != nil {
			started["model"] = ag.ModelName
		}
	}
	x.events = append(x.events, e.event(run.ID, core.EventTurnStarted, started))
	err := x.drive(ctx)
	switch {
	case err == nil:
	case errors.Is(err, core.ErrConflict):
		x.log.Info("run changed concurrently; stopping", "err", err)
	case errors.Is(err, errShutdown):
		x.log.Info("run left for recovery after shutdown")
	default:
		x.log.Error("run failed on the store; releasing it for a retry", "err", err)
		x.abandon(ctx)
	}
}

func (x *execution) drive(ctx context.Context) error {
	if name, ok := core.AgentOf(x.run.Flow); ok {
		return x.driveAgent(ctx, name)
	}
	if x.flow == nil {
		msg := fmt.Sprintf("flow %q is not configured", x.run.Flow)
		return x.end(ctx, nil, core.RunFailed, "unknown_flow", msg, "❌ Run "+x.run.ID+" failed: "+msg+".")
	}
	for x.run.StepIndex < len(x.flow.steps) {
		more, err := x.step(ctx)
		if err != nil || !more {
			return err
		}
	}
	// Reached only when a previous holder recorded the last step but not the
	// run's end, which the store makes atomic; settle it anyway.
	return x.succeed(ctx, nil)
}

// step advances the run by one step boundary; more reports whether the run
// continues with the next step in this turn.
func (x *execution) step(ctx context.Context) (more bool, err error) {
	idx := x.run.StepIndex
	st := x.stepAt(idx)
	if st != nil && st.Status == core.StepSucceeded {
		x.run.StepIndex++
		return true, nil
	}
	if cs := x.flow.steps[idx]; cs.agent != nil {
		return x.agentStep(ctx, cs, st)
	}
	cs, err := x.bind(ctx, x.flow.steps[idx], st)
	if err != nil || cs.tool == nil {
		return false, err
	}
	if st != nil {
		switch st.Status {
		case core.StepWaitingApproval:
			return x.resume(ctx, cs, st)
		case core.StepDispatching:
			return x.recover(ctx, cs, st)
		}
	}
	args, err := renderArgs(cs.args, x.run.Args)
	if err == nil {
		args, err = applySchema(cs.tool, args)
	}
	if err != nil {
		st := &core.Step{Index: idx, Tool: cs.tool.Name, Status: core.StepFailed, Args: args, Error: err.Error()}
		msg := fmt.Sprintf("arguments for %s are invalid: %v", cs.tool.Name, err)
		// The message may quote the requester's value: text, never markup.
		return false, x.end(ctx, st, core.RunFailed, "invalid_args", msg, "❌ "+markdown.Escape(core.OneLine(msg)))
	}
	tr := x.e.trust()
	v := tr.policy.Evaluate(toolInfo(cs.tool), args)
	switch v.Effect {
	case approvals.EffectDeny:
		return false, x.deny(ctx, cs.tool, idx, args, v, "")
	case approvals.EffectAsk:
		g, err := x.e.grantFor(ctx, tr, approvals.Call{Tool: cs.tool.Name, Risk: cs.tool.Risk, Thread: x.run.Thread.String(),
			Requester: x.run.Requester, Args: args, Verdict: v})
		if err != nil {
			return false, fmt.Errorf("find grant: %w", err)
		}
		if g == nil {
			return false, x.suspend(ctx, tr, cs.tool, idx, args, v)
		}
		x.log.Info("grant turns ask into allow", "tool", cs.tool.Name, "grant", g.ID, "scope", g.Scope)
		audit := x.e.audit(approvals.AuditGrantApplied, g.Actor, x.run.ID, g.ApprovalID, cs.tool.Name, map[string]any{
			"step": idx, "args": args, "grant": g.ID, "scope": g.Scope, "requester": x.run.Requester})
		return x.dispatch(ctx, cs.tool, &core.Step{Index: idx, Args: args}, nil, audit)
	}
	return x.dispatch(ctx, cs.tool, &core.Step{Index: idx, Args: args}, nil)
}

// bind resolves the step's tool as it is now: a tool from Options.Lookup
// (an upstream MCP server's) may have changed or gone since the flow was
// built, or since the ask. One that cannot be had ends the run, and the
// returned step has no tool: failed, or interrupted when a call of it was
// in flight, since then its outcome is unknown.
func (x *execution) bind(ctx context.Context, cs compiledStep, st *core.Step) (compiledStep, error) {
	if cs.tool != nil {
		return cs, nil
	}
	t, err := x.e.lookupTool(ctx, cs.name)
	if err == nil {
		cs.tool = t
		return cs, nil
	}
	if ctx.Err() != nil {
		return cs, errShutdown
	}
	x.log.Warn("tool unavailable", "tool", cs.name, "err", err)
	if st != nil && st.Status == core.StepDispatching {
		_, err := x.recover(ctx, compiledStep{name: cs.name, tool: &tools.Tool{Name: cs.name}}, st)
		return cs, err
	}
	msg := fmt.Sprintf("tool %s is unavailable: %v", cs.name, err)
	failed := &core.Step{Index: x.run.StepIndex, Tool: cs.name, Status: core.StepFailed, Error: msg}
	if st != nil {
		failed.Args, failed.ApprovalID = st.Args, st.ApprovalID
	}
	return cs, x.end(ctx, failed, core.RunFailed, "tool_unavailable", msg, "❌ "+msg+"; it did not run.")
}

func toolInfo(t *tools.Tool) approvals.ToolInfo {
	return approvals.ToolInfo{Name: t.Name, Risk: t.Risk, Destructive: t.Destructive}
}

// deny ends the run: the tool never runs and the thread is told which rule
// refused it.
func (x *execution) deny(ctx context.Context, t *tools.Tool, idx int, args map[string]any, v approvals.Verdict, approvalID string) error {
	st := &core.Step{Index: idx, Tool: t.Name, Status: core.StepDenied, Args: args, Error: v.Why, ApprovalID: approvalID}
	audit := x.e.audit(approvals.AuditPolicyDenied, "system", x.run.ID, approvalID, t.Name, map[string]any{"rule": v.Rule, "why": v.Why, "args": args})
	text := fmt.Sprintf("⛔ %s was denied by policy (%s); it did not run.", t.Name, v.Why)
	return x.end(ctx, st, core.RunFailed, "denied", v.Why, text, audit)
}

// suspend records the ask in ONE checkpoint: the approval, the step and
// run waiting for it, the card in the outbox, the audit entry.
func (x *execution) suspend(ctx context.Context, tr *trustState, t *tools.Tool, idx int, args map[string]any, v approvals.Verdict) error {
	return x.suspendCall(ctx, tr, t, idx, args, v, x.run.Reason, nil)
}

// ask is one gated call to suspend: a flow step, or one call of an agent's
// turn (with the model's reason and extra permission.requested fields).
type ask struct {
	tool   *tools.Tool
	idx    int
	args   map[string]any
	v      approvals.Verdict
	reason string
	extra  map[string]any
}

// suspendCall is suspend with the reason shown on the card (a flow's
// request text, or the model's one-line reason for an agent's call) and
// extra fields for the permission.requested event.
func (x *execution) suspendCall(ctx context.Context, tr *trustState, t *tools.Tool, idx int, args map[string]any, v approvals.Verdict, reason string, extra map[string]any) error {
	return x.suspendAsks(ctx, tr, []ask{{tool: t, idx: idx, args: args, v: v, reason: reason, extra: extra}})
}

// suspendAsks suspends the run on one or more asks in ONE checkpoint: an
// approval and a waiting step each, one card (for the first: a card of
// several calls lists its siblings, see Engine.Batch), the audit entries.
// The approvals share their creation time, which is what makes them one
// batch.
func (x *execution) suspendAsks(ctx context.Context, tr *trustState, asks []ask) error {
	e := x.e
	now := e.now()
	c := core.Checkpoint{Status: core.RunWaitingApproval, Release: true}
	for i, q := range asks {
		preview := x.preview(ctx, q.tool, q.idx, q.args)
		a := &approvals.Approval{
			ID: e.opts.NewID(), RunID: x.run.ID, StepIndex: q.idx, Thread: x.run.Thread.String(), Requester: x.run.Requester,
			Tool: q.tool.Name, Destructive: q.tool.Destructive, Risk: q.tool.Risk, ProposedArgs: q.args, Preview: preview,
			Reason: q.reason, Status: approvals.StatusPending, Approvers: q.v.Approvers,
			Eligible: tr.dir.Expand(q.v.Approvers), Quorum: max(q.v.Quorum, 1), Rule: q.v.Rule,
			CreatedAt: now, ExpiresAt: now.Add(e.opts.ApprovalTTL),
		}
		st := core.Step{Index: q.idx, Tool: q.tool.Name, Status: core.StepWaitingApproval, Args: q.args, ApprovalID: a.ID}
		data := map[string]any{
			"approval_id": a.ID, "tool": q.tool.Name, "args": q.args, "risk": q.tool.Risk, "approvers": q.v.Approvers, "expires_at": a.ExpiresAt,
		}
		maps.Copy(data, q.extra)
		if i == 0 {
			c.Step, c.Approval = &st, a
			c.Outbox = x.e.toThread(x.run.Thread, core.OutboxMessage{ID: e.opts.NewID(), Thread: x.run.Thread, Kind: core.KindCard, ApprovalID: a.ID, RunID: x.run.ID, CreatedAt: now})
		} else {
			c.MoreSteps, c.MoreApprovals = append(c.MoreSteps, st), append(c.MoreApprovals, a)
		}
		c.Audit = append(c.Audit, e.audit(approvals.AuditApprovalRequested, x.run.Requester, x.run.ID, a.ID, q.tool.Name, map[string]any{
			"args": q.args, "rule": q.v.Rule, "why": q.v.Why, "approvers": q.v.Approvers, "quorum": a.Quorum, "expires_at": a.ExpiresAt,
		}))
		c.Events = append(c.Events, e.event(x.run.ID, core.EventPermissionRequested, data))
	}
	if err := x.checkpoint(ctx, c); err != nil {
		return err
	}
	for i := range c.MoreSteps {
		x.setStep(&c.MoreSteps[i])
	}
	return nil
}

// preview runs the tool's dry run, bounded in time and size. A failure is
// shown on the card rather than blocking the ask.
func (x *execution) preview(ctx context.Context, t *tools.Tool, idx int, args map[string]any) string {
	pctx, cancel := context.WithTimeout(ctx, previewTimeout)
	defer cancel()
	out, err := t.Runner.Preview(pctx, tools.Call{RunID: x.run.ID, IdempotencyKey: idempotencyKey(x.run.ID, idx) + "/preview", Args: maps.Clone(args)})
	if err != nil {
		out = "dry run failed: " + err.Error()
	}
	return truncate(out, previewMaxChars)
}

// resume continues a run whose approval was decided (or expired).
func (x *execution) resume(ctx context.Context, cs compiledStep, st *core.Step) (bool, error) {
	e := x.e
	a, err := e.store.ApprovalGet(ctx, st.ApprovalID)
	if err != nil {
		return false, fmt.Errorf("load approval %s: %w", st.ApprovalID, err)
	}
	// permission.decided was appended by the deciding transaction.
	switch a.Status {
	case approvals.StatusPending:
		// Requeued without a decision (should not happen): wait again.
		return false, x.checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingApproval, Release: true})
	case approvals.StatusApproved, approvals.StatusEdited:
		args := a.ApprovedArgs
		if args == nil {
			args = a.ProposedArgs
		}
		// Deny is final: a rule added since the ask still stops the call.
		if v := e.trust().policy.Evaluate(toolInfo(cs.tool), args); v.Effect == approvals.EffectDeny {
			return false, x.deny(ctx, cs.tool, st.Index, args, v, a.ID)
		}
		next := *st
		next.Args = args
		return x.dispatch(ctx, cs.tool, &next, a)
	case approvals.StatusRejected:
		fb := feedback(a)
		next := *st
		next.Status, next.Output = core.StepRejected, fb
		text := fmt.Sprintf("❌ %s was rejected by %s", cs.tool.Name, markdown.Escape(joinOr(a.Winners(), "an approver")))
		if fb != "" {
			// People's words: one line, as text, never a link or a
			// forged line of the reply.
			text += ": “" + markdown.Escape(core.OneLine(fb)) + "”"
		}
		// The code already says rejected; the message is the approver's
		// feedback alone, so "code: message" reads once.
		msg := fb
		if msg == "" {
			msg = "rejected without feedback"
		}
		return false, x.end(ctx, &next, core.RunRejected, "rejected", msg, text+".")
	case approvals.StatusExpired:
		next := *st
		next.Status, next.Error = core.StepFailed, "approval expired"
		text := fmt.Sprintf("⌛ The approval for %s expired at %s with no decision; it did not run.", cs.tool.Name, a.ExpiresAt.UTC().Format(time.RFC3339))
		return false, x.end(ctx, &next, core.RunFailed, "approval_expired", "approval expired", text)
	}
	return false, fmt.Errorf("approval %s has unknown status %q", a.ID, a.Status)
}

// recover settles a step found dispatching after a crash: its outcome is
// unknown, so only an idempotent tool is called again (same key).
func (x *execution) recover(ctx context.Context, cs compiledStep, st *core.Step) (bool, error) {
	if cs.tool.Idempotent {
		x.log.Info("re-dispatching idempotent step after crash", "step", st.Index, "key", st.IdempotencyKey)
		next := *st
		return x.dispatch(ctx, cs.tool, &next, nil,
			x.e.audit(approvals.AuditRunRedispatched, "system", x.run.ID, st.ApprovalID, cs.tool.Name, map[string]any{"step": st.Index, "idempotency_key": st.IdempotencyKey, "attempts": st.Attempts}))
	}
	next := *st
	next.Status, next.Error = core.StepInterrupted, "outcome unknown: the process stopped while the tool was running"
	now := x.e.now()
	next.FinishedAt = &now
	text := fmt.Sprintf("⚠️ Run %s was interrupted while %s was running: outcome unknown — check before retrying.", x.run.ID, cs.tool.Name)
	audit := x.e.audit(approvals.AuditRunInterrupted, "system", x.run.ID, st.ApprovalID, cs.tool.Name, map[string]any{"step": st.Index, "idempotency_key": st.IdempotencyKey, "attempts": st.Attempts})
	return false, x.end(ctx, &next, core.RunInterrupted, "interrupted", "outcome unknown — check before retrying", text, audit)
}

// dispatch calls the tool, recorded before (dispatching, with its
// idempotency key) and after (the result), so a crash in between is seen;
// a quick idempotent call has both in one record (deferstart.go).
func (x *execution) dispatch(ctx context.Context, t *tools.Tool, st *core.Step, a *approvals.Approval, audit ...approvals.AuditEntry) (bool, error) {
	done, res, runErr, _, err := x.call(ctx, t, st, a, audit...)
	if err != nil {
		return false, err
	}
	next := st.Index + 1
	if runErr != nil {
		done.Status, done.Error = core.StepFailed, runErr.Error()
		text := fmt.Sprintf("❌ %s failed (run %s, step %d): %s", t.Name, x.run.ID, st.Index+1, markdown.Escape(core.OneLine(runErr.Error())))
		if res.Output != "" {
			text += "\n" + x.fold(res.Output)
		}
		err := x.endAt(ctx, &done, &next, core.RunFailed, "tool_failed", runErr.Error(), text)
		return false, x.settleCancelled(ctx, err, &done, x.events...)
	}
	done.Status = core.StepSucceeded
	if next == len(x.flow.steps) {
		return false, x.settleCancelled(ctx, x.succeed(ctx, &done), &done, x.events...)
	}
	if err := x.checkpoint(ctx, core.Checkpoint{Step: &done, StepIndex: &next}); err != nil {
		return false, x.settleCancelled(ctx, err, &done, x.events...)
	}
	x.run.StepIndex = next
	return true, nil
}

// call is the shared dispatch of flow steps and agent tool calls: it
// records st dispatching (with its idempotency key), calls the tool and
// returns the finished step (not yet recorded), the result and the
// tool.finished event (queued in x.events). A non-nil err means the
// execution stops: the run was cancelled before the call (recorded), or
// a shutdown cut the call.
func (x *execution) call(ctx context.Context, t *tools.Tool, st *core.Step, a *approvals.Approval, audit ...approvals.AuditEntry) (done core.Step, res tools.Result, runErr error, finished core.RunEvent, err error) {
	e := x.e
	now := e.now()
	st.Tool, st.Status = t.Name, core.StepDispatching
	st.IdempotencyKey = idempotencyKey(x.run.ID, st.Index)
	st.Attempts++
	st.StartedAt, st.FinishedAt, st.Output, st.Error = &now, nil, "", ""
	if a != nil {
		st.ApprovalID = a.ID
	}
	started := core.Checkpoint{
		Step:  st,
		Audit: audit,
		Events: []core.RunEvent{e.event(x.run.ID, core.EventToolStarted, x.withCallID(map[string]any{
			"step": st.Index, "tool": t.Name, "args": st.Args, "idempotency_key": st.IdempotencyKey, "attempt": st.Attempts,
		}))},
	}
	call := tools.Call{RunID: x.run.ID, IdempotencyKey: st.IdempotencyKey, Args: maps.Clone(st.Args)}
	start := time.Now()
	var deferred bool
	mayDefer := x.mayDeferStart(t, a, audit)
	if mayDefer {
		deferred, res, runErr, err = x.runDeferringStart(ctx, t, call, started)
	} else if err = x.checkpoint(ctx, started); err == nil {
		if a != nil && a.DecidedAt != nil {
			e.m.decisionDispatch.Observe(e.now().Sub(*a.DecidedAt).Seconds())
		}
		res, runErr = t.Runner.Run(ctx, call)
	}
	if err != nil && mayDefer {
		// The start record of a call already running was refused (the
		// run was cancelled): the call was cut.
		return done, res, nil, core.RunEvent{}, x.settleCancelled(ctx, err, cancelledStep(*st, "run cancelled during the call; the call was cut", e.now()), x.events...)
	}
	if err != nil {
		// Cancelled before the call: the step ends with the run and the
		// tool is never called.
		now := e.now()
		pending := *st
		pending.Attempts--
		pending.StartedAt, pending.IdempotencyKey = nil, ""
		return done, res, nil, core.RunEvent{}, x.settleCancelled(ctx, err, cancelledStep(pending, "run cancelled before the call", now))
	}
	e.m.toolDispatch.WithLabelValues(t.Name).Observe(time.Since(start).Seconds())
	if runErr != nil && ctx.Err() != nil {
		return done, res, nil, core.RunEvent{}, errShutdown
	}
	if deferred {
		// The call ended before its start was due to be recorded: the
		// start goes with the result, in the next checkpoint.
		x.events = append(x.events, started.Events...)
	}
	done = *st
	fin := e.now()
	done.FinishedAt, done.Output = &fin, res.Output
	finished = e.event(x.run.ID, core.EventToolFinished, x.withCallID(map[string]any{
		"step": st.Index, "tool": t.Name, "exit_code": res.ExitCode, "status": res.Status, "truncated": res.Truncated,
		"error": errString(runErr), "duration_ms": res.Duration.Milliseconds(), "ok": runErr == nil,
	}))
	x.events = append(x.events, finished)
	return done, res, runErr, finished, nil
}

// withCallID adds the agent call's id to a tool event's data.
func (x *execution) withCallID(data map[string]any) map[string]any {
	if x.callID != "" {
		data["tool_call_id"] = x.callID
	}
	return data
}

// settleCancelled records st on a run cancelled under us, when err (a
// refused checkpoint) says the run changed: the step's real state (its
// outcome, or cancelled before the call) replaces the dispatching or
// waiting one, and the run stays cancelled. A run that changed otherwise
// (its lease went to another replica) is left alone. err is returned
// unchanged, so the execution still stops.
func (x *execution) settleCancelled(ctx context.Context, err error, st *core.Step, events ...core.RunEvent) error {
	if err == nil {
		return nil
	}
	if !errors.Is(err, core.ErrConflict) {
		if st.Status == core.StepSucceeded || st.Status == core.StepFailed {
			// Only a shutdown or a store that keeps refusing the write gets
			// here: say what happened, since the record cannot.
			x.log.Error("the tool finished but its result is not recorded; recovery will find the step dispatching",
				"step", st.Index, "tool", st.Tool, "status", st.Status, "err", err)
		}
		return err
	}
	if st.FinishedAt == nil {
		now := x.e.now()
		st.FinishedAt = &now
	}
	serr := x.e.store.RunCheckpoint(ctx, core.Checkpoint{
		RunID: x.run.ID, Now: x.e.now(), ExpectStatus: []core.RunStatus{core.RunCancelled}, Step: st, Events: events,
	})
	switch {
	case serr == nil:
		x.log.Info("run was cancelled; recorded its step", "step", st.Index, "status", st.Status)
	case !errors.Is(serr, core.ErrConflict):
		x.log.Warn("record the step of a cancelled run", "step", st.Index, "err", serr)
	}
	return err
}

// succeed ends the run with the reply carrying the tools' output.
func (x *execution) succeed(ctx context.Context, last *core.Step) error {
	if last != nil {
		x.setStep(last)
	}
	text := fmt.Sprintf("✅ %s succeeded (run %s).", x.run.Flow, x.run.ID)
	var outs []core.Step
	for _, s := range x.run.Steps {
		if s.Status == core.StepSucceeded && s.Output != "" {
			outs = append(outs, s)
		}
	}
	for _, s := range outs {
		if len(outs) > 1 {
			text += fmt.Sprintf("\n%s:", s.Tool)
		}
		text += "\n" + x.fold(s.Output)
	}
	next := len(x.flow.steps)
	return x.endAt(ctx, last, &next, core.RunSucceeded, "", "", text)
}

// end finishes the run in one checkpoint without advancing the step index.
func (x *execution) end(ctx context.Context, st *core.Step, status core.RunStatus, code, msg, text string, audit ...approvals.AuditEntry) error {
	return x.endAt(ctx, st, nil, status, code, msg, text, audit...)
}

// endAt finishes the run in one checkpoint: final status, lease released,
// the reply queued, message.committed and turn.finished appended.
func (x *execution) endAt(ctx context.Context, st *core.Step, stepIndex *int, status core.RunStatus, code, msg, text string, audit ...approvals.AuditEntry) error {
	e := x.e
	if st != nil && st.FinishedAt == nil {
		now := e.now()
		st.FinishedAt = &now
	}
	r := e.reply(x.run, text)
	if x.replyKind != "" {
		r.Kind = x.replyKind
	}
	err := x.checkpoint(ctx, core.Checkpoint{
		Status: status, Release: true, StepIndex: stepIndex, ErrorCode: code, ErrorMessage: msg,
		Step: st, Outbox: e.toThread(x.run.Thread, r), Audit: audit,
		Events: []core.RunEvent{
			e.event(x.run.ID, core.EventMessageCommitted, map[string]any{"message_id": r.ID, "text": text}),
			e.event(x.run.ID, core.EventTurnFinished, map[string]any{"status": status, "error_code": code, "error": msg, "text": text}),
		},
	})
	if err == nil {
		e.m.runsFinished.WithLabelValues(string(status)).Inc()
	}
	return err
}

// checkpoint applies c under this replica's lease, with the events queued
// so far, and mirrors the step into the in-memory run. A store failure is
// not taken as the answer: see commit.
func (x *execution) checkpoint(ctx context.Context, c core.Checkpoint) error {
	c.RunID, c.Owner, c.Now = x.run.ID, x.e.opts.Owner, x.e.now()
	c.Events = append(x.events, c.Events...)
	if c.Release {
		// Marked before the commit: a decision may requeue the run, and
		// the claim loop take it, before the commit's answer is back here.
		x.e.setReleased(x.run.ID, true)
	}
	if err := x.commit(ctx, c); err != nil {
		if c.Release && !errors.Is(err, core.ErrConflict) {
			x.e.setReleased(x.run.ID, false)
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	x.events = nil
	if c.Step != nil {
		x.setStep(c.Step)
	}
	return nil
}

// setReleased records whether the execution of id has handed the run back.
func (e *Engine) setReleased(id string, released bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if released {
		e.released[id] = true
	} else {
		delete(e.released, id)
	}
}

// commit applies c until the store gives an answer. A checkpoint that
// fails with anything but the guard's ErrConflict may or may not have
// committed (a connection lost after COMMIT was sent looks the same as one
// lost before), so the run is read back, under the same owner guard the
// checkpoint carries: the checkpoint's step (or status) is there — it
// committed; the run is no longer ours — ErrConflict; the run is ours and
// unchanged — c is tried again. While the store is unreachable this goes
// on, with capped backoff, for as long as ctx lives (the lease stays ours:
// the heartbeat renews the runs executing here, and the owner guard makes
// every retry exact even if it lapsed meanwhile). A store that answers the
// read but keeps refusing the write fails the checkpoint after
// storeRefusals attempts. When ctx ends first it returns errShutdown.
func (x *execution) commit(ctx context.Context, c core.Checkpoint) error {
	delay, refusals := storeRetryBase, 0
	for {
		err := x.e.store.RunCheckpoint(ctx, c)
		if err == nil || errors.Is(err, core.ErrConflict) || errors.Is(err, core.ErrNotFound) {
			return err
		}
		x.log.Warn("checkpoint failed; reading the run back to learn whether it committed", "err", err)
		run, rerr := x.readBack(ctx, &delay)
		if rerr != nil {
			return fmt.Errorf("%w (last store error: %v)", rerr, err)
		}
		switch checkpointState(run, c) {
		case checkpointApplied:
			x.log.Info("checkpoint had committed; its answer was lost", "step", stepIndex(c.Step), "status", c.Status)
			return nil
		case checkpointLost:
			return fmt.Errorf("run is %s, held by %q, after a failed checkpoint (%v): %w", run.Status, run.Owner, err, core.ErrConflict)
		}
		// The store answered the read: the run is ours and the checkpoint
		// did not land. Try it again (after the read's own backoff).
		if refusals++; refusals >= storeRefusals {
			return fmt.Errorf("store refused the checkpoint %d times: %w", refusals, err)
		}
	}
}

// readBack reads the run until the store answers or ctx ends, sleeping
// *delay (doubled, capped at storeRetryMax) before each attempt.
func (x *execution) readBack(ctx context.Context, delay *time.Duration) (*core.Run, error) {
	for {
		if err := sleepCtx(ctx, *delay); err != nil {
			return nil, errShutdown
		}
		*delay = min(*delay*2, storeRetryMax)
		run, err := x.e.store.RunGet(ctx, x.run.ID)
		if err == nil {
			return run, nil
		}
		if errors.Is(err, core.ErrNotFound) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, errShutdown
		}
		x.log.Warn("read the run back after a failed checkpoint", "err", err, "retry_in", *delay)
	}
}

// checkpointOutcome is what a run read back says of a checkpoint whose
// commit went unanswered.
type checkpointOutcome int

const (
	checkpointNotApplied checkpointOutcome = iota // ours, unchanged: try again
	checkpointApplied                             // it committed
	checkpointLost                                // the run is no longer ours
)

// checkpointState decides whether c committed, from run as read back. A
// checkpoint that writes a step is recognised by that step exactly: status,
// attempt, approval and timestamps are written by no other checkpoint. One
// that only moves the run is recognised by the status it sets (the run was
// running, ours, when c was made). A checkpoint that keeps the run (no
// Release) counts as applied only while the run is still ours: one that
// committed and then lost its run to a cancel or to another replica is
// lost — a dispatch record found that way must not be acted on, since the
// new holder may already be settling it.
func checkpointState(run *core.Run, c core.Checkpoint) checkpointOutcome {
	ours := run.Owner == c.Owner && run.Status == core.RunRunning
	landed := false
	if c.Step != nil {
		for i := range run.Steps {
			if run.Steps[i].Index == c.Step.Index && sameStep(&run.Steps[i], c.Step) {
				landed = true
			}
		}
	} else {
		landed = c.Status != "" && run.Status == c.Status
	}
	switch {
	case landed && (c.Release || ours):
		return checkpointApplied
	case !ours:
		return checkpointLost
	}
	return checkpointNotApplied
}

// sameStep compares what a checkpoint wrote with what was read back, at the
// store's precision (microseconds).
func sameStep(got, want *core.Step) bool {
	return got.Status == want.Status && got.Attempts == want.Attempts && got.ApprovalID == want.ApprovalID &&
		got.IdempotencyKey == want.IdempotencyKey && sameMicros(got.StartedAt, want.StartedAt) && sameMicros(got.FinishedAt, want.FinishedAt)
}

func sameMicros(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.UnixMicro() == b.UnixMicro()
}

func stepIndex(st *core.Step) int {
	if st == nil {
		return -1
	}
	return st.Index
}

// abandon hands the run back to the queue after a store failure the
// execution cannot get past (a read it needs, a write refused), so it is
// retried from its checkpoint — here or on another replica — rather than
// held by a live lease with nothing executing it. From now on the heartbeat
// leaves the run's lease alone; the hand-back itself is tried until the
// store answers (or the run turns out to be no longer ours), or ctx ends —
// after which the lease lapses and any replica claims the run.
func (x *execution) abandon(ctx context.Context) {
	x.e.mu.Lock()
	x.e.abandoning[x.run.ID] = true
	x.e.released[x.run.ID] = true
	x.e.mu.Unlock()
	delay := storeRetryBase
	for ctx.Err() == nil {
		err := x.e.store.RunCheckpoint(ctx, core.Checkpoint{RunID: x.run.ID, Owner: x.e.opts.Owner, Now: x.e.now(), Status: core.RunQueued, Release: true})
		if err == nil || errors.Is(err, core.ErrConflict) || errors.Is(err, core.ErrNotFound) {
			return
		}
		x.log.Warn("hand the run back after a store failure", "err", err, "retry_in", delay)
		if sleepCtx(ctx, delay) != nil {
			return
		}
		delay = min(delay*2, storeRetryMax)
	}
}

// sleepCtx waits d, or less when ctx ends first (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (x *execution) stepAt(idx int) *core.Step {
	for i := range x.run.Steps {
		if x.run.Steps[i].Index == idx {
			return &x.run.Steps[i]
		}
	}
	return nil
}

func (x *execution) setStep(st *core.Step) {
	if cur := x.stepAt(st.Index); cur != nil {
		*cur = *st
		return
	}
	x.run.Steps = append(x.run.Steps, *st)
}

// idempotencyKey is stable for a step across retries and replicas, so a
// tool that honours it never acts twice.
func idempotencyKey(runID string, idx int) string { return runID + "/" + strconv.Itoa(idx) }

// renderArgs executes a step's argument templates over the run's args.
func renderArgs(tmpl map[string]any, data map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(tmpl))
	for k, v := range tmpl {
		r, err := renderValue(v, data)
		if err != nil {
			return nil, err
		}
		out[k] = r
	}
	return out, nil
}

func renderValue(v any, data map[string]any) (any, error) {
	switch x := v.(type) {
	case *template.Template:
		var b bytes.Buffer
		if err := x.Execute(&b, data); err != nil {
			return nil, fmt.Errorf("argument %s: %w", x.Name(), err)
		}
		return b.String(), nil
	case map[string]any:
		return renderArgs(x, data)
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			r, err := renderValue(vv, data)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
