package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// The agent-task tools (external endpoints only): an agent_task step's
// work, done by the MCP client. A task is referenced by {runId, callId}
// (callId is the run's pendingAgentCall.id); claiming it with a stable
// claimId returns the task and an ownerToken, which every later call
// carries. The ownerToken is an HMAC of the call, the claim and the actor:
// nothing secret is stored, and it proves the claim without the claimId.

func (s *Server) ownerToken(callID, claimID, actor string) string {
	m := hmac.New(sha256.New, s.ownerK)
	for _, p := range []string{callID, claimID, actor} {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return "og_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

type agentCallView struct {
	ID           string               `json:"id"`
	RunID        string               `json:"runId"`
	Status       core.AgentCallStatus `json:"status"`
	Stage        string               `json:"stage"`
	Instructions string               `json:"instructions"`
	Skills       []string             `json:"skills"`
	Tools        []agentToolView      `json:"tools"`
	Assets       []agentAssetView     `json:"assets"`
	OutputSchema json.RawMessage      `json:"outputSchema"`
	ClaimedBy    string               `json:"claimedBy,omitempty"`
	ClaimedAt    string               `json:"claimedAt,omitempty"`
	CreatedAt    string               `json:"createdAt"`
	FinishedAt   string               `json:"finishedAt,omitempty"`
	Error        string               `json:"error,omitempty"`
	ToolCalls    []receiptView        `json:"toolCalls"`
}

type agentToolView struct {
	ID          string          `json:"toolId"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Risk        string          `json:"risk,omitempty"`
}

type agentAssetView struct {
	ID          string `json:"assetId"`
	Description string `json:"description,omitempty"`
	MediaType   string `json:"mediaType"`
}

type receiptView struct {
	ToolCallID string                  `json:"toolCallId"`
	ToolID     string                  `json:"toolId"`
	Status     core.AgentReceiptStatus `json:"status"`
	Output     string                  `json:"output"`
	Error      string                  `json:"error,omitempty"`
	ApprovalID string                  `json:"approvalId,omitempty"`
	Link       string                  `json:"link,omitempty"`
	Final      bool                    `json:"final"`
}

func (s *Server) callView(c *core.AgentCall, rs []core.AgentReceipt) *agentCallView {
	v := &agentCallView{ID: c.ID, RunID: c.RunID, Status: c.Status, Stage: c.Task.Stage, Instructions: c.Task.Instructions,
		Skills: append([]string{}, c.Task.Skills...), Tools: []agentToolView{}, Assets: []agentAssetView{},
		OutputSchema: c.Task.OutputSchema, ClaimedBy: c.ClaimedBy, ClaimedAt: rfc3339Ptr(c.ClaimedAt),
		CreatedAt: rfc3339(c.CreatedAt), FinishedAt: rfc3339Ptr(c.FinishedAt), Error: c.Error, ToolCalls: []receiptView{}}
	if len(v.OutputSchema) == 0 {
		v.OutputSchema = json.RawMessage(`{"type":"object"}`)
	}
	for _, t := range c.Task.Tools {
		in := t.InputSchema
		if len(in) == 0 {
			in = json.RawMessage(`{"type":"object"}`)
		}
		v.Tools = append(v.Tools, agentToolView{ID: t.ID, Description: t.Description, InputSchema: in, Risk: t.Risk})
	}
	for _, a := range c.Task.Assets {
		v.Assets = append(v.Assets, agentAssetView{ID: a.ID, Description: a.Description, MediaType: a.MediaType})
	}
	for _, r := range rs {
		v.ToolCalls = append(v.ToolCalls, s.receiptView(&r))
	}
	return v
}

func (s *Server) receiptView(r *core.AgentReceipt) receiptView {
	v := receiptView{ToolCallID: r.ToolCallID, ToolID: r.ToolID, Status: r.Status, Output: r.Output, Error: r.Error,
		ApprovalID: r.ApprovalID, Final: !r.Status.InFlight()}
	if r.ApprovalID != "" {
		v.Link = s.link("approvals", r.ApprovalID)
	}
	return v
}

func (x *call) ref() core.AgentRef {
	return core.AgentRef{RunID: x.str("runId"), CallID: x.str("callId")}
}

// agentRun checks the caller may work on the run of x's task reference
// (authority.Claim).
func (s *Server) agentRun(ctx context.Context, x *call, _ string) (*core.Run, *toolErr) {
	return s.authorizedRun(ctx, x, authority.Claim, x.str("runId"))
}

// owner verifies the ownerToken of x against the call's claim and returns
// the claimId it stands for.
func (s *Server) owner(ctx context.Context, x *call, tool string) (string, *toolErr) {
	if _, te := s.agentRun(ctx, x, tool); te != nil {
		return "", te
	}
	c, _, err := s.o.Engine.AgentCallGet(ctx, x.ref())
	if err != nil {
		return "", s.agentErr(tool, err)
	}
	tok := x.str("ownerToken")
	if c.ClaimID == "" || !hmac.Equal([]byte(tok), []byte(s.ownerToken(c.ID, c.ClaimID, x.c.actor.ID))) {
		if c.Status.Final() {
			return "", s.agentErr(tool, &core.AgentError{Code: core.AgentNotCurrent, Message: "agent call " + c.ID + " is " + string(c.Status)})
		}
		return "", errf(string(core.AgentNotOwner), "the ownerToken does not hold agent call %s: claim it with claim_agent_call", c.ID)
	}
	return c.ClaimID, nil
}

func (s *Server) agentErr(tool string, err error) *toolErr {
	var ae *core.AgentError
	if errors.As(err, &ae) {
		return errf(string(ae.Code), "%s", ae.Message)
	}
	return s.internalError(tool, err)
}

func (s *Server) agentTools() []tool {
	ref := js{
		"runId":  strMax("the run's id", maxIDLen),
		"callId": strMax("the run's pendingAgentCall.id", maxIDLen),
	}
	with := func(extra js) js {
		out := js{}
		for k, v := range ref {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	owner := strMax("from claim_agent_call", 128)
	return []tool{
		{name: "get_agent_call", act: authority.SeeRun, agent: true, readOnly: true, idempotent: true,
			desc: "Get an agent call of a run (an agent_task step): its task, whether it is claimed, and the tool calls made for it.",
			in:   input(ref, "runId", "callId"),
			out:  output(js{"agentCall": agentCallSchema}, "agentCall"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				if _, te := s.visibleRun(ctx, x, x.str("runId")); te != nil {
					return nil, te
				}
				c, rs, err := s.o.Engine.AgentCallGet(ctx, x.ref())
				if err != nil {
					return nil, s.agentErr("get_agent_call", err)
				}
				return struct {
					AgentCall *agentCallView `json:"agentCall"`
				}{s.callView(c, rs)}, nil
			}},
		{name: "claim_agent_call", act: authority.Claim, agent: true, idempotent: true,
			desc: "Claim an agent call to do its task. Use a stable claimId of your own: claiming again with it resumes your claim " +
				"(after a reconnect); another claim conflicts. Returns the task (instructions, skills, tools, assets, outputSchema) and the ownerToken " +
				"the other agent-call tools need.",
			in: input(with(js{"claimId": strMax("your stable id for this claim", maxIDLen)}), "runId", "callId", "claimId"),
			out: output(js{"task": agentCallSchema, "ownerToken": str("pass it to call_agent_tool, read_agent_asset, complete_agent_call, fail_agent_call")},
				"task"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				if _, te := s.agentRun(ctx, x, "claim_agent_call"); te != nil {
					return nil, te
				}
				c, err := s.o.Engine.AgentCallClaim(ctx, x.c.actor, x.ref(), x.str("claimId"))
				if err != nil {
					return nil, s.agentErr("claim_agent_call", err)
				}
				_, rs, err := s.o.Engine.AgentCallGet(ctx, x.ref())
				if err != nil {
					return nil, s.agentErr("claim_agent_call", err)
				}
				return struct {
					Task       *agentCallView `json:"task"`
					OwnerToken string         `json:"ownerToken"`
				}{s.callView(c, rs), s.ownerToken(c.ID, c.ClaimID, x.c.actor.ID)}, nil
			}},
		{name: "call_agent_tool", act: authority.Claim, agent: true,
			desc: "Call one of the task's tools (toolId from the task) with input, through opsgate's policy gate, one call at a time. " +
				"toolCallId is yours and stable: calling again with it and the same input returns the kept result (never a second run). " +
				"A call that needs a person's approval returns status pending_approval at once: call again later with the same toolCallId; " +
				"you cannot approve it yourself.",
			codex: "Run a task tool through opsgate's gate. Reuse toolCallId to poll (status pending_approval means a person must approve; poll later).",
			in: input(with(js{"ownerToken": owner, "toolCallId": strMax("your id for this tool call", maxIDLen),
				"toolId": strMax("one of the task's tools", 256), "input": freeObject("the tool's arguments (its inputSchema)")}),
				"runId", "callId", "ownerToken", "toolCallId", "toolId"),
			out: output(js{"output": receiptSchema}, "output"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				claim, te := s.owner(ctx, x, "call_agent_tool")
				if te != nil {
					return nil, te
				}
				r, err := s.o.Engine.AgentCallTool(ctx, x.c.actor, x.ref(), claim, x.str("toolCallId"), x.str("toolId"), x.args["input"])
				if err != nil {
					return nil, s.agentErr("call_agent_tool", err)
				}
				if r.Status.InFlight() && s.wantsTask(x) {
					// A task client follows the wait with tasks/get.
					ref := x.ref()
					return nil, s.createTask(ctx, x, &core.MCPTask{Tool: "call_agent_tool", RunID: ref.RunID, CallID: ref.CallID, ClaimID: claim,
						ToolCallID: x.str("toolCallId"), ToolID: x.str("toolId"), Input: x.args["input"]})
				}
				return s.receiptOutcome(r)
			}},
		{name: "read_agent_asset", act: authority.Claim, agent: true, readOnly: true, idempotent: true,
			desc: "Read one of the task's assets by assetId (never a path), at most 1 MiB a read: content is UTF-8 text or base64 (encoding says which); " +
				"read on from nextOffset until it is -1.",
			in: input(with(js{"ownerToken": owner, "assetId": strMax("one of the task's assets", 64),
				"offset": integer("where to start (nextOffset of the previous read)", 0, 1<<40)}), "runId", "callId", "ownerToken", "assetId"),
			out: output(js{"asset": assetSchema}, "asset"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				claim, te := s.owner(ctx, x, "read_agent_asset")
				if te != nil {
					return nil, te
				}
				a, err := s.o.Engine.AgentCallAsset(ctx, x.c.actor, x.ref(), claim, x.str("assetId"), int64(x.int("offset", 0)))
				if err != nil {
					return nil, s.agentErr("read_agent_asset", err)
				}
				return struct {
					Asset *core.AgentAsset `json:"asset"`
				}{a}, nil
			}},
		{name: "complete_agent_call", act: authority.Claim, agent: true,
			desc: "Finish the task with result, JSON matching the task's outputSchema (checked as sent). Every tool call must have ended. " +
				"The run then continues; follow the returned run with get_run.",
			in: input(with(js{"ownerToken": owner, "result": anyJSON("the task's result (its outputSchema)")}),
				"runId", "callId", "ownerToken", "result"),
			out: output(js{"run": runSchema}, "run"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				claim, te := s.owner(ctx, x, "complete_agent_call")
				if te != nil {
					return nil, te
				}
				r, err := s.o.Engine.AgentCallComplete(ctx, x.c.actor, x.ref(), claim, x.args["result"])
				if err != nil {
					return nil, s.agentErr("complete_agent_call", err)
				}
				v, err := s.runView(ctx, x.c, r)
				if err != nil {
					return nil, s.internalError("complete_agent_call", err)
				}
				return runOut{Run: v}, nil
			}},
		{name: "fail_agent_call", act: authority.Claim, agent: true,
			desc: "Give the task up with a message saying why; the run then fails.",
			in: input(with(js{"ownerToken": owner, "message": strMax("why the task cannot be done", 4096)}),
				"runId", "callId", "ownerToken", "message"),
			out: output(js{"run": runSchema}, "run"),
			handle: func(ctx context.Context, x *call) (any, *toolErr) {
				claim, te := s.owner(ctx, x, "fail_agent_call")
				if te != nil {
					return nil, te
				}
				r, err := s.o.Engine.AgentCallFail(ctx, x.c.actor, x.ref(), claim, x.str("message"))
				if err != nil {
					return nil, s.agentErr("fail_agent_call", err)
				}
				v, err := s.runView(ctx, x.c, r)
				if err != nil {
					return nil, s.internalError("fail_agent_call", err)
				}
				return runOut{Run: v}, nil
			}},
	}
}

// receiptOutcome is call_agent_tool's answer for receipt r: the receipt,
// and a business error for a call that ended without success.
func (s *Server) receiptOutcome(r *core.AgentReceipt) (any, *toolErr) {
	out := struct {
		Output receiptView `json:"output"`
	}{s.receiptView(r)}
	switch r.Status {
	case core.ReceiptSucceeded, core.ReceiptPendingApproval, core.ReceiptDispatching:
		return out, nil
	}
	te := errf("tool_"+string(r.Status), "%s %s: %s", r.ToolID, r.Status, firstOf(r.Error, r.Output))
	te.Link = out.Output.Link
	return out, te
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

var receiptSchema = object("one tool call of the task", js{
	"toolCallId": str("your id"),
	"toolId":     str("the tool"),
	"status": enum("pending_approval and dispatching: call again later with the same toolCallId; the others are final",
		receiptStatuses...),
	"output":     str("the tool's output (external content), or the approvers' feedback"),
	"error":      str("why it did not succeed"),
	"approvalId": str("the approval it waits for"),
	"link":       str("the approval's card"),
	"final":      boolean("true once the call has ended"),
}, "toolCallId", "toolId", "status", "final")

var agentCallSchema = object("an agent call and its task", js{
	"id":           str("the callId"),
	"runId":        str("the run"),
	"status":       enum("pending: claim it; claimed: being worked on; the rest are final", callStatuses...),
	"stage":        str("the step's stage name"),
	"instructions": str("what to do"),
	"skills":       arr("skills to apply, as named by the flow", js{"type": "string"}),
	"tools": arr("the tools you may call (call_agent_tool)", object("", js{
		"toolId": str("pass as toolId"), "description": str("what it does"),
		"inputSchema": freeObject("the JSON Schema of its input"), "risk": enum("its risk", "read", "reversible", "external", "high_impact"),
	}, "toolId", "inputSchema")),
	"assets": arr("what you may read (read_agent_asset)", object("", js{
		"assetId": str("pass as assetId"), "description": str("what it is"), "mediaType": str("its media type"),
	}, "assetId", "mediaType")),
	"outputSchema": freeObject("the JSON Schema complete_agent_call's result must match"),
	"claimedBy":    str("who holds the claim"),
	"claimedAt":    str("RFC 3339"),
	"createdAt":    str("RFC 3339"),
	"finishedAt":   str("RFC 3339"),
	"error":        str("why it ended, when it failed or was interrupted"),
	"toolCalls":    arr("the tool calls made for it", receiptSchema),
}, "id", "runId", "status", "stage", "instructions", "tools", "assets", "outputSchema", "toolCalls")

var assetSchema = object("one read of an asset", js{
	"assetId":     str("the asset"),
	"mediaType":   str("its media type"),
	"encoding":    enum("how content is written", "utf-8", "base64"),
	"content":     str("the bytes read (external content)"),
	"size":        integer("the asset's size in bytes", 0, 1<<40),
	"offset":      integer("where this read started", 0, 1<<40),
	"nextOffset":  integer("where the next read starts; -1 after the last byte", -1, 1<<40),
	"description": str("what it is"),
}, "assetId", "mediaType", "encoding", "content", "size", "offset", "nextOffset")
