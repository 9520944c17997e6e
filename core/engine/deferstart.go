package engine

import (
	"context"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// startRecordDelay is how long a call of an idempotent flow step may run
// before its start is recorded.
//
// The start record (the step dispatching, with its idempotency key) exists
// so that a crash during the call is seen: a non-idempotent call is then
// reported interrupted instead of being called again. An idempotent call
// is called again after a crash whether or not its start was recorded, so
// for one that ends quickly the record is only a write: it is folded into
// the checkpoint that records the result, one statement instead of two.
// A call that runs longer gets the record after this delay, so the run's
// view and stream show it running, and a cancel or a lost lease seen by
// that write still cuts it.
const startRecordDelay = 50 * time.Millisecond

// mayDeferStart says whether the start of t's call may be recorded late:
// only for an idempotent flow step (an agent's call commits its own
// bookkeeping with the start), not for a decided call (its executed
// arguments are recorded with the start) nor one whose start is audited.
func (x *execution) mayDeferStart(t *tools.Tool, a *approvals.Approval, audit []approvals.AuditEntry) bool {
	return t.Idempotent && x.callID == "" && a == nil && len(audit) == 0
}

// runDeferringStart calls the tool at once and records started only if
// the call outlives startRecordDelay. deferred reports that the call ended
// first and started was not written (the caller commits it with the
// result). A start checkpoint that fails cuts the call and returns the
// error, as a failed start checkpoint does before a call.
func (x *execution) runDeferringStart(ctx context.Context, t *tools.Tool, call tools.Call, started core.Checkpoint) (deferred bool, res tools.Result, runErr, err error) {
	callCtx, cut := context.WithCancel(ctx)
	defer cut()
	type outcome struct {
		res tools.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := t.Runner.Run(callCtx, call)
		done <- outcome{r, err}
	}()
	due := x.e.opts.startRecordDue
	if due == nil {
		timer := time.NewTimer(startRecordDelay)
		defer timer.Stop()
		due = func() <-chan time.Time { return timer.C }
	}
	select {
	case o := <-done:
		return true, o.res, o.err, nil
	case <-due():
	}
	if err := x.checkpoint(ctx, started); err != nil {
		cut()
		<-done
		return false, tools.Result{}, nil, err
	}
	o := <-done
	return false, o.res, o.err, nil
}
