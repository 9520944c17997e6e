package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"text/template"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/gate"
	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/telemetry"
)

// errShutdown stops a run when the shutdown bound cancels its tool call,
// or ends a checkpoint still waiting for the store: the run stays as the
// store last recorded it (a step possibly dispatching) and crash recovery
// settles it once the lease lapses.
var errShutdown = gate.ErrShutdown

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
	// replyKind, when set, is the kind of the reply that ends the run
	// (core.KindStreamEnd after an agent streamed into the thread).
	replyKind core.MessageKind
	// replyReplaces, when set, is the outbox message that reply edits (the
	// streamed message a KindStreamEnd answer replaces).
	replyReplaces string
	// prog follows the call passing the gate now (progress.go); doneLines
	// are the result lines of the run's long steps this execution showed.
	prog      *progress
	doneLines []string
}

// execute runs one claimed run. ErrConflict from a checkpoint means the run
// changed under us (cancelled, or the lease went to another replica): we
// stop without touching it.
func (e *Engine) execute(ctx context.Context, run *core.Run) {
	x := &execution{e: e, run: run, flow: e.flows[run.Flow], log: e.log.With("run", run.ID, "flow", run.Flow)}
	started := map[string]any{"step_index": run.StepIndex}
	if name, ok := agentrun.RunAgent(run); ok {
		started["agent"] = name
		if e.loop.Has(name) {
			started["model"] = e.loop.ModelName(name)
		}
	}
	x.events = append(x.events, e.event(run.ID, core.EventTurnStarted, started))
	ctx, span := telemetry.StartRun(ctx, e.store, run.ID, run.Flow, x.log)
	err := x.drive(ctx)
	telemetry.End(span, err)
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
	if name, ok := agentrun.RunAgent(x.run); ok {
		return x.e.loop.Drive(ctx, agentExecution{x}, name)
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
// continues with the next step in this turn. A tool step passes the gate
// (core/gate) from where its record stands: new, waiting on its approval,
// or found dispatching after a crash.
func (x *execution) step(ctx context.Context) (more bool, err error) {
	idx := x.run.StepIndex
	st := x.stepAt(idx)
	if st != nil && st.Status == core.StepSucceeded {
		x.run.StepIndex++
		return true, nil
	}
	cs := x.flow.steps[idx]
	if cs.agent != nil {
		return x.agentStep(ctx, cs, st)
	}
	rec := &flowRecord{stepRecord: stepRecord{x: x, idx: idx, name: cs.name, base: st}}
	c := rec.call(nil, x.run.Reason)
	if c.Waiting == "" && c.Dispatching == nil {
		args, err := renderArgs(cs.args, x.run.Args)
		if err != nil {
			failed := &core.Step{Index: idx, Tool: cs.name, Status: core.StepFailed, Error: err.Error()}
			msg := fmt.Sprintf("arguments for %s are invalid: %v", cs.name, err)
			// The message may quote the requester's value: text, never markup.
			return false, x.end(ctx, failed, core.RunFailed, "invalid_args", msg, "❌ "+markdown.Escape(core.OneLine(msg)))
		}
		c.Args = args
	}
	if _, err := x.pass(ctx, c, rec); err != nil {
		return false, err
	}
	return rec.more, nil
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
		r.Kind, r.Replaces = x.replyKind, x.replyReplaces
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
		e.wakeParent(ctx, x.run)
	}
	return err
}

// checkpoint applies c under this replica's lease, with the events queued
// so far, and mirrors the step into the in-memory run. A store failure is
// not taken as the answer: see commit.
func (x *execution) checkpoint(ctx context.Context, c core.Checkpoint) error {
	c.RunID, c.Owner, c.Now = x.run.ID, x.e.opts.Owner, x.e.now()
	var progressEvents []core.RunEvent
	if p := x.prog; p != nil && c.Step != nil && c.Step.Index == p.step && stepEnded(c.Step.Status) {
		// The step's end: its progress ends in the same checkpoint, the
		// last output first and the status before the run's reply.
		var status []core.OutboxMessage
		progressEvents, status = p.settle(c.Step)
		c.Outbox = append(x.e.toThread(x.run.Thread, status...), c.Outbox...)
	}
	c.Events = x.e.withMirrors(x.run, append(append(progressEvents, x.events...), c.Events...))
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
// storeRefusals attempts — unless it says it cannot take writes now
// (core.ErrStoreUnavailable: a full disk, a read-only file): that is an
// outage too, and a finished tool's result is kept here until the store
// takes it, since ending the run interrupted would call a known outcome
// unknown. When ctx ends first it returns errShutdown.
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
		if errors.Is(err, core.ErrStoreUnavailable) {
			continue
		}
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
