package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/markdown"
)

// stepRecord keeps a gated call as a step of its run: the gate's suspend
// and start become checkpoints of the run (gate.Record). The flow steps
// (flowRecord) and the LLM agent's calls (core/agentrun's record, on it
// through agentrun.StepRecord) share it and differ only in how they settle
// an outcome.
type stepRecord struct {
	x *execution
	// idx and name are the call's step index and tool; base is the step
	// as recorded before this pass (nil for a new call).
	idx  int
	name string
	base *core.Step
}

// call is the gate.Call of the step at r.idx, from its record: new (args
// given), waiting on its approval, or found dispatching.
func (r *stepRecord) call(args map[string]any, reason string) gate.Call {
	x := r.x
	c := gate.Call{Tool: r.name, RunID: x.run.ID, Index: r.idx, Key: idempotencyKey(x.run.ID, r.idx), Thread: x.run.Thread,
		Requester: x.run.Requester, Args: args, Reason: reason}
	if st := r.base; st != nil {
		switch st.Status {
		case core.StepWaitingApproval:
			c.Waiting, c.Args = st.ApprovalID, st.Args
		case core.StepDispatching:
			c.Dispatching, c.Args = &gate.Dispatching{Attempts: st.Attempts, ApprovalID: st.ApprovalID}, st.Args
		}
	}
	return c
}

// Suspend implements gate.Record: the approvals, the waiting steps, the run
// waiting and released, the card (unless the thread is an API session) and
// the audit, in one checkpoint.
func (r *stepRecord) Suspend(ctx context.Context, s *gate.Suspension) error {
	x := r.x
	c := core.Checkpoint{Status: core.RunWaitingApproval, Release: true, Outbox: x.e.toThread(x.run.Thread, s.Card),
		Audit: s.Audit, Events: s.Events}
	for i, q := range s.Asks {
		st := core.Step{Index: q.Index, Tool: q.Tool.Name, Status: core.StepWaitingApproval, Args: q.Args, ApprovalID: q.Approval.ID}
		if i == 0 {
			c.Step, c.Approval = &st, q.Approval
		} else {
			c.MoreSteps, c.MoreApprovals = append(c.MoreSteps, st), append(c.MoreApprovals, q.Approval)
		}
	}
	if err := x.checkpoint(ctx, c); err != nil {
		return err
	}
	for i := range c.MoreSteps {
		x.setStep(&c.MoreSteps[i])
	}
	return nil
}

// wait releases the run to wait for approvalID again. A decision that
// committed while this execution held the run found it running and could
// not requeue it; read back after the wait is recorded, it requeues the
// run here, so no decided approval is left with its run waiting.
func (r *stepRecord) wait(ctx context.Context, approvalID string) error {
	x := r.x
	if err := x.checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingApproval, Release: true}); err != nil {
		return err
	}
	a, err := x.e.store.ApprovalGet(ctx, approvalID)
	if err != nil || a.Status == approvals.StatusPending {
		return err
	}
	err = x.e.store.RunCheckpoint(ctx, core.Checkpoint{RunID: x.run.ID, Now: x.e.now(),
		ExpectStatus: []core.RunStatus{core.RunWaitingApproval}, Status: core.RunQueued})
	if errors.Is(err, core.ErrConflict) {
		return nil // requeued (or cancelled) already
	}
	return err
}

// dispatching is the step s records: dispatching, with its key and attempt.
func (r *stepRecord) dispatching(s *gate.Start) *core.Step {
	at := s.At
	return &core.Step{Index: r.idx, Tool: s.Tool.Name, Status: core.StepDispatching, Args: s.Args, ApprovalID: s.ApprovalID,
		IdempotencyKey: s.Key, Attempts: s.Attempt, StartedAt: &at}
}

