package gate

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/tools"
)

// dispatch calls the tool at most once: the record is written dispatching
// (with the idempotency key, attempt attempts+1) before the call and
// settled with its result after, so a crash in between is seen. a is the
// approval it runs under when decided just now; approvalID names the one
// of a call re-dispatched after a crash. audit goes with the start record.
func (g *Gate) dispatch(ctx context.Context, t *tools.Tool, c *Call, args map[string]any, a *approvals.Approval, attempts int, approvalID string, rec Record, audit ...approvals.AuditEntry) (*Outcome, error) {
	s := &Start{Tool: t, Key: c.Key, Attempt: attempts + 1, At: g.now(), Args: args, ApprovalID: approvalID, Approval: a, Audit: audit}
	s.Events = []core.RunEvent{g.event(c, core.EventToolStarted, map[string]any{
		"step": c.Index, "tool": t.Name, "args": args, "idempotency_key": c.Key, "attempt": s.Attempt})}
	receipt, err := g.receipt(ctx, a, approvalID)
	if err != nil {
		return nil, err
	}
	call := tools.Call{RunID: c.RunID, IdempotencyKey: c.Key, Args: maps.Clone(args), Output: c.Output, Receipt: receipt}
	ctx, span := startDispatch(ctx, c, t.Name, s.Attempt)
	defer span.End()
	begin := time.Now()
	var res tools.Result
	var runErr error
	deferred := false
	if g.mayDeferStart(t, a, audit, rec) {
		var err error
		deferred, res, runErr, err = g.runDeferringStart(ctx, t, call, s, rec)
		if err != nil {
			return g.settle(ctx, rec, &Outcome{Kind: StartRefused, Tool: t, Args: args, Start: s, Running: true, Err: err, At: g.now()})
		}
	} else {
		if err := rec.Start(ctx, s); err != nil {
			return g.settle(ctx, rec, &Outcome{Kind: StartRefused, Tool: t, Args: args, Start: s, Err: err, At: g.now()})
		}
		if a != nil && a.DecidedAt != nil && g.o.Observer != nil {
			g.o.Observer.DecisionDispatched(g.now().Sub(*a.DecidedAt))
		}
		res, runErr = t.Runner.Run(ctx, call)
	}
	if g.o.Observer != nil {
		g.o.Observer.ToolDispatched(t.Name, time.Since(begin))
	}
	if runErr != nil && ctx.Err() != nil {
		return nil, ErrShutdown
	}
	o := &Outcome{Kind: Ran, Tool: t, Args: args, Approval: a, Start: s, Result: res, RunErr: runErr, At: g.now()}
	if deferred {
		// The call ended before its start was due to be recorded: the start
		// goes with the result, in the settling transaction.
		o.Events = append(o.Events, s.Events...)
	}
	o.Events = append(o.Events, g.event(c, core.EventToolFinished, map[string]any{
		"step": c.Index, "tool": t.Name, "exit_code": res.ExitCode, "status": res.Status, "truncated": res.Truncated,
		"error": errString(runErr), "duration_ms": res.Duration.Milliseconds(), "ok": runErr == nil,
	}))
	return g.settle(ctx, rec, o)
}

// receipt is the signed receipt the call runs under, handed to the tool:
// a's when decided just now, the stored approval's when re-dispatched
// after a crash (approvalID), "" for a call no person decided (a rule or a
// grant allowed it). A grant's receipt is never handed on: it names the
// arguments of the call its approver saw, not these.
func (g *Gate) receipt(ctx context.Context, a *approvals.Approval, approvalID string) (string, error) {
	switch {
	case a != nil:
		return a.Receipt, nil
	case approvalID == "":
		return "", nil
	}
	stored, err := g.o.Store.ApprovalGet(ctx, approvalID)
	if err != nil {
		if ctx.Err() != nil {
			return "", ErrShutdown
		}
		return "", fmt.Errorf("gate: load approval %s for its receipt: %w", approvalID, err)
	}
	return stored.Receipt, nil
}

// recover settles a call found dispatching after a crash: its outcome is
// unknown, so only an idempotent tool is called again, with the same key.
func (g *Gate) recover(ctx context.Context, t *tools.Tool, c Call, rec Record) (*Outcome, error) {
	d := c.Dispatching
	if !t.Idempotent {
		return g.interrupt(ctx, t, c, rec)
	}
	g.log.Info("re-dispatching an idempotent call after a crash", "run", c.RunID, "step", c.Index, "key", c.Key)
	audit := g.audit(&c, approvals.AuditRunRedispatched, "system", d.ApprovalID, t.Name, map[string]any{
		"step": c.Index, "idempotency_key": c.Key, "attempts": d.Attempts})
	return g.dispatch(ctx, t, &c, c.Args, nil, d.Attempts, d.ApprovalID, rec, audit)
}

// interrupt settles a call found dispatching that is not called again.
func (g *Gate) interrupt(ctx context.Context, t *tools.Tool, c Call, rec Record) (*Outcome, error) {
	d := c.Dispatching
	return g.settle(ctx, rec, &Outcome{Kind: Interrupted, Tool: t, Args: c.Args, At: g.now(),
		Problem: "outcome unknown: the process stopped while the tool was running",
		Audit: []approvals.AuditEntry{g.audit(&c, approvals.AuditRunInterrupted, "system", d.ApprovalID, t.Name, map[string]any{
			"step": c.Index, "idempotency_key": c.Key, "attempts": d.Attempts})}})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
