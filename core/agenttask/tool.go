package agenttask

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/gate"
)

// An external agent's tool calls for its task (call_agent_tool) pass the
// gate like every other call; their record is the task's receipts, kept
// under the agent's toolCallId and changed through AgentCallChange with
// the run's checkpoint in one transaction (receiptRecord).

// canonicalInput is a tool input as compact JSON with sorted keys, so
// equal inputs compare equal; it must be an object (or absent: {}).
func canonicalInput(raw json.RawMessage) (json.RawMessage, map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, nil, agentErr(core.AgentInvalidInput, "input must be a JSON object")
	}
	if dec.More() {
		return nil, nil, agentErr(core.AgentInvalidInput, "input must be one JSON object")
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, nil, agentErr(core.AgentInvalidInput, "input: %v", err)
	}
	var plain map[string]any
	if err := json.Unmarshal(b, &plain); err != nil {
		return nil, nil, agentErr(core.AgentInvalidInput, "input: %v", err)
	}
	return b, plain, nil
}

// CallTool calls one of the task's declared tools for the agent
// holding the claim, through the gate, one at a time. The receipt is kept
// under toolCallID: the same id with the same input returns it (and moves
// it on once its approval is decided); with other input it conflicts. An
// ask returns a pending_approval receipt at once — the agent polls with
// the same toolCallID; people decide, never the agent. The call runs
// detached from the agent's request: a client that gives up does not cut
// it short, and the agent reads the outcome by polling.
func (t *Tasks) CallTool(ctx context.Context, actor core.Actor, ref core.AgentRef, claimID, toolCallID, toolID string, input json.RawMessage) (*core.AgentReceipt, error) {
	st := t.store
	if toolCallID == "" || len(toolCallID) > 256 {
		return nil, agentErr(core.AgentBadRequest, "toolCallId is required (at most 256 bytes)")
	}
	canon, args, err := canonicalInput(input)
	if err != nil {
		return nil, err
	}
	c, err := t.loadCall(ctx, ref)
	if err != nil {
		return nil, err
	}
	if done, err := t.checkServed(ctx, c); err != nil {
		return nil, err
	} else if done {
		c, _ = st.AgentCallGet(ctx, c.ID)
		return nil, finalRefusal(c)
	}
	if ae := owned(c, actor, claimID); ae != nil {
		return nil, ae
	}
	rs, err := st.AgentReceiptList(ctx, c.ID)
	if err != nil {
		return nil, fmt.Errorf("agenttask: receipts of agent call %s: %w", c.ID, err)
	}
	for i := range rs {
		if rs[i].ToolCallID != toolCallID {
			continue
		}
		r := rs[i]
		if r.ToolID != toolID || !bytes.Equal(r.Input, canon) {
			return nil, agentErr(core.AgentToolConflict, "toolCallId %s was used with another tool or input; use a new toolCallId for a new call", toolCallID)
		}
		if r.Status == core.ReceiptPendingApproval {
			return t.agentToolDecided(ctx, actor, c, &r)
		}
		return &r, nil
	}
	declared := false
	for _, t := range c.Task.Tools {
		declared = declared || t.ID == toolID
	}
	if !declared {
		return nil, agentErr(core.AgentUnknownTool, "the task declares no tool %q", toolID)
	}
	run, err := t.store.RunGet(ctx, c.RunID)
	if err != nil {
		return nil, fmt.Errorf("agenttask: run of agent call %s: %w", c.ID, err)
	}
	r := &core.AgentReceipt{CallID: c.ID, ToolCallID: toolCallID, ToolID: toolID, Input: canon, Args: args,
		IdempotencyKey: c.RunID + "/" + strconv.Itoa(c.StepIndex) + "/" + toolCallID, CreatedAt: t.now()}
	rec := &receiptRecord{t: t, c: c, actor: actor, claimID: claimID, r: r}
	gc := rec.call(run.Thread, args)
	gc.Reason = core.OneLine(fmt.Sprintf("%s — asked by agent %s for the task %s of run %s", run.Reason, actor.ID, c.Task.Stage, run.ID))
	return rec.pass(ctx, gc)
}

