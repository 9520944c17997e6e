package gate

import (
	"context"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/tools"
)

// startRecordDelay is how long a quick idempotent call may run before its
// start is recorded.
//
// The start record (the call dispatching, with its idempotency key) exists
// so that a crash during the call is seen: a non-idempotent call is then
// reported interrupted instead of being called again. An idempotent call
// is called again after a crash whether or not its start was recorded, so
// for one that ends quickly the record is only a write: it is folded into
// the transaction that records the result, one statement instead of two.
// A call that runs longer gets the record after this delay, so the run's
// view and stream show it running, and a cancel or a lost lease seen by
// that write still cuts it.
const startRecordDelay = 50 * time.Millisecond

// mayDeferStart says whether the start of t's call may be recorded late:
// only for an idempotent call whose record allows it (DeferringRecord),
// not for a decided call (its executed arguments are recorded with the
// start) nor one whose start is audited.
func (g *Gate) mayDeferStart(t *tools.Tool, a *approvals.Approval, audit []approvals.AuditEntry, rec Record) bool {
	d, ok := rec.(DeferringRecord)
	return ok && d.DeferStart() && t.Idempotent && a == nil && len(audit) == 0
}

// runDeferringStart calls the tool at once and writes the start only if
// the call outlives startRecordDelay. deferred reports that the call ended
// first and the start was not written (it is settled with the result). A
// start the record refuses cuts the call and returns the error, as a
// refused start does before a call.
func (g *Gate) runDeferringStart(ctx context.Context, t *tools.Tool, call tools.Call, s *Start, rec Record) (deferred bool, res tools.Result, runErr, err error) {
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
	due := g.o.StartRecordDue
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
	s.Late = true
	if err := rec.Start(ctx, s); err != nil {
		cut()
		<-done
		return false, tools.Result{}, nil, err
	}
	o := <-done
	return false, o.res, o.err, nil
}