// Start implements gate.Record: the step dispatching, in one checkpoint.
// The step's progress starts once it is recorded, so no tool.output event
// precedes its tool.started (a quick call whose start is deferred shows no
// progress: its output is in its result).
func (r *stepRecord) Start(ctx context.Context, s *gate.Start) error {
	if err := r.x.checkpoint(ctx, core.Checkpoint{Step: r.dispatching(s), Audit: s.Audit, Events: s.Events}); err != nil {
		return err
	}
	if p := r.x.prog; p != nil && p.step == r.idx {
		p.markStarted()
	}
	return nil
}

// startRefused records the step of a run cancelled under its start: cut
// during the call (a deferred start), or ended before it.
func (r *stepRecord) startRefused(ctx context.Context, o *gate.Outcome) error {
	x := r.x
	st := r.dispatching(o.Start)
	if o.Running {
		return x.settleCancelled(ctx, o.Err, cancelledStep(*st, "run cancelled during the call; the call was cut", x.e.now()), x.events...)
	}
	st.Attempts--
	st.StartedAt, st.IdempotencyKey = nil, ""
	return x.settleCancelled(ctx, o.Err, cancelledStep(*st, "run cancelled before the call", x.e.now()))
}

// finished is the step of a call that ran, not yet recorded; the gate's
// events for it wait for the checkpoint that records it.
func (r *stepRecord) finished(o *gate.Outcome) core.Step {
	done := *r.dispatching(o.Start)
	at := o.At
	done.FinishedAt, done.Output, done.Status = &at, o.Result.Output, core.StepSucceeded
	if o.RunErr != nil {
		done.Status, done.Error = core.StepFailed, o.RunErr.Error()
	}
	r.x.events = append(r.x.events, o.Events...)
	return done
}

// ended is the step of an outcome that ends the call without running it.
func (r *stepRecord) ended(o *gate.Outcome, status core.StepStatus, errText string) *core.Step {
	at := o.At
	st := &core.Step{Index: r.idx, Tool: r.name, Status: status, Args: o.Args, Error: errText, FinishedAt: &at}
	if o.Tool != nil && o.Tool.Name != "" {
		st.Tool = o.Tool.Name
	}
	if o.Approval != nil {
		st.ApprovalID = o.Approval.ID
	} else if r.base != nil {
		st.ApprovalID = r.base.ApprovalID
	}
	return st
}

// flowRecord is the gate.Record of a flow step: an outcome other than a
// successful call that has steps after it ends the run.
type flowRecord struct {
	stepRecord
	// more reports, once settled, that the run goes on with the next step.
	more bool
}

// DeferStart implements gate.DeferringRecord: a flow step's start record
// holds nothing but the start.
func (r *flowRecord) DeferStart() bool { return true }

// Settle implements gate.Record.
func (r *flowRecord) Settle(ctx context.Context, o *gate.Outcome) error {
	x := r.x
	tool := r.name
	if o.Tool != nil {
		tool = o.Tool.Name
	}
	switch o.Kind {
	case gate.Ran:
		return r.ran(ctx, o)
	case gate.StartRefused:
		return r.startRefused(ctx, o)
	case gate.Waiting:
		// Requeued without a decision on this step (should not happen for
		// a flow): wait again.
		return r.wait(ctx, o.Approval.ID)
	case gate.Denied:
		st := r.ended(o, core.StepDenied, o.Verdict.Why)
		text := fmt.Sprintf("⛔ %s was denied by policy (%s); it did not run.", tool, o.Verdict.Why)
		return x.end(ctx, st, core.RunFailed, "denied", o.Verdict.Why, text, o.Audit...)
	case gate.Invalid:
		st := r.ended(o, core.StepFailed, o.Err.Error())
		msg := fmt.Sprintf("arguments for %s are invalid: %v", tool, o.Err)
		// The message may quote the requester's value: text, never markup.
		return x.end(ctx, st, core.RunFailed, "invalid_args", msg, "❌ "+markdown.Escape(core.OneLine(msg)))
	case gate.Unavailable:
		msg := fmt.Sprintf("tool %s is unavailable: %v", tool, o.Err)
		st := r.ended(o, core.StepFailed, msg)
		x.log.Warn("tool unavailable", "tool", tool, "err", o.Err)
		return x.end(ctx, st, core.RunFailed, "tool_unavailable", msg, "❌ "+msg+"; it did not run.")
	case gate.Rejected:
		return r.rejected(ctx, o)
	case gate.Expired, gate.Released:
		st := r.ended(o, core.StepFailed, "approval expired")
		text := fmt.Sprintf("⌛ The approval for %s expired at %s with no decision; it did not run.", tool, o.Approval.ExpiresAt.UTC().Format(time.RFC3339))
		return x.end(ctx, st, core.RunFailed, "approval_expired", "approval expired", text)
	case gate.Refused:
		st := r.ended(o, core.StepFailed, o.Problem)
		text := fmt.Sprintf("⛔ %s was approved but did not run: %s.", tool, markdown.Escape(core.OneLine(o.Problem)))
		return x.end(ctx, st, core.RunFailed, o.Code, o.Problem, text, o.Audit...)
	case gate.Interrupted:
		st := r.ended(o, core.StepInterrupted, o.Problem)
		r.keepDispatch(st)
		text := fmt.Sprintf("⚠️ Run %s was interrupted while %s was running: outcome unknown — check before retrying.", x.run.ID, tool)
		return x.end(ctx, st, core.RunInterrupted, "interrupted", "outcome unknown — check before retrying", text, o.Audit...)
	}
	return fmt.Errorf("engine: a flow step cannot settle a %s call", o.Kind)
}

