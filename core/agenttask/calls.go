package agenttask

import (
	"context"
	"errors"
	"fmt"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// The agent call operations: what an external agent does with the task of
// an agent_task step (docs/mcp.md). core/mcp and the Agent API call them
// through the engine; each checks that the call is the run's current one
// and that the caller holds the claim, and changes state in one
// transaction.
//
// A claimed task lives with the replica that claimed it or dispatched its
// last tool (AgentCall.ServedBy): each replica keeps a lease named
// "agent-replica:<owner>" alive while it runs. When a replica stops (it
// releases the lease on shutdown, or the lease lapses after a crash), its
// claimed tasks end interrupted (RUN_INTERRUPTED), found by any replica's
// sweep or by the next operation on the task: opsgate cannot know what the
// agent did meanwhile, and a tool in flight has an unknown outcome.
// Pending (unclaimed) tasks survive restarts untouched.

// Limits of agent calls.
const (
	// MaxAgentReceipts bounds the tool calls one agent call may make.
	MaxAgentReceipts = 256
	// MaxAssetRead bounds one read_agent_asset answer.
	MaxAssetRead = 1 << 20
	// MaxAgentResult bounds a complete_agent_call result.
	MaxAgentResult = 1 << 20
	// maxAgentMessage bounds a fail_agent_call message.
	maxAgentMessage = 4 << 10
	agentSweepBatch = 100
)

// replicaLease is the name of this replica's liveness lease.
func replicaLease(owner string) string { return "agent-replica:" + owner }

// markAlive renews this replica's lease when a third of it has passed.
func (t *Tasks) markAlive(ctx context.Context) error {
	now := t.now()
	t.mu.Lock()
	fresh := now.Add(t.o.Lease * 2 / 3).Before(t.aliveUntil)
	t.mu.Unlock()
	if fresh {
		return nil
	}
	until := now.Add(t.o.Lease)
	ok, err := t.store.LeaseAcquire(ctx, replicaLease(t.o.Owner), t.o.Owner, now, until)
	if err != nil {
		return fmt.Errorf("agenttask: replica lease: %w", err)
	}
	if !ok {
		return fmt.Errorf("agenttask: replica lease %s is held by another process with this owner id", t.o.Owner)
	}
	t.mu.Lock()
	t.aliveUntil = until
	t.mu.Unlock()
	return nil
}

// replicaAlive reports whether the replica named owner holds its lease.
func (t *Tasks) replicaAlive(ctx context.Context, owner string) (bool, error) {
	if owner == "" || owner == t.o.Owner {
		return true, nil
	}
	now := t.now()
	// Taking an already-expired lease on its name succeeds only if its
	// owner does not hold it: then the replica is gone.
	free, err := t.store.LeaseAcquire(ctx, replicaLease(owner), t.o.Owner+"/probe", now, now)
	if err != nil {
		return false, fmt.Errorf("agenttask: probe replica %s: %w", owner, err)
	}
	return !free, nil
}

// ReleaseReplica ends this replica's claimed tasks (they would end once
// its lease lapsed anyway) and gives up its lease.
func (t *Tasks) ReleaseReplica(ctx context.Context) {
	calls, _, err := t.store.AgentCallList(ctx, core.AgentCallListParams{Status: core.AgentCallClaimed, Limit: 1000})
	if err != nil {
		t.log.Error("list claimed agent calls at shutdown", "err", err)
	}
	for _, c := range calls {
		if c.ServedBy != t.o.Owner {
			continue
		}
		if err := t.interruptAgentCall(ctx, c.ID, "the opsgate process serving the agent task stopped"); err != nil {
			t.log.Error("interrupt agent call at shutdown", "call", c.ID, "err", err)
		}
	}
	if err := t.store.LeaseRelease(ctx, replicaLease(t.o.Owner), t.o.Owner); err != nil {
		t.log.Warn("release replica lease", "err", err)
	}
}

// Sweep renews this replica's lease and interrupts claimed
// calls whose serving replica is gone.
func (t *Tasks) Sweep(ctx context.Context) error {
	if err := t.markAlive(ctx); err != nil {
		return err
	}
	calls, _, err := t.store.AgentCallList(ctx, core.AgentCallListParams{Status: core.AgentCallClaimed, Limit: agentSweepBatch})
	if err != nil {
		return fmt.Errorf("agenttask: list claimed agent calls: %w", err)
	}
	for _, c := range calls {
		if _, err := t.checkServed(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// checkServed interrupts c when the replica serving it is gone; it reports
// whether it did.
func (t *Tasks) checkServed(ctx context.Context, c *core.AgentCall) (bool, error) {
	if c.Status != core.AgentCallClaimed {
		return false, nil
	}
	alive, err := t.replicaAlive(ctx, c.ServedBy)
	if err != nil || alive {
		return false, err
	}
	t.log.Warn("agent task interrupted: the replica serving it stopped", "call", c.ID, "run", c.RunID, "served_by", c.ServedBy)
	return true, t.interruptAgentCall(ctx, c.ID, "the opsgate process serving the agent task stopped")
}

// stillServed refuses an operation on c (RUN_INTERRUPTED) when the
// replica serving it is gone, interrupting it first (checkServed).
func (t *Tasks) stillServed(ctx context.Context, c *core.AgentCall) error {
	done, err := t.checkServed(ctx, c)
	if err == nil && done {
		err = agentErr(core.AgentRunInterrupted, "agent call %s was interrupted: the opsgate process serving it stopped", c.ID)
	}
	return err
}

// interruptAgentCall ends a claimed call and its run interrupted
// (RUN_INTERRUPTED): a tool in flight has an unknown outcome.
func (t *Tasks) interruptAgentCall(ctx context.Context, callID, why string) error {
	st := t.store
	call, err := st.AgentCallGet(ctx, callID)
	if err != nil {
		return fmt.Errorf("agenttask: interrupt agent call %s: %w", callID, err)
	}
	run, err := t.store.RunGet(ctx, call.RunID)
	if err != nil {
		return fmt.Errorf("agenttask: interrupt agent call %s: %w", callID, err)
	}
	withRun := true
	for attempt := 0; attempt < 2; attempt++ {
		_, err = st.AgentCallChange(ctx, core.AgentCallChangeParams{ID: callID, Change: func(c *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
			if c.Status.Final() {
				return core.AgentCallChange{}, nil
			}
			now := t.now()
			next := *c
			next.Status, next.ErrorCode, next.Error, next.UpdatedAt, next.FinishedAt = core.AgentCallInterrupted, CodeRunInterrupted, why, now, &now
			ch := core.AgentCallChange{Call: &next}
			for _, r := range rs {
				if r.Status == core.ReceiptDispatching {
					r.Status, r.Error, r.FinishedAt = core.ReceiptInterrupted, "outcome unknown: "+why, &now
					ch.Receipt = &r
				}
			}
			if withRun {
				text := fmt.Sprintf("⚠️ Run %s was interrupted: %s while an agent worked on %s — check before retrying.", run.ID, why, markdown.Escape(c.Task.Stage))
				step := &core.Step{Index: c.StepIndex, Tool: core.AgentTaskStep, Status: core.StepInterrupted,
					Args: map[string]any{"agent_call_id": c.ID, "stage": c.Task.Stage}, Error: why, FinishedAt: &now}
				ch.Checkpoint = &core.Checkpoint{
					RunID: run.ID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput},
					Status: core.RunInterrupted, Release: true, ErrorCode: CodeRunInterrupted, ErrorMessage: why, Step: step,
					Outbox: []core.OutboxMessage{t.o.Host.Reply(run, text)},
					Audit: []approvals.AuditEntry{t.audit(approvals.AuditRunInterrupted, "system", run.ID, "", core.AgentTaskStep,
						map[string]any{"call_id": c.ID, "served_by": c.ServedBy, "why": why})},
					Events: []core.RunEvent{t.event(run.ID, core.EventTurnFinished, map[string]any{"status": core.RunInterrupted, "error_code": CodeRunInterrupted})},
				}
			}
			return ch, nil
		}})
		if errors.Is(err, core.ErrConflict) && withRun {
			// The run moved on (cancelled): end the call alone.
			withRun = false
			continue
		}
		break
	}
	if err != nil {
		return fmt.Errorf("agenttask: interrupt agent call %s: %w", callID, err)
	}
	if withRun {
		t.o.Host.RunFinished(core.RunInterrupted)
	}
	return t.o.Host.ExpireRunApprovals(ctx, run.ID)
}

// CancelRun ends the open calls of a cancelled run: ownership ends
// and late results are refused. A tool already dispatching keeps running
// and records its real outcome on its receipt.
func (t *Tasks) CancelRun(ctx context.Context, runID, who string) error {
	calls, _, err := t.store.AgentCallList(ctx, core.AgentCallListParams{RunID: runID, Limit: 1000})
	if err != nil {
		return fmt.Errorf("list agent calls: %w", err)
	}
	for _, c := range calls {
		if c.Status.Final() {
			continue
		}
		_, err := t.store.AgentCallChange(ctx, core.AgentCallChangeParams{ID: c.ID, Change: func(c *core.AgentCall, _ []core.AgentReceipt) (core.AgentCallChange, error) {
			if c.Status.Final() {
				return core.AgentCallChange{}, nil
			}
			now := t.now()
			next := *c
			next.Status, next.ErrorCode, next.Error, next.UpdatedAt, next.FinishedAt = core.AgentCallCancelled, "cancelled", "run cancelled by "+who, now, &now
			return core.AgentCallChange{Call: &next}, nil
		}})
		if err != nil {
			return fmt.Errorf("cancel agent call %s: %w", c.ID, err)
		}
	}
	return nil
}

// List returns a run's agent calls, newest first (views, pending
// actions).
func (t *Tasks) List(ctx context.Context, runID string) ([]*core.AgentCall, error) {
	st := t.store
	calls, _, err := st.AgentCallList(ctx, core.AgentCallListParams{RunID: runID, Limit: 100})
	return calls, err
}

// Get returns a call and its receipts as they are now. A call
// whose serving replica is gone is interrupted first.
func (t *Tasks) Get(ctx context.Context, ref core.AgentRef) (*core.AgentCall, []core.AgentReceipt, error) {
	st := t.store
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	if done, err := t.checkServed(ctx, c); err != nil {
		return nil, nil, err
	} else if done {
		if c, err = st.AgentCallGet(ctx, c.ID); err != nil {
			return nil, nil, err
		}
	}
	rs, err := st.AgentReceiptList(ctx, c.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("agenttask: receipts of agent call %s: %w", c.ID, err)
	}
	return c, rs, nil
}

// loadCall reads the call ref names, checking it belongs to the run.
func (t *Tasks) loadCall(ctx context.Context, ref core.AgentRef) (*core.AgentCall, error) {
	st := t.store
	if ref.RunID == "" || ref.CallID == "" {
		return nil, agentErr(core.AgentBadRequest, "runId and callId are required")
	}
	c, err := st.AgentCallGet(ctx, ref.CallID)
	if errors.Is(err, core.ErrNotFound) || (err == nil && c.RunID != ref.RunID) {
		return nil, agentErr(core.AgentNotFound, "run %q has no agent call %q", ref.RunID, ref.CallID)
	}
	if err != nil {
		return nil, fmt.Errorf("agenttask: agent call %s: %w", ref.CallID, err)
	}
	return c, nil
}

// finalRefusal is the refusal of an operation on a final call.
func finalRefusal(c *core.AgentCall) *core.AgentError {
	switch c.Status {
	case core.AgentCallCancelled:
		return agentErr(core.AgentCancelled, "the run was cancelled: agent call %s no longer takes work or results", c.ID)
	case core.AgentCallInterrupted:
		return agentErr(core.AgentRunInterrupted, "agent call %s was interrupted: %s", c.ID, c.Error)
	}
	return agentErr(core.AgentNotCurrent, "agent call %s is %s; follow the run (its pendingAgentCall, if any, is the current call)", c.ID, c.Status)
}

// owned checks that actor holds the claim claimID of the open call c.
func owned(c *core.AgentCall, actor core.Actor, claimID string) *core.AgentError {
	switch {
	case c.Status.Final():
		return finalRefusal(c)
	case c.Status == core.AgentCallPending:
		return agentErr(core.AgentNotClaimed, "agent call %s is not claimed; claim it with claim_agent_call first", c.ID)
	case c.ClaimID != claimID || c.ClaimedBy != actor.ID:
		return agentErr(core.AgentNotOwner, "agent call %s is claimed by another claim", c.ID)
	}
	return nil
}

// Claim claims the call for actor under claimID, a stable id the
// claimer chooses: the same claimID (and actor) claiming again resumes the
// live claim; any other claim conflicts.
func (t *Tasks) Claim(ctx context.Context, actor core.Actor, ref core.AgentRef, claimID string) (*core.AgentCall, error) {
	st := t.store
	if claimID == "" || len(claimID) > 256 {
		return nil, agentErr(core.AgentBadRequest, "claimId is required (at most 256 bytes)")
	}
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, err
	}
	if err := t.stillServed(ctx, c); err != nil {
		return nil, err
	}
	if err := t.markAlive(ctx); err != nil {
		return nil, err
	}
	out, err := st.AgentCallChange(ctx, core.AgentCallChangeParams{ID: c.ID, Change: func(c *core.AgentCall, _ []core.AgentReceipt) (core.AgentCallChange, error) {
		switch {
		case c.Status.Final():
			return core.AgentCallChange{}, finalRefusal(c)
		case c.Status == core.AgentCallClaimed && c.ClaimID == claimID && c.ClaimedBy == actor.ID:
			if c.ServedBy == t.o.Owner {
				return core.AgentCallChange{}, nil
			}
			next := *c
			next.ServedBy, next.UpdatedAt = t.o.Owner, t.now()
			return core.AgentCallChange{Call: &next}, nil
		case c.Status == core.AgentCallClaimed:
			return core.AgentCallChange{}, agentErr(core.AgentClaimConflict, "agent call %s is claimed by %s (another claim)", c.ID, c.ClaimedBy)
		}
		now := t.now()
		next := *c
		next.Status, next.ClaimID, next.ClaimedBy, next.ClaimedAt, next.ServedBy, next.UpdatedAt =
			core.AgentCallClaimed, claimID, actor.ID, &now, t.o.Owner, now
		return core.AgentCallChange{Call: &next, Checkpoint: &core.Checkpoint{
			RunID: c.RunID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput},
			Audit: []approvals.AuditEntry{t.audit(approvals.AuditAgentCallClaimed, actor.ID, c.RunID, "", core.AgentTaskStep,
				map[string]any{"call_id": c.ID, "stage": c.Task.Stage})},
			Events: []core.RunEvent{t.event(c.RunID, EventAgentCallClaimed, map[string]any{"call_id": c.ID, "by": actor.ID})},
		}}, nil
	}})
	return out, t.mapAgentErr(err, c)
}

// mapAgentErr turns a refused run guard into the agent's refusal.
func (t *Tasks) mapAgentErr(err error, c *core.AgentCall) error {
	if err == nil {
		return nil
	}
	var ae *core.AgentError
	if errors.As(err, &ae) {
		return ae
	}
	if errors.Is(err, core.ErrConflict) {
		cur, gerr := t.store.AgentCallGet(context.Background(), c.ID)
		if gerr == nil && cur.Status.Final() {
			return finalRefusal(cur)
		}
		return agentErr(core.AgentNotCurrent, "run %s is not waiting for agent call %s", c.RunID, c.ID)
	}
	return err
}

func agentErr(code core.AgentErrorCode, format string, args ...any) *core.AgentError {
	return &core.AgentError{Code: code, Message: fmt.Sprintf(format, args...)}
}
