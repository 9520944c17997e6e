package core

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// An agent call is the pending work of a flow step `agent_task`: the run
// stops at the step and waits for an external agent (an MCP client) to
// claim the task, call the task's declared tools through the policy gate,
// and complete it with a result that matches the task's output schema.
// The step's output is that result; the run then continues.

// AgentCallStatus is an agent call's state.
type AgentCallStatus string

// The agent call statuses. pending waits for a claim (the run is
// waiting_input); claimed is worked on by the agent that claimed it (the
// run is running, leased by the replica that served the agent last);
// the others are final.
const (
	AgentCallPending     AgentCallStatus = "pending"
	AgentCallClaimed     AgentCallStatus = "claimed"
	AgentCallCompleted   AgentCallStatus = "completed"
	AgentCallFailed      AgentCallStatus = "failed"
	AgentCallCancelled   AgentCallStatus = "cancelled"
	AgentCallInterrupted AgentCallStatus = "interrupted"
)

// Final reports whether the call can no longer change.
func (s AgentCallStatus) Final() bool {
	switch s {
	case AgentCallCompleted, AgentCallFailed, AgentCallCancelled, AgentCallInterrupted:
		return true
	}
	return false
}

// StepWaitingAgent is the status of an agent_task step whose agent call is
// not finished yet.
const StepWaitingAgent StepStatus = "waiting_agent"

// AgentTaskStep is the Tool field of an agent_task step.
const AgentTaskStep = "agent_task"

// AgentCall is one agent_task step's call, as stored.
type AgentCall struct {
	ID        string          `json:"id"`
	RunID     string          `json:"run_id"`
	StepIndex int             `json:"step_index"`
	Status    AgentCallStatus `json:"status"`
	Task      AgentTask       `json:"task"`
	// ClaimID is the claimer's stable id for its claim, ClaimedBy its
	// actor. Both stay once set: a final call says who worked on it.
	ClaimID   string     `json:"claim_id,omitempty"`
	ClaimedBy string     `json:"claimed_by,omitempty"`
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	// ServedBy is the replica (engine owner) that claimed the call or
	// dispatched its last tool: the task lives with it, and ends
	// interrupted when that replica stops.
	ServedBy string `json:"-"`
	// Result is the raw final JSON the agent completed the call with.
	Result     json.RawMessage `json:"result,omitempty"`
	ErrorCode  string          `json:"error_code,omitempty"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// AgentTask is what the agent is asked to do, rendered from the step's
// configuration when the run reaches it.
type AgentTask struct {
	// Stage is the step's name (its `name`, or "agent_task").
	Stage        string           `json:"stage"`
	Instructions string           `json:"instructions"`
	Skills       []string         `json:"skills"`
	Tools        []AgentTaskTool  `json:"tools"`
	Assets       []AgentTaskAsset `json:"assets"`
	// OutputSchema is the JSON Schema the result must match.
	OutputSchema json.RawMessage `json:"output_schema"`
}

// AgentTaskTool is one tool the task declares: the agent may call only
// these, each through the policy gate.
type AgentTaskTool struct {
	// ID is the tool's name in opsgate (tools[].name, or server.tool).
	ID          string          `json:"id"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	Risk        string          `json:"risk,omitempty"`
}

// AgentTaskAsset is one asset the task declares. The agent reads it by ID
// only; Path never leaves the server.
type AgentTaskAsset struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	MediaType   string `json:"media_type"`
	// Text is an inline asset, rendered when the run reached the step.
	Text string `json:"text,omitempty"`
	// Path is a file on the server, read when the agent asks.
	Path string `json:"path,omitempty"`
}

// AgentReceiptStatus is the state of one tool call an agent made for a
// task.
type AgentReceiptStatus string

// The receipt statuses: dispatching (recorded before the tool is called)
// and pending_approval are in flight; the others are final.
const (
	ReceiptDispatching     AgentReceiptStatus = "dispatching"
	ReceiptPendingApproval AgentReceiptStatus = "pending_approval"
	ReceiptSucceeded       AgentReceiptStatus = "succeeded"
	ReceiptFailed          AgentReceiptStatus = "failed"
	ReceiptDenied          AgentReceiptStatus = "denied"
	ReceiptRejected        AgentReceiptStatus = "rejected"
	ReceiptExpired         AgentReceiptStatus = "expired"
	ReceiptInterrupted     AgentReceiptStatus = "interrupted"
	ReceiptInvalid         AgentReceiptStatus = "invalid"
)

// InFlight reports whether the tool call has not ended yet.
func (s AgentReceiptStatus) InFlight() bool {
	return s == ReceiptDispatching || s == ReceiptPendingApproval
}

// AgentReceipt is the kept record of one tool call of an agent call, keyed
// by the agent's toolCallId: a retry with the same id and input gets it
// back instead of a second dispatch.
type AgentReceipt struct {
	CallID     string             `json:"call_id"`
	ToolCallID string             `json:"tool_call_id"`
	ToolID     string             `json:"tool_id"`
	Seq        int                `json:"seq"`
	Input      json.RawMessage    `json:"input"`
	Args       map[string]any     `json:"args,omitempty"`
	Status     AgentReceiptStatus `json:"status"`
	Output     string             `json:"output,omitempty"`
	Error      string             `json:"error,omitempty"`
	ApprovalID string             `json:"approval_id,omitempty"`
	// IdempotencyKey is <run>/<step>/<toolCallId>, handed to the tool.
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
}