// agentToolDecided moves a pending receipt on once its approval is
// decided: the gate judges it again and runs it, or ends it with the
// approvers' words.
func (t *Tasks) agentToolDecided(ctx context.Context, actor core.Actor, c *core.AgentCall, r *core.AgentReceipt) (*core.AgentReceipt, error) {
	rec := &receiptRecord{t: t, c: c, actor: actor, claimID: c.ClaimID, r: r}
	gc := rec.call(core.Thread{}, r.Args)
	gc.Waiting = r.ApprovalID
	return rec.pass(ctx, gc)
}

// receiptRecord is the gate.Record of one tool call of an agent task: the
// receipt, written with the run's checkpoint in one AgentCallChange.
type receiptRecord struct {
	t       *Tasks
	c       *core.AgentCall
	actor   core.Actor
	claimID string
	// r is the receipt as it stands; out the one the outcome left, for
	// the agent.
	r, out *core.AgentReceipt
}

// call is the gate.Call of the receipt: the agent is its requester.
func (rec *receiptRecord) call(thread core.Thread, args map[string]any) gate.Call {
	return gate.Call{Tool: rec.r.ToolID, RunID: rec.c.RunID, Index: rec.c.StepIndex, Key: rec.r.IdempotencyKey, Thread: thread,
		Requester: rec.actor.ID, Args: args,
		Tags: map[string]any{"call_id": rec.c.ID, "tool_call_id": rec.r.ToolCallID, "agent": rec.actor.ID}}
}

// pass takes the call through the gate detached from the agent's request
// and returns the receipt it left.
func (rec *receiptRecord) pass(ctx context.Context, gc gate.Call) (*core.AgentReceipt, error) {
	if _, err := rec.t.o.Gate.Pass(context.WithoutCancel(ctx), gc, rec); err != nil {
		return nil, err
	}
	return rec.out, nil
}

// put writes the receipt changed to status (with cp, if any) for the claim
// holder.
func (rec *receiptRecord) put(ctx context.Context, next *core.AgentReceipt, cp *core.Checkpoint) error {
	out, err := rec.t.putReceipt(ctx, rec.c, rec.actor, rec.claimID, next, cp)
	if err != nil {
		return err
	}
	rec.out = out
	return nil
}

// checkpoint is a run checkpoint carrying the gate's audit and events.
func (rec *receiptRecord) checkpoint(audit []approvals.AuditEntry, events []core.RunEvent) *core.Checkpoint {
	return &core.Checkpoint{RunID: rec.c.RunID, Now: rec.t.now(), Audit: audit, Events: events}
}

// Suspend implements gate.Record: the approval, its card and a pending
// receipt, in one change.
func (rec *receiptRecord) Suspend(ctx context.Context, s *gate.Suspension) error {
	q := s.Asks[0]
	next := *rec.r
	next.Status, next.ApprovalID, next.Args = core.ReceiptPendingApproval, q.Approval.ID, q.Args
	cp := rec.checkpoint(s.Audit, s.Events)
	cp.Approval = q.Approval
	cp.Outbox = rec.t.o.Host.ToThread(s.Card.Thread, s.Card)
	return rec.put(ctx, &next, cp)
}

// Start implements gate.Record: the receipt dispatching, on a replica that
// keeps its lease (the task is served here from now on).
func (rec *receiptRecord) Start(ctx context.Context, s *gate.Start) error {
	if err := rec.t.markAlive(ctx); err != nil {
		return err
	}
	next := *rec.r
	next.Status, next.Args = core.ReceiptDispatching, s.Args
	return rec.put(ctx, &next, rec.checkpoint(s.Audit, s.Events))
}

