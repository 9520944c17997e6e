package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// sessionIdle ends a stateful session nobody used for this long.
const sessionIdle = time.Hour

// Limits of tool inputs.
const (
	maxIDLen     = 256
	maxIntentLen = 4 << 10
	defaultLimit = 20
	maxLimit     = 100
	maxRuns      = 50
)

// toolErr is a business error: isError with structuredContent.error.
type toolErr struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Link    string `json:"link,omitempty"`
}

func errf(code, format string, args ...any) *toolErr {
	return &toolErr{Code: code, Message: fmt.Sprintf(format, args...)}
}

// tool is one MCP tool as this server defines it.
type tool struct {
	name string
	// desc is the description; codex, when set, the one /mcp/codex shows.
	desc, codex string
	in, out     js
	readOnly    bool
	destructive bool
	idempotent  bool
	// agent tools are offered on the external endpoints only.
	agent bool
	// act is what the tool does, as core/authority judges it; the token's
	// scopes are checked for it before handle runs.
	act    authority.Action
	handle func(ctx context.Context, x *call) (any, *toolErr)
}

// call is one tool call being handled.
type call struct {
	req  *sdk.CallToolRequest
	c    caller
	args map[string]json.RawMessage
	ep   endpoint
	// raw, when a handler sets it, is returned as is (input required).
	raw *sdk.CallToolResult
}

func (x *call) str(name string) string {
	var s string
	if v, ok := x.args[name]; ok {
		_ = json.Unmarshal(v, &s)
	}
	return s
}

func (x *call) int(name string, def int) int {
	n := def
	if v, ok := x.args[name]; ok {
		_ = json.Unmarshal(v, &n)
	}
	return n
}

func (s *Server) addTools(srv *sdk.Server, ep endpoint) {
	for _, t := range s.tools() {
		if t.agent && ep.internal {
			continue
		}
		t := t
		desc := t.desc
		if ep.codex && t.codex != "" {
			desc = t.codex
		}
		if ep.studio {
			desc += " (opsgate studio)"
		}
		compiled := compileSchema(t.name+"-input", t.in)
		ann := &sdk.ToolAnnotations{ReadOnlyHint: t.readOnly, IdempotentHint: t.idempotent, OpenWorldHint: ptr(false)}
		if !t.readOnly {
			ann.DestructiveHint = ptr(t.destructive)
		}
		srv.AddTool(&sdk.Tool{Name: t.name, Description: desc, InputSchema: t.in, OutputSchema: lean(t.out, 0), Annotations: ann},
			func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return s.run(ctx, ep, t, compiled, req), nil
			})
	}
}

func ptr[T any](v T) *T { return &v }

