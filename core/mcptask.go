package core

import (
	"context"
	"encoding/json"
	"time"
)

// MCPTask is a durable handle of the MCP Tasks extension
// (io.modelcontextprotocol/tasks, docs/mcp.md): a tools/call answered with
// a task instead of its result. It is stored before the handle is
// returned, and its state is read live from the run (and agent call) it
// names on every tasks/get, so it survives restarts and any replica
// answers for it.
type MCPTask struct {
	// ID is the taskId: 128 random bits (the spec lets it act as a bearer
	// token; it is also bound to Actor).
	ID string
	// Actor is the token's identity that created it: only it reads it.
	Actor    string
	Endpoint string
	// Tool is the MCP tool the task answers: flow or call_agent_tool.
	Tool  string
	RunID string
	// CallID, ClaimID, ToolCallID, ToolID and Input re-poll an agent
	// task's tool call (call_agent_tool with the same toolCallId).
	CallID, ClaimID, ToolCallID, ToolID string
	Input                               json.RawMessage
	// TraceParent is the W3C traceparent the request carried in _meta.
	TraceParent string
	CreatedAt   time.Time
	// ExpiresAt is when the handle may be forgotten (createdAt + ttlMs).
	ExpiresAt time.Time
}

// MCPTaskStore keeps MCP task handles (store/sqlstore implements it).
type MCPTaskStore interface {
	// MCPTaskCreate stores t (ErrConflict when its id is taken).
	MCPTaskCreate(ctx context.Context, t *MCPTask) error
	// MCPTaskGet returns task id (ErrNotFound when unknown).
	MCPTaskGet(ctx context.Context, id string) (*MCPTask, error)
}

// RunTraceStore keeps the trace context a run was started under (a W3C
// traceparent), so a later span of the run continues the caller's trace.
type RunTraceStore interface {
	// RunTraceSet records traceparent for runID; the first one stays.
	RunTraceSet(ctx context.Context, runID, traceparent string) error
	// RunTraceGet returns it ("" when none).
	RunTraceGet(ctx context.Context, runID string) (string, error)
}
