package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Run executes runs until ctx is done: it claims claimable runs up to
// Concurrency (woken by store notifications, or every PollInterval),
// renews the leases of the runs it is executing every Lease/3 and expires
// overdue approvals. When ctx ends it stops claiming and waits for the steps in
// flight, at most Lease capped at 30s (after which other replicas may take
// the runs over anyway); a tool still running then is cancelled and its step left
// dispatching for crash recovery.
func (e *Engine) Run(ctx context.Context) error {
	wake, unsubscribe := e.store.Subscribe(core.TopicRuns)
	defer unsubscribe()

	// Steps in flight outlive ctx by the drain bound, so a shutdown does
	// not cut a tool call in the middle when it could finish.
	execCtx, cancelExec := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelExec()
	hbCtx, stopHeartbeat := context.WithCancel(context.WithoutCancel(ctx))
	hbDone := make(chan struct{})
	go func() {
		defer close(hbDone)
		e.heartbeat(hbCtx)
	}()
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		e.sweep(ctx)
	}()

	finished := make(chan struct{}, 1)
	ticker := time.NewTicker(e.opts.PollInterval)
	defer ticker.Stop()
	for {
		e.claim(ctx, execCtx, finished)
		select {
		case <-ctx.Done():
		case <-wake:
			continue
		case <-ticker.C:
			continue
		case <-finished:
			continue
		}
		break
	}

	drained := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(drained)
	}()
	bound := min(e.opts.Lease, maxShutdownDrain)
	select {
	case <-drained:
	case <-time.After(bound):
		e.log.Warn("shutdown: steps still in flight after drain bound; cancelling them", "bound", bound)
		cancelExec()
		<-drained
	}
	stopHeartbeat()
	<-hbDone
	<-sweepDone
	// Agent tasks this replica served are interrupted now, not after the
	// replica lease lapses (agentcall.go).
	e.tasks.ReleaseReplica(context.WithoutCancel(ctx))
	return nil
}

// claim takes up to the free slots of work and starts a goroutine per run.
func (e *Engine) claim(ctx, execCtx context.Context, finished chan<- struct{}) {
	e.mu.Lock()
	free := e.opts.Concurrency - e.running
	e.mu.Unlock()
	if free <= 0 || ctx.Err() != nil {
		return
	}
	now := e.now()
	runs, err := e.store.RunClaim(ctx, core.RunClaimParams{
		Owner: e.opts.Owner, Limit: free, Now: now, LeaseUntil: now.Add(e.opts.Lease),
	})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("claim runs", "err", err)
		}
		return
	}
	for _, r := range runs {
		e.mu.Lock()
		if e.active[r.ID] {
			e.reclaimed[r.ID] = true
			requeued := e.released[r.ID]
			e.mu.Unlock()
			if requeued {
				// The usual case: a decision requeued the run the moment
				// its suspend committed, before that execution returned.
				e.log.Debug("run requeued while its last execution here was returning; it continues once that ends", "run", r.ID)
			} else {
				e.log.Warn("lease lapsed on a run still executing here; it stays with this execution", "run", r.ID)
			}
			continue
		}
		e.active[r.ID] = true
		e.running++
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer func() {
				e.mu.Lock()
				e.running--
				e.mu.Unlock()
				e.wg.Done()
				select {
				case finished <- struct{}{}:
				default:
				}
			}()
			for run := r; run != nil; run = e.nextExecution(execCtx, r.ID) {
				e.execute(execCtx, run)
			}
		}()
	}
	// A full batch may mean more work is waiting: come back at once.
	if len(runs) == free {
		select {
		case finished <- struct{}{}:
		default:
		}
	}
}

// nextExecution ends an execution of id: if the run was claimed again
// meanwhile and is still held by this replica, it returns the run to
// execute once more from its checkpoint; otherwise it drops id from the
// active set (atomically with the check, so no claim slips through).
func (e *Engine) nextExecution(ctx context.Context, id string) *core.Run {
	for {
		e.mu.Lock()
		delete(e.released, id)
		delete(e.abandoning, id)
		if !e.reclaimed[id] {
			delete(e.active, id)
			e.mu.Unlock()
			return nil
		}
		delete(e.reclaimed, id)
		e.mu.Unlock()
		run, err := e.store.RunGet(ctx, id)
		if err != nil {
			e.log.Error("re-check reclaimed run", "run", id, "err", err)
			select {
			case <-ctx.Done():
				e.mu.Lock()
				delete(e.active, id)
				e.mu.Unlock()
				return nil
			case <-time.After(e.opts.PollInterval):
			}
			e.mu.Lock()
			e.reclaimed[id] = true
			e.mu.Unlock()
			continue
		}
		if run.Status == core.RunRunning && run.Owner == e.opts.Owner {
			return run
		}
	}
}

