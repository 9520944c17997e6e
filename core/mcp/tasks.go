package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// The Tasks extension (io.modelcontextprotocol/tasks, docs/mcp.md): a
// 2026-07-28 client that declares it in a request's capabilities may get a
// durable task handle instead of a result — from flow when the run waits
// for a person (an approval, a question) or still runs when flow's wait
// ends, and from call_agent_tool when the tool call waits for an approval.
// The handle is stored before it is returned (core.MCPTaskStore); its state
// is computed from the run and the agent call on every tasks/get, so it
// survives restarts and any replica answers. Clients without the
// extension get the result as before.

const (
	// extTasks is the extension's identifier.
	extTasks = "io.modelcontextprotocol/tasks"
	// taskMarker carries a created task from a tool handler to the HTTP
	// layer, which answers the CreateTaskResult in its place (the SDK's
	// tools/call has no such result).
	taskMarker = "io.opsgate/createTask"
	// approvalMeta names the approval a task waits for in its _meta.
	approvalMeta = "io.opsgate/approval"
	// DefaultTaskTTL is how long a task handle is kept.
	DefaultTaskTTL = 24 * time.Hour
	// taskPollMs is the poll interval a task suggests.
	taskPollMs = 2000
)

// The task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskView is a DetailedTask: what tasks/get answers and notifications/tasks
// carries.
type taskView struct {
	TaskID         string          `json:"taskId"`
	Status         string          `json:"status"`
	StatusMessage  string          `json:"statusMessage,omitempty"`
	CreatedAt      string          `json:"createdAt"`
	LastUpdatedAt  string          `json:"lastUpdatedAt"`
	TTLMs          int64           `json:"ttlMs"`
	PollIntervalMs int             `json:"pollIntervalMs"`
	InputRequests  map[string]any  `json:"inputRequests,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          map[string]any  `json:"error,omitempty"`
	Meta           map[string]any  `json:"_meta,omitempty"`
}

func (v *taskView) terminal() bool {
	return v.Status == taskCompleted || v.Status == taskFailed || v.Status == taskCancelled
}

// tasks is the store of task handles, when the Store keeps them.
func (s *Server) tasks() core.MCPTaskStore {
	ts, _ := s.o.Store.(core.MCPTaskStore)
	return ts
}

// wantsTask reports whether this call may be answered with a task: a
// 2026-07-28 request declaring the extension, on a store that keeps them.
func (s *Server) wantsTask(x *call) bool {
	if s.tasks() == nil || x.req == nil || x.req.Params == nil {
		return false
	}
	if v, _ := x.req.Params.Meta[metaProtocolVersion].(string); v < statelessFrom {
		return false
	}
	cc := x.req.ClientCapabilities()
	if cc == nil || cc.Extensions == nil {
		return false
	}
	_, ok := cc.Extensions[extTasks]
	return ok
}

func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "tsk_" + hex.EncodeToString(b[:])
}

// createTask stores a handle for x and makes x answer with it.
func (s *Server) createTask(ctx context.Context, x *call, t *core.MCPTask) *toolErr {
	now := s.o.Now().UTC()
	t.ID, t.Actor, t.Endpoint, t.CreatedAt, t.ExpiresAt = newTaskID(), x.c.actor.ID, x.ep.path, now, now.Add(s.o.TaskTTL)
	t.TraceParent = x.traceparent()
	if err := s.tasks().MCPTaskCreate(ctx, t); err != nil {
		return s.internalError(t.Tool, err)
	}
	v, err := s.taskState(ctx, x.c, t)
	if err != nil {
		return s.internalError(t.Tool, err)
	}
	x.task = v
	return nil
}

// taskResult is the marker result the HTTP layer turns into the task.
func taskResult(v *taskView) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{}, Meta: sdk.Meta{taskMarker: v}}
}

// taskState computes task t's state now, as c sees it.
func (s *Server) taskState(ctx context.Context, c caller, t *core.MCPTask) (*taskView, error) {
	v := &taskView{TaskID: t.ID, CreatedAt: rfc3339(t.CreatedAt), LastUpdatedAt: rfc3339(t.CreatedAt),
		TTLMs: t.ExpiresAt.Sub(t.CreatedAt).Milliseconds(), PollIntervalMs: taskPollMs}
	run, err := s.o.Store.RunGet(ctx, t.RunID)
	if errors.Is(err, core.ErrNotFound) {
		v.Status, v.StatusMessage = taskFailed, "the run is gone"
		v.Error = map[string]any{"code": -32603, "message": "run " + t.RunID + " no longer exists"}
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	v.LastUpdatedAt = rfc3339(run.UpdatedAt)
	switch t.Tool {
	case "call_agent_tool":
		return v, s.agentToolTask(ctx, c, t, v)
	default:
		return v, s.flowTask(ctx, c, run, v)
	}
}

// flowTask fills v from the run a flow started.
func (s *Server) flowTask(ctx context.Context, c caller, run *core.Run, v *taskView) error {
	rv, err := s.runView(ctx, c, run)
	if err != nil {
		return err
	}
	switch {
	case run.Status == core.RunCancelled:
		v.Status, v.StatusMessage = taskCancelled, firstOf(run.ErrorMessage, "the run was cancelled")
		return nil
	case run.Status.Final():
		v.Status, v.StatusMessage = taskCompleted, "the run is "+string(run.Status)
		v.Result, err = completeResult(result(runOut{Run: rv}))
		return err
	}
	v.Status, v.StatusMessage = taskWorking, "the run is "+string(run.Status)
	for i := range rv.PendingActions {
		a := &rv.PendingActions[i]
		switch a.Kind {
		case "approval":
			s.approvalWait(ctx, c, a.approval, v)
			return nil
		case "question":
			if _, te := s.authorizedRunAs(ctx, c, authority.Answer, run.ID); te != nil {
				v.StatusMessage = "the run waits for an answer to its question from a person"
				return nil
			}
			ask, err := askOf(a)
			if err != nil {
				return err
			}
			v.Status, v.StatusMessage = taskInputRequired, "the run asks a question"
			v.InputRequests = map[string]any{a.ID: map[string]any{"method": "elicitation/create",
				"params": &sdk.ElicitParams{Mode: "form", Message: formMessage(rv, ask), RequestedSchema: formSchema(ask)}}}
			return nil
		case "agent_call":
			v.StatusMessage = fmt.Sprintf("the run waits for an agent to do its task: claim_agent_call {runId: %q, callId: %q}", run.ID, a.ID)
			return nil
		}
	}
	return nil
}

// approvalWait says in v that the task waits for approval a: to a person
// who may decide it, a URL elicitation of its console page (they sign in
// and decide there, as themselves); to anyone else, working, with the
// link and the expiry.
func (s *Server) approvalWait(ctx context.Context, c caller, a *approvals.Approval, v *taskView) {
	link := s.link("approvals", a.ID)
	v.Meta = map[string]any{approvalMeta: map[string]any{"id": a.ID, "link": link, "expiresAt": rfc3339(a.ExpiresAt), "tool": a.Tool}}
	v.StatusMessage = fmt.Sprintf("waiting for a person to approve %s at %s (expires %s); an agent never approves", a.Tool, link, rfc3339(a.ExpiresAt))
	if s.eligibleApprover(ctx, c, a.ID) {
		v.Status = taskInputRequired
		v.InputRequests = map[string]any{"approval-" + a.ID: map[string]any{"method": "elicitation/create", "params": approvalElicit(a, link)}}
	}
}

// approvalElicit is the URL elicitation of an approval's console page.
func approvalElicit(a *approvals.Approval, link string) *sdk.ElicitParams {
	return &sdk.ElicitParams{Mode: "url", URL: link, ElicitationID: "approval-" + a.ID,
		Message: fmt.Sprintf("opsgate: %s waits for your approval. Open the console, sign in and decide there (expires %s).", a.Tool, rfc3339(a.ExpiresAt))}
}

// eligibleApprover asks the authority whether the person behind c's token
// could decide approval id now (as they would once signed in to the
// console): never an agent.
func (s *Server) eligibleApprover(ctx context.Context, c caller, id string) bool {
	_, err := s.auth.Approval(ctx, authority.ChatActor(c.actor.ID), authority.Decide, id)
	return err == nil
}

// agentToolTask fills v from an agent task's tool call: polled with the
// same toolCallId, as call_agent_tool would be.
func (s *Server) agentToolTask(ctx context.Context, c caller, t *core.MCPTask, v *taskView) error {
	r, err := s.o.Engine.AgentCallTool(ctx, c.actor, core.AgentRef{RunID: t.RunID, CallID: t.CallID}, t.ClaimID, t.ToolCallID, t.ToolID, t.Input)
	if err != nil {
		var ae *core.AgentError
		if !errors.As(err, &ae) {
			return err
		}
		v.Status, v.StatusMessage = taskCompleted, ae.Message
		if ae.Code == core.AgentCancelled {
			v.Status = taskCancelled
			return nil
		}
		v.Result, err = completeResult(refusal(errf(string(ae.Code), "%s", ae.Message), nil))
		return err
	}
	switch r.Status {
	case core.ReceiptPendingApproval:
		v.Status = taskWorking
		if a, err := s.o.Store.ApprovalGet(ctx, r.ApprovalID); err == nil {
			s.approvalWait(ctx, c, a, v)
		}
		return nil
	case core.ReceiptDispatching:
		v.Status, v.StatusMessage = taskWorking, "the tool is running"
		return nil
	}
	out, te := s.receiptOutcome(r)
	res := result(out)
	if te != nil {
		res = refusal(te, out)
	}
	v.Status, v.StatusMessage = taskCompleted, "the tool call is "+string(r.Status)
	v.Result, err = completeResult(res)
	return err
}

// completeResult is a CallToolResult as a completed task carries it: in
// the 2026-07-28 wire form, with resultType "complete". The fields stay
// raw so structuredContent keeps the key order of its text twin.
func completeResult(res *sdk.CallToolResult) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	return json.Marshal(m)
}

// authorizedRunAs is authorizedRun for a caller without a tool call.
func (s *Server) authorizedRunAs(ctx context.Context, c caller, act authority.Action, id string) (*core.Run, *toolErr) {
	return s.authorizedRun(ctx, &call{c: c}, act, id)
}

// traceparent is the W3C trace context the request carries in _meta, when
// it is well formed ("" otherwise).
func (x *call) traceparent() string {
	if x.req == nil || x.req.Params == nil {
		return ""
	}
	tp, _ := x.req.Params.Meta["traceparent"].(string)
	if !validTraceparent(tp) {
		return ""
	}
	return tp
}

// validTraceparent checks the W3C form version-traceid-parentid-flags
// (00-<32 hex>-<16 hex>-<2 hex>), not all-zero ids.
func validTraceparent(tp string) bool {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return false
	}
	zero := func(s string) bool {
		for _, r := range s {
			if r != '0' {
				return false
			}
		}
		return true
	}
	for _, part := range []string{tp[0:2], tp[3:35], tp[36:52], tp[53:55]} {
		if _, err := hex.DecodeString(part); err != nil || part != toLowerHex(part) {
			return false
		}
	}
	return tp[0:2] != "ff" && !zero(tp[3:35]) && !zero(tp[36:52])
}

func toLowerHex(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'F' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