// keepDispatch keeps the recorded dispatch's key, attempts and start on an
// interrupted step.
func (r *stepRecord) keepDispatch(st *core.Step) {
	if b := r.base; b != nil {
		st.IdempotencyKey, st.Attempts, st.StartedAt = b.IdempotencyKey, b.Attempts, b.StartedAt
		if st.Args == nil {
			st.Args = b.Args
		}
	}
}

// rejected ends the run rejected, with the approvers' feedback.
func (r *flowRecord) rejected(ctx context.Context, o *gate.Outcome) error {
	a := o.Approval
	fb := a.RejectionReasons()
	st := r.ended(o, core.StepRejected, "")
	st.Output = fb
	text := fmt.Sprintf("❌ %s was rejected by %s", o.Tool.Name, markdown.Escape(joinOr(a.Winners(), "an approver")))
	if fb != "" {
		// People's words: one line, as text, never a link or a forged
		// line of the reply.
		text += ": “" + markdown.Escape(core.OneLine(fb)) + "”"
	}
	// The code already says rejected; the message is the approver's
	// feedback alone, so "code: message" reads once.
	msg := fb
	if msg == "" {
		msg = "rejected without feedback"
	}
	return r.x.end(ctx, st, core.RunRejected, "rejected", msg, text+".")
}

// ran records a step whose tool ran: the run goes on, or ends with the
// last step or a failure. A record refused because the run was cancelled
// meanwhile still keeps the step's real outcome (settleCancelled).
func (r *flowRecord) ran(ctx context.Context, o *gate.Outcome) error {
	x := r.x
	done := r.finished(o)
	next := r.idx + 1
	if o.RunErr != nil {
		text := fmt.Sprintf("❌ %s failed (run %s, step %d): %s", o.Tool.Name, x.run.ID, r.idx+1, markdown.Escape(core.OneLine(o.RunErr.Error())))
		if o.Result.Output != "" {
			text += "\n" + x.fold(o.Result.Output)
		}
		err := x.endAt(ctx, &done, &next, core.RunFailed, "tool_failed", o.RunErr.Error(), text)
		return x.settleCancelled(ctx, err, &done, x.events...)
	}
	if next == len(x.flow.steps) {
		return x.settleCancelled(ctx, x.succeed(ctx, &done), &done, x.events...)
	}
	if err := x.checkpoint(ctx, core.Checkpoint{Step: &done, StepIndex: &next}); err != nil {
		return x.settleCancelled(ctx, err, &done, x.events...)
	}
	x.run.StepIndex = next
	r.more = true
	return nil
}