// Settle implements gate.Record. A refusal of a new call (invalid input,
// an unavailable tool) is the agent's error and writes nothing.
func (rec *receiptRecord) Settle(ctx context.Context, o *gate.Outcome) error {
	next := *rec.r
	at := o.At
	next.FinishedAt = &at
	if o.Args != nil {
		next.Args = o.Args
	}
	decided := rec.r.ApprovalID != ""
	switch o.Kind {
	case gate.Ran:
		return rec.ran(ctx, o)
	case gate.StartRefused:
		return o.Err
	case gate.Waiting:
		rec.out = rec.r
		return nil
	case gate.Invalid:
		return agentErr(core.AgentInvalidInput, "%v", o.Err)
	case gate.Unavailable:
		if !decided {
			return agentErr(core.AgentToolUnavail, "tool %s is unavailable: %v", rec.r.ToolID, o.Err)
		}
		next.Status, next.Error = core.ReceiptFailed, fmt.Sprintf("tool %s is unavailable: %v; it did not run", rec.r.ToolID, o.Err)
		return rec.put(ctx, &next, nil)
	case gate.Denied:
		next.Status, next.Error = core.ReceiptDenied, "denied by policy: "+o.Verdict.Why
		return rec.put(ctx, &next, rec.checkpoint(o.Audit, nil))
	case gate.Refused:
		next.Status, next.Error = core.ReceiptDenied, fmt.Sprintf("approved, but the gate refused to run it (%s): %s", o.Code, o.Problem)
		return rec.put(ctx, &next, rec.checkpoint(o.Audit, nil))
	case gate.Rejected:
		who, feedback := rejectedBy(o.Approval)
		next.Status, next.Output, next.Error = core.ReceiptRejected, feedback, "rejected by "+who
		return rec.put(ctx, &next, nil)
	case gate.Expired, gate.Released:
		next.Status, next.Error = core.ReceiptExpired, "the approval expired with no decision; the tool did not run"
		if o.Kind == gate.Released {
			next.Error = "the approval was withdrawn (" + o.Problem + "); the tool did not run"
		}
		return rec.put(ctx, &next, nil)
	}
	return fmt.Errorf("agenttask: an agent task cannot settle a %s call", o.Kind)
}

// ran records the tool's outcome whatever happened to the run meanwhile:
// a cancelled run keeps the real result of a tool that did run.
func (rec *receiptRecord) ran(ctx context.Context, o *gate.Outcome) error {
	done := *rec.r
	at := o.At
	done.Args, done.Output, done.FinishedAt, done.Status = o.Args, o.Result.Output, &at, core.ReceiptSucceeded
	if o.RunErr != nil {
		done.Status, done.Error = core.ReceiptFailed, o.RunErr.Error()
	}
	_, err := rec.t.store.AgentCallChange(ctx, core.AgentCallChangeParams{ID: rec.c.ID, Change: func(*core.AgentCall, []core.AgentReceipt) (core.AgentCallChange, error) {
		return core.AgentCallChange{Receipt: &done, Checkpoint: &core.Checkpoint{RunID: rec.c.RunID, Now: at, Events: o.Events}}, nil
	}})
	if err != nil {
		return fmt.Errorf("agenttask: record tool result of agent call %s: %w", rec.c.ID, err)
	}
	rec.out = &done
	return nil
}

// putReceipt writes a new receipt for the claim holder: refused while
// another tool call is in flight or the task holds MaxAgentReceipts.
func (t *Tasks) putReceipt(ctx context.Context, c *core.AgentCall, actor core.Actor, claimID string, r *core.AgentReceipt, cp *core.Checkpoint) (*core.AgentReceipt, error) {
	_, err := t.store.AgentCallChange(ctx, core.AgentCallChangeParams{ID: c.ID, Change: func(cur *core.AgentCall, rs []core.AgentReceipt) (core.AgentCallChange, error) {
		if ae := owned(cur, actor, claimID); ae != nil {
			return core.AgentCallChange{}, ae
		}
		replace := false
		for _, x := range rs {
			if x.ToolCallID == r.ToolCallID {
				replace = true
				continue
			}
			if x.Status.InFlight() {
				return core.AgentCallChange{}, agentErr(core.AgentToolInFlight, "tool call %s (%s) has not ended; tools run one at a time: poll it with its toolCallId", x.ToolCallID, x.ToolID)
			}
		}
		if !replace && len(rs) >= MaxAgentReceipts {
			return core.AgentCallChange{}, agentErr(core.AgentTooManyCalls, "agent call %s made %d tool calls, the most one task may", cur.ID, MaxAgentReceipts)
		}
		if !replace {
			r.Seq = len(rs) + 1
		}
		ch := core.AgentCallChange{Receipt: r, Checkpoint: cp}
		if cp != nil {
			cp.ExpectStatus = []core.RunStatus{core.RunWaitingInput}
		}
		if r.Status == core.ReceiptDispatching && cur.ServedBy != t.o.Owner {
			next := *cur
			next.ServedBy, next.UpdatedAt = t.o.Owner, t.now()
			ch.Call = &next
		}
		return ch, nil
	}})
	if err != nil {
		return nil, t.mapAgentErr(err, c)
	}
	return r, nil
}
