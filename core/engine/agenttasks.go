package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/opsgate/opsgate/core"
)

// The agent call operations of agent_task steps live in core/agenttask;
// the engine serves them to core/mcp and the Agent API under its own
// names, and is the agenttask.Host they need.

// AgentRef, AgentAsset and AgentError live in core, where core/mcp reads
// them too.
type (
	AgentRef   = core.AgentRef
	AgentAsset = core.AgentAsset
	AgentError = core.AgentError
)

// AgentCalls returns a run's agent calls, newest first (views, pending
// actions).
func (e *Engine) AgentCalls(ctx context.Context, runID string) ([]*core.AgentCall, error) {
	return e.tasks.List(ctx, runID)
}

// AgentCallGet returns a call and its receipts as they are now
// (agenttask.Tasks.Get).
func (e *Engine) AgentCallGet(ctx context.Context, ref AgentRef) (*core.AgentCall, []core.AgentReceipt, error) {
	return e.tasks.Get(ctx, ref)
}

// AgentCallClaim claims the call for actor under claimID
// (agenttask.Tasks.Claim).
func (e *Engine) AgentCallClaim(ctx context.Context, actor core.Actor, ref AgentRef, claimID string) (*core.AgentCall, error) {
	return e.tasks.Claim(ctx, actor, ref, claimID)
}

// AgentCallTool calls one of the task's declared tools through the gate
// for the claim holder (agenttask.Tasks.CallTool).
func (e *Engine) AgentCallTool(ctx context.Context, actor core.Actor, ref AgentRef, claimID, toolCallID, toolID string, input json.RawMessage) (*core.AgentReceipt, error) {
	return e.tasks.CallTool(ctx, actor, ref, claimID, toolCallID, toolID, input)
}

// AgentCallAsset reads a declared asset for the claim holder
// (agenttask.Tasks.Asset).
func (e *Engine) AgentCallAsset(ctx context.Context, actor core.Actor, ref AgentRef, claimID, assetID string, offset int64) (*AgentAsset, error) {
	return e.tasks.Asset(ctx, actor, ref, claimID, assetID, offset)
}

// AgentCallComplete ends the claimed call with the agent's result
// (agenttask.Tasks.Complete).
func (e *Engine) AgentCallComplete(ctx context.Context, actor core.Actor, ref AgentRef, claimID string, result json.RawMessage) (*core.Run, error) {
	return e.tasks.Complete(ctx, actor, ref, claimID, result)
}

// AgentCallFail ends the claimed call as failed (agenttask.Tasks.Fail).
func (e *Engine) AgentCallFail(ctx context.Context, actor core.Actor, ref AgentRef, claimID, message string) (*core.Run, error) {
	return e.tasks.Fail(ctx, actor, ref, claimID, message)
}

// taskHost is the engine as core/agenttask needs it.
type taskHost struct{ e *Engine }

func (h taskHost) Reply(run *core.Run, text string) core.OutboxMessage { return h.e.reply(run, text) }

func (h taskHost) ToThread(thread core.Thread, ms ...core.OutboxMessage) []core.OutboxMessage {
	return h.e.toThread(thread, ms...)
}

func (h taskHost) ExpireApproval(ctx context.Context, id string, now time.Time) error {
	return h.e.expire(ctx, id, now)
}

func (h taskHost) ExpireRunApprovals(ctx context.Context, runID string) error {
	return h.e.expireRunApprovals(ctx, runID)
}

func (h taskHost) RunFinished(status core.RunStatus) {
	h.e.m.runsFinished.WithLabelValues(string(status)).Inc()
}