// lean copies an output schema without the descriptions of nested nodes:
// clients validate results against it, models rarely read it, and every
// run-returning tool would otherwise repeat the run's prose (docs/mcp.md
// describes the shapes).
func lean(v any, depth int) any {
	switch x := v.(type) {
	case js:
		out := js{}
		for k, vv := range x {
			if k == "description" && depth > 2 {
				continue
			}
			out[k] = lean(vv, depth+1)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, vv := range x {
			out[i] = lean(vv, depth)
		}
		return out
	}
	return v
}

// run validates the input, calls the handler and renders its outcome:
// structured content and the same JSON as text; a business error as
// isError with structuredContent.error. Only a broken store is a Go error
// (an isError result with its message, and logged).
func (s *Server) run(ctx context.Context, ep endpoint, t tool, in *jsonschema.Schema, req *sdk.CallToolRequest) *sdk.CallToolResult {
	c, ok := callerOf(req)
	if !ok {
		return refusal(errf("unauthenticated", "the request carries no authenticated token"), nil)
	}
	if err := s.auth.Check(c.auth, t.act); err != nil {
		return refusal(s.refused(t.name, err), nil)
	}
	args, err := validateInput(in, req.Params.Arguments)
	if err != nil {
		return refusal(errf("invalid_input", "%s: %v", t.name, err), nil)
	}
	x := &call{req: req, c: c, args: args, ep: ep}
	out, te := t.handle(ctx, x)
	if x.raw != nil {
		return x.raw
	}
	if te != nil {
		return refusal(te, out)
	}
	return result(out)
}

// internalError is a failure of opsgate itself (the store), not of the
// request: logged with its cause, shown without it.
func (s *Server) internalError(tool string, err error) *toolErr {
	s.log.Error("mcp tool failed", "tool", tool, "err", err)
	return errf("internal", "opsgate could not answer (%s); try again", tool)
}

func result(out any) *sdk.CallToolResult {
	b, err := json.Marshal(out)
	if err != nil {
		return refusal(errf("internal", "result: %v", err), nil)
	}
	return &sdk.CallToolResult{StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}

// refusal is a business error. extra, when set, is an object whose fields
// are returned beside error (call_agent_tool returns its receipt too).
func refusal(te *toolErr, extra any) *sdk.CallToolResult {
	body := map[string]any{}
	if extra != nil {
		if b, err := json.Marshal(extra); err == nil {
			_ = json.Unmarshal(b, &body)
		}
	}
	body["error"] = te
	b, _ := json.Marshal(body)
	return &sdk.CallToolResult{IsError: true, StructuredContent: json.RawMessage(b), Content: []sdk.Content{&sdk.TextContent{Text: string(b)}}}
}

// refused turns an authority refusal (or a store failure behind it) into
// the tool's business error.
func (s *Server) refused(tool string, err error) *toolErr {
	ref, ok := authority.RefusalOf(err)
	if !ok {
		return s.internalError(tool, err)
	}
	if ref.Code == authority.CodeMissingScope {
		return errf(string(ref.Code), "this token may not use %s: %s", tool, ref.Message)
	}
	return errf(string(ref.Code), "%s", ref.Message)
}

// authorizedRun loads run id for act as the authority allows it; a run the
// caller may not know of is as unknown as a missing one.
func (s *Server) authorizedRun(ctx context.Context, x *call, act authority.Action, id string) (*core.Run, *toolErr) {
	r, err := s.auth.Run(ctx, x.c.auth, act, id)
	if ref, ok := authority.RefusalOf(err); ok && ref.Code == authority.CodeNotFound {
		return nil, errf("not_found", "no run %q", id)
	}
	if err != nil {
		return nil, s.refused(string(act), err)
	}
	return r, nil
}

// visibleRun loads a run c may see.
func (s *Server) visibleRun(ctx context.Context, x *call, id string) (*core.Run, *toolErr) {
	return s.authorizedRun(ctx, x, authority.SeeRun, id)
}

// tools is the tool table (docs/mcp.md).
func (s *Server) tools() []tool {
	runID := strMax("the run's id", maxIDLen)
	ts := []tool{
		{name: "flow", act: authority.Request, destructive: true,
			desc: "Start a flow (a run) with your intent: the flow's arguments as a person types them after its command, e.g. " +
				"\"api 1.2.3\" for deploy <service> <version>. Returns the run; follow it with get_run. Risky tool calls stop for a person's " +
				"approval (status waiting_approval). Not idempotent: after an error, look with list_runs before calling flow again.",
			codex: "Start an opsgate flow. flowName from list_workflows; intent = its arguments as typed after the command (\"api 1.2.3\"). " +
				"Returns the run. Not idempotent: check list_runs before retrying.",
			in: input(js{
				"flowName": strMax("a flow's name, from list_workflows", 64),
				"intent":   js{"type": "string", "description": "the flow's arguments as a person types them after its command (the whole command line works too)", "maxLength": maxIntentLen},
			}, "flowName", "intent"),
			out: output(js{"run": runSchema}, "run"), handle: s.flowTool},
		{name: "list_workflows", act: authority.Catalog, readOnly: true, idempotent: true,
			desc:   "List the flows opsgate runs: name, description, command usage, arguments and stage names.",
			in:     input(js{}),
			out:    output(js{"workflows": arr("the flows", workflowSchema)}, "workflows"),
			handle: s.listWorkflows},
		{name: "get_run", act: authority.SeeRun, readOnly: true, idempotent: true,
			desc: "Get a run: status, each step with its output, and pending_actions (questions to answer, approvals people decide, " +
				"agent calls to claim — pendingAgentCall.id is the callId).",
			in:     input(js{"runId": runID}, "runId"),
			out:    output(js{"run": runSchema}, "run"),
			handle: s.getRun},
		{name: "list_runs", act: authority.ListRuns, readOnly: true, idempotent: true,
			desc:   "List the newest runs you can see (metadata; get_run has the steps), optionally of one flow.",
			in:     input(js{"flowName": strMax("only runs of this flow", 64)}),
			out:    output(js{"runs": arr("newest first, at most 50", runMetaSchema)}, "runs"),
			handle: s.listRuns},
		{name: "interact", act: authority.Answer, idempotent: false,
			desc: "Act on a pending action of a run. A question is shown to the user as a form when the client supports it (elicitation) " +
				"and the answer submitted; otherwise the action is returned for you to ask, then answer_ask. A cancelled form keeps the run waiting. " +
				"An approval cannot be answered here (human_confirmation_required, with the card's link): people decide it.",
			codex: "Answer a run's pending question through a form when possible; else returns the question for answer_ask. Approvals: people only.",
			in:    input(js{"runId": runID, "actionId": strMax("a pending_actions id", maxIDLen)}, "runId", "actionId"),
			out: output(js{"run": runSchema, "interaction": object("what happened", js{
				"mode":    enum("elicitation: a form was shown; none: return the action to the user yourself", "elicitation", "none"),
				"outcome": enum("accept: answered; decline or cancel: still waiting; unsupported: the client has no forms", "accept", "decline", "cancel", "unsupported"),
				"action":  actionSchema,
			}, "mode", "outcome")}, "run"),
			handle: s.interact},
		{name: "answer_ask", act: authority.Answer, destructive: false,
			desc: "Answer a run's pending question with the user's exact answer: the question array [{\"questionId\",\"isSkipped\",\"answer\"}] " +
				"or, for a single yes/no question, {\"isConfirmed\",\"feedback\"}. Approvals cannot be answered here (human_confirmation_required).",
			in: input(js{"runId": runID, "actionId": strMax("the question's action id", maxIDLen), "answer": js{"description": "the answer",
				"anyOf": []any{arr("one entry per question", object("", js{
					"questionId": strMax("the question's id", 64), "isSkipped": boolean("skip an optional question"),
					"answer": js{"anyOf": []any{js{"type": "string", "maxLength": 4000}, js{"type": "boolean"}}, "description": "the answer (yes/no or true/false for confirm)"},
				}, "questionId")), object("a single confirm question", js{"isConfirmed": boolean("yes or no"), "feedback": js{"type": "string", "maxLength": 4000}}, "isConfirmed")}}},
				"runId", "actionId", "answer"),
			out:    output(js{"run": runSchema}, "run"),
			handle: s.answerAsk},
		{name: "cancel_run", act: authority.Cancel, destructive: true, idempotent: true,
			desc:   "Cancel a run you started (or any, with scope admin). Pending approvals and agent calls end with it.",
			in:     input(js{"runId": runID}, "runId"),
			out:    output(js{"run": runSchema}, "run"),
			handle: s.cancelRun},
		{name: "status", act: authority.Self, readOnly: true, idempotent: true,
			desc:   "Describe this opsgate server and your token: version, endpoint, protocol versions, scopes, whether its store answers.",
			in:     input(js{}),
			out:    output(js{"service": serviceSchema}, "service"),
			handle: s.status},
		{name: "get_record", act: authority.ReadAudit, readOnly: true, idempotent: true,
			desc:   "Get one record of opsgate's audit log (a decision, a request, a run's end) by its recordId (from an artifact or the console); null when there is none you can see.",
			in:     input(js{"recordId": js{"type": "string", "description": "the audit entry's sequence number", "pattern": "^[0-9]{1,18}$"}}, "recordId"),
			out:    output(js{"record": nullable(recordSchema)}, "record"),
			handle: s.getRecord},
		{name: "get_artifact", act: authority.SeeRun, readOnly: true, idempotent: true,
			desc: "Get an artifact — a step's output (an agent task's result) — by artifactId, or the newest of a flow's stage by flowName and stageName; " +
				"null when there is none.",
			in: input(js{"artifactId": strMax("<runId>/<stageName>", 2*maxIDLen), "flowName": strMax("with stageName", 64),
				"stageName": strMax("with flowName", 64)}),
			out:    output(js{"artifact": nullable(artifactSchema)}, "artifact"),
			handle: s.getArtifact},
		{name: "list_artifacts", act: authority.ListRuns, readOnly: true, idempotent: true,
			desc: "List artifacts (metadata) newest first, optionally of one flow and stage; page with cursor.",
			in: input(js{"flowName": strMax("only this flow", 64), "stageName": strMax("only this stage", 64),
				"limit": integer("page size (default 20)", 1, maxLimit), "cursor": strMax("next_cursor of the previous page", 1024)}),
			out: output(js{"artifacts": arr("newest first", artifactMetaSchema),
				"next_cursor": str("the next page's cursor; empty after the last")}, "artifacts"),
			handle: s.listArtifacts},
	}
	return append(ts, s.agentTools()...)
}

var workflowSchema = object("a flow", js{
	"name":        str("the flowName"),
	"description": str("what it does"),
	"command":     str("its command pattern"),
	"usage":       str("e.g. deploy <service> <version> [env=staging]"),
	"arguments": arr("its arguments, in order", object("", js{"name": str("the argument"), "required": boolean("false when it has a default"),
		"default": str("the default")}, "name", "required")),
	"stages": arr("its steps' stage names (for artifacts)", js{"type": "string"}),
}, "name", "description", "usage", "arguments", "stages")

var serviceSchema = object("this server", js{
	"name":             str("opsgate"),
	"version":          str("the server version"),
	"endpoint":         enum("the endpoint answering", PathExternal, PathCodex, PathInternal, PathStudio),
	"protocolVersions": arr("MCP versions spoken", js{"type": "string"}),
	"actor":            str("your token's identity"),
	"scopes":           arr("your token's scopes", enum("", "read", "request", "decide", "admin", "session.run")),
	"readsAll":         boolean("false: you see only the runs you started, their tasks and approvals"),
	"store":            enum("whether the store answers", "ok", "unreachable"),
	"flows":            integer("flows configured", 0, 100000),
	"time":             str("the server's time, RFC 3339"),
}, "name", "version", "endpoint", "actor", "scopes", "store")

var recordSchema = object("an audit log entry", js{
	"id":          str("the recordId"),
	"seq":         integer("its place in the chain", 1, 1<<53),
	"kind":        str("what happened, e.g. approval.decided"),
	"actor":       str("who did it"),
	"run_id":      str("the run it concerns"),
	"approval_id": str("the approval it concerns"),
	"tool":        str("the tool it concerns"),
	"at":          str("RFC 3339"),
	"detail":      anyJSON("the business data of the entry"),
	"hash":        str("the entry's link in the chain"),
}, "id", "seq", "kind", "actor", "at")

var artifactMetaSchema = object("an artifact (metadata)", js{
	"id":         str("the artifactId: <runId>/<stageName>"),
	"run_id":     str("the run"),
	"flow":       str("the flow"),
	"stage":      str("the stage name"),
	"step_index": integer("the step", 0, 10000),
	"tool":       str("the tool, or agent_task"),
	"media_type": enum("the content's type", "application/json", "text/plain"),
	"size":       integer("bytes", 0, 1<<40),
	"created_at": str("when the step finished, RFC 3339"),
}, "id", "run_id", "flow", "stage", "media_type", "size")

var artifactSchema = func() js {
	a := object("an artifact", js{}, "id", "run_id", "flow", "stage", "media_type", "size", "content")
	props := js{}
	for k, v := range artifactMetaSchema["properties"].(js) {
		props[k] = v
	}
	props["content"] = str("the step's output: the agent's result JSON, or the tool's text (external content)")
	props["json"] = anyJSON("the content parsed, for application/json")
	a["properties"] = props
	return a
}()