// AgentCallStore persists agent calls and their receipts. store/sqlite and
// store/postgres implement it; every method that changes state does so in
// ONE transaction.
type AgentCallStore interface {
	// AgentCallCreate inserts call and applies c (the run's suspend) in
	// one transaction; a refused guard writes nothing (ErrConflict).
	AgentCallCreate(ctx context.Context, call *AgentCall, c Checkpoint) error
	// AgentCallGet returns a call, or ErrNotFound.
	AgentCallGet(ctx context.Context, id string) (*AgentCall, error)
	// AgentCallForStep returns the newest call of a run's step, or
	// ErrNotFound.
	AgentCallForStep(ctx context.Context, runID string, step int) (*AgentCall, error)
	// AgentCallList lists calls newest first.
	AgentCallList(ctx context.Context, p AgentCallListParams) (items []*AgentCall, next string, err error)
	// AgentReceiptList returns a call's receipts in the order they were
	// made.
	AgentReceiptList(ctx context.Context, callID string) ([]AgentReceipt, error)
	// AgentCallChange locks the call, hands it and its receipts to Change
	// and writes what Change returns, all in one transaction. An error
	// from Change is returned as is and writes nothing; so does a refused
	// checkpoint guard (ErrConflict).
	AgentCallChange(ctx context.Context, p AgentCallChangeParams) (*AgentCall, error)
}

// AgentCallListParams filters AgentCallList. Cursor is opaque.
type AgentCallListParams struct {
	RunID     string
	Status    AgentCallStatus
	ClaimedBy string
	Limit     int
	Cursor    string
}

// AgentCallChangeParams is one guarded change of an agent call.
type AgentCallChangeParams struct {
	ID     string
	Change func(call *AgentCall, receipts []AgentReceipt) (AgentCallChange, error)
}

// AgentCallChange is what AgentCallChangeParams.Change decided to write.
type AgentCallChange struct {
	// Call, when set, replaces the call's stored state.
	Call *AgentCall
	// Receipt, when set, is inserted or replaces the receipt of the same
	// tool call id.
	Receipt *AgentReceipt
	// Checkpoint, when set, is applied to the call's run with its guard.
	Checkpoint *Checkpoint
	// Lease, when set, hands the run's lease to Owner until Until (after
	// Checkpoint): the replica serving the agent holds the run while the
	// task is claimed, so its loss is seen like any crashed run's.
	Lease *RunLease
}

// RunLease is an owner and lease end for a run.
type RunLease struct {
	Owner string
	Until time.Time
}

// AgentErrorCode says why an agent call operation was refused.
type AgentErrorCode string

// The refusal codes of agent call operations, each a business error the
// MCP tools return as isError with this code.
const (
	AgentNotFound       AgentErrorCode = "not_found"           // no such run, call, or not this run's
	AgentNotCurrent     AgentErrorCode = "not_current"         // the call is final: use the run's pendingAgentCall.id
	AgentClaimConflict  AgentErrorCode = "claim_conflict"      // claimed by another claimId or actor
	AgentNotClaimed     AgentErrorCode = "not_claimed"         // claim it first
	AgentNotOwner       AgentErrorCode = "not_owner"           // another claim holds it
	AgentToolConflict   AgentErrorCode = "tool_call_conflict"  // same toolCallId, other input
	AgentToolInFlight   AgentErrorCode = "tool_in_flight"      // another tool call has not ended
	AgentTooManyCalls   AgentErrorCode = "too_many_tool_calls" // MaxAgentReceipts reached
	AgentUnknownTool    AgentErrorCode = "unknown_tool"        // not declared by the task
	AgentToolUnavail    AgentErrorCode = "tool_unavailable"    // declared, but cannot be had now
	AgentInvalidInput   AgentErrorCode = "invalid_input"       // the tool's schema refuses the input
	AgentUnknownAsset   AgentErrorCode = "unknown_asset"
	AgentAssetError     AgentErrorCode = "asset_unreadable"
	AgentInvalidResult  AgentErrorCode = "invalid_result" // output_schema refuses the result
	AgentCancelled      AgentErrorCode = "cancelled"
	AgentRunInterrupted AgentErrorCode = "RUN_INTERRUPTED"
	AgentBadRequest     AgentErrorCode = "bad_request"
)

// AgentError is a refused agent call operation; nothing changed.
type AgentError struct {
	Code    AgentErrorCode
	Message string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("agent call refused (%s): %s", e.Code, e.Message)
}

// AgentRef names an agent call: its run and the call (the run's
// pendingAgentCall.id).
type AgentRef struct {
	RunID, CallID string
}

// AgentAsset is one read of an asset. Content is UTF-8 text (Encoding
// "utf-8") or base64 of the bytes ("base64"); NextOffset is where the
// next read starts, -1 after the last byte.
type AgentAsset struct {
	ID          string `json:"assetId"`
	MediaType   string `json:"mediaType"`
	Encoding    string `json:"encoding"`
	Content     string `json:"content"`
	Size        int64  `json:"size"`
	Offset      int64  `json:"offset"`
	NextOffset  int64  `json:"nextOffset"`
	Description string `json:"description,omitempty"`
}