// heartbeat renews, every Lease/3, the leases of the runs executing here —
// and only those: a run this replica holds in the store but no longer
// executes (it is handing it back after a store failure, or lost track of
// it) is left to lapse, so another claim takes it. After a failed renewal
// it tries again soon, so leases are renewed as soon as the store is back,
// before other replicas see them lapse.
func (e *Engine) heartbeat(ctx context.Context) {
	period := max(e.opts.Lease/3, time.Millisecond)
	retry := min(period, 4*storeRetryBase)
	t := time.NewTimer(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		next := period
		if err := e.renewLeases(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("heartbeat", "err", err)
			next = retry
		}
		t.Reset(next)
	}
}

// renewLeases extends the leases of the runs executing here.
func (e *Engine) renewLeases(ctx context.Context) error {
	ids := e.executing()
	if len(ids) == 0 {
		return nil
	}
	return e.store.RunHeartbeat(ctx, core.RunHeartbeatParams{Owner: e.opts.Owner, RunIDs: ids, LeaseUntil: e.now().Add(e.opts.Lease)})
}

// executing lists the runs whose execution here goes on: every active run
// but those being handed back.
func (e *Engine) executing() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.active))
	for id := range e.active {
		if !e.abandoning[id] {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// sweepWaiting takes one page of the runs waiting for input, from cursor,
// through the question and sub-agent sweeps, and returns the cursor of the
// next page ("" after the last). Successive ticks so walk every waiting
// run, however many wait, one page a tick — not the newest page again and
// again, behind which an older question would never expire — and both
// sweeps read the page once.
func (e *Engine) sweepWaiting(ctx context.Context, cursor string) string {
	runs, next, err := e.store.RunList(ctx, core.RunListParams{Status: core.RunWaitingInput, Limit: cmp.Or(e.opts.waitingPage, sweepBatch), Cursor: cursor})
	if err != nil {
		if ctx.Err() == nil {
			e.log.Error("list runs waiting for input", "err", err)
		}
		return ""
	}
	if err := e.sweepQuestions(ctx, runs); err != nil && ctx.Err() == nil {
		e.log.Error("agent questions", "err", err)
	}
	if err := e.sweepSubagents(ctx, runs); err != nil && ctx.Err() == nil {
		e.log.Error("sub-agents", "err", err)
	}
	return next
}

// sweep ends overdue approvals and fires the escalation steps due
// (escalate.go) every PollInterval: the one sweeper. Ending an approval
// (expiry, or its ladder's terminal default) goes through ApprovalDecide
// like any decision, so it races clicks safely: whichever commits first
// wins, and the run resumes to report the outcome.
func (e *Engine) sweep(ctx context.Context) {
	t := time.NewTicker(e.opts.PollInterval)
	defer t.Stop()
	waiting := "" // the next page of runs waiting for input
	for {
		if err := e.ExpireOverdue(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("expire approvals", "err", err)
		}
		if _, err := e.EscalateDue(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("escalate approvals", "err", err)
		}
		if err := e.tasks.Sweep(ctx); err != nil && ctx.Err() == nil {
			e.log.Error("agent calls", "err", err)
		}
		waiting = e.sweepWaiting(ctx, waiting)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ExpireOverdue ends every pending approval past its end now: it expires,
// or its escalation ladder's terminal default decides it
// (approvals.Lapse). Run calls it periodically; it is exported for admin
// tools and tests.
func (e *Engine) ExpireOverdue(ctx context.Context) error {
	for {
		now := e.now()
		ids, err := e.store.ApprovalListExpired(ctx, now, sweepBatch)
		if err != nil {
			return fmt.Errorf("engine: list expired approvals: %w", err)
		}
		for _, id := range ids {
			if err := e.expire(ctx, id, now); err != nil {
				return err
			}
		}
		if len(ids) < sweepBatch {
			return nil
		}
	}
}

// expire ends one approval if it is still pending and overdue; any other
// state makes it a no-op.
func (e *Engine) expire(ctx context.Context, id string, now time.Time) error {
	ended := false
	a, err := e.approvalDecide(ctx, approvals.ApprovalDecideParams{ID: id, Decide: func(a *approvals.Approval) approvals.Outcome {
		if a.Status != approvals.StatusPending || now.Before(a.ExpiresAt) {
			return approvals.Outcome{}
		}
		ended = true
		return approvals.Lapse(a, now)
	}})
	if err != nil && !errors.Is(err, core.ErrNotFound) {
		return fmt.Errorf("engine: expire approval %s: %w", id, err)
	}
	if err == nil && ended {
		e.lapsed(a)
	}
	return nil
}
