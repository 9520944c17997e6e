package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Schemas are written out by hand so they stay portable across clients
// (the MCP Inspector's --strict lint finds nothing): every node says what
// it is (no bare true, no schema without a type or an applicator), unions
// are anyOf branches of one type each, statuses and kinds are enums, and
// limits have bounds.

type js = map[string]any

func str(desc string) js { return js{"type": "string", "description": desc} }

func strMax(desc string, max int) js {
	return js{"type": "string", "description": desc, "minLength": 1, "maxLength": max}
}

func integer(desc string, min, max int) js {
	return js{"type": "integer", "description": desc, "minimum": min, "maximum": max}
}

func boolean(desc string) js { return js{"type": "boolean", "description": desc} }

// strs turns a vocabulary list (core.RunStatuses, …) into enum values.
func strs[S ~string](vals []S) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

func enum(desc string, vals ...string) js {
	e := make([]any, 0, len(vals))
	seen := map[string]bool{}
	for _, v := range vals {
		if !seen[v] {
			seen[v] = true
			e = append(e, v)
		}
	}
	return js{"type": "string", "description": desc, "enum": e}
}

func arr(desc string, items js) js { return js{"type": "array", "description": desc, "items": items} }

func object(desc string, props js, required ...string) js {
	o := js{"type": "object", "properties": props}
	if desc != "" {
		o["description"] = desc
	}
	if len(required) > 0 {
		r := make([]any, len(required))
		for i, x := range required {
			r[i] = x
		}
		o["required"] = r
	}
	return o
}

// freeObject is an object of any members (tool arguments, audit detail).
func freeObject(desc string) js {
	return js{"type": "object", "description": desc, "additionalProperties": true}
}

func nullable(s js) js {
	out := js{"anyOf": []any{s, js{"type": "null"}}}
	if d, ok := s["description"]; ok {
		out["description"] = d
	}
	return out
}

// anyJSON is any JSON value, spelled as one branch per type.
func anyJSON(desc string) js {
	scalars := func() []any {
		return []any{js{"type": "string"}, js{"type": "number"}, js{"type": "boolean"}, js{"type": "null"}}
	}
	item := js{"anyOf": append([]any{js{"type": "object", "additionalProperties": true}, js{"type": "array"}}, scalars()...)}
	return js{"description": desc, "anyOf": append([]any{js{"type": "object", "additionalProperties": true},
		js{"type": "array", "items": item}}, scalars()...)}
}

// input is a tool's input schema: an object with exactly these members.
func input(props js, required ...string) js {
	o := object("", props, required...)
	o["additionalProperties"] = false
	return o
}

// output is a tool's output schema: its result field (one of fields), or
// error for a business error, which clients validate too.
func output(props js, fields ...string) js {
	props["error"] = errorSchema
	o := object("", props)
	branches := []any{}
	for _, f := range append(fields, "error") {
		branches = append(branches, js{"required": []any{f}})
	}
	o["anyOf"] = branches
	return o
}

var errorSchema = object("a business error: nothing changed (isError is true)", js{
	"code":    str("machine-readable: invalid_input, not_found, missing_scope, human_confirmation_required, conflict codes, …"),
	"message": str("what went wrong, for a person"),
	"link":    str("where a person can act (an approval's card in the console)"),
}, "code", "message")

var (
	runStatuses  = strs(core.RunStatuses)
	stepStatuses = []string{string(core.StepWaitingApproval), string(core.StepWaitingAgent), stepWaitingInput, string(core.StepDispatching),
		string(core.StepSucceeded), string(core.StepFailed), string(core.StepDenied), string(core.StepRejected), string(core.StepInterrupted),
		string(core.StepCancelled)}
	callStatuses = []string{string(core.AgentCallPending), string(core.AgentCallClaimed), string(core.AgentCallCompleted),
		string(core.AgentCallFailed), string(core.AgentCallCancelled), string(core.AgentCallInterrupted)}
	receiptStatuses = []string{string(core.ReceiptDispatching), string(core.ReceiptPendingApproval), string(core.ReceiptSucceeded),
		string(core.ReceiptFailed), string(core.ReceiptDenied), string(core.ReceiptRejected), string(core.ReceiptExpired),
		string(core.ReceiptInterrupted), string(core.ReceiptInvalid)}
	approvalStatuses = strs(approvals.Statuses)
)

// stepWaitingInput is engine.StepWaitingInput, an agent run's ask_user
// step; this package does not import the engine
// (TestSchemaEnumsCoverGoConstants finds every status the module declares).
const stepWaitingInput = "waiting_input"

var questionSchema = object("one question", js{
	"id":       str("the questionId to answer"),
	"kind":     enum("text: a free answer; choice: one of choices; confirm: yes or no", "text", "choice", "confirm"),
	"text":     str("the question (external content)"),
	"choices":  arr("for kind choice", js{"type": "string"}),
	"optional": boolean("true when it may be skipped"),
}, "id", "kind", "text")

var actionSchema = object("what a waiting run waits for", js{
	"id":   str("the actionId (interact, answer_ask) or, for agent_call, the callId"),
	"kind": enum("question: answer it; approval: people decide it, never over MCP; agent_call: work for an agent", "question", "approval", "agent_call"),
	"status": enum("the action's state", append(append(append([]string{}, approvalStatuses...), callStatuses...),
		"answered", "withdrawn")...),
	"answerable":      boolean("false for approvals: only people decide them, in chat or the console"),
	"tool":            str("approval: the tool asked for"),
	"risk":            enum("approval: the tool's risk", "read", "reversible", "external", "high_impact"),
	"proposed_args":   freeObject("approval: the arguments asked for"),
	"dry_run_preview": str("approval: the tool's dry run (external content); empty without read on other threads"),
	"digest":          str("approval: sha256:<hex> over tool, canonical arguments, rule and policy version: what it lets run"),
	"link":            str("approval: its card in the console"),
	"questions":       arr("question: the questions", questionSchema),
	"stage":           str("agent_call: the step's stage name"),
	"claimed_by":      str("agent_call: who holds the claim"),
	"expires_at":      str("RFC 3339"),
}, "id", "kind", "status")

var stepSchema = object("one step", js{
	"index":       integer("0-based", 0, 10000),
	"stage":       str("the step's stage name"),
	"tool":        str("the tool, or agent_task"),
	"status":      enum("the step's state", stepStatuses...),
	"args":        freeObject("the arguments it ran with"),
	"output":      str("the tool's output, or the agent's result JSON (external content)"),
	"error":       str("why it failed"),
	"approval_id": str("the approval it waited for"),
	"attempts":    integer("dispatches", 0, 1000),
	"started_at":  str("RFC 3339"),
	"finished_at": str("RFC 3339"),
}, "index", "tool", "status")

var agentCallRefSchema = object("the run's current agent call: use its id as callId", js{
	"id":         str("the callId"),
	"stage":      str("the step's stage name"),
	"status":     enum("pending: claim it; claimed: being worked on", callStatuses...),
	"claimed_by": str("the agent holding the claim"),
}, "id", "status")

var runSchema = object("a run", js{
	"id":               str("the runId"),
	"flow":             str("the flow"),
	"kind":             enum("flow or agent", "flow", "agent"),
	"thread":           str("<channel>:<key>"),
	"requester":        str("who started it"),
	"status":           enum("the run's state", runStatuses...),
	"args":             freeObject("the flow's arguments"),
	"reason":           str("the request text (external content)"),
	"step_index":       integer("the next step", 0, 10000),
	"error_code":       str("why it ended, machine-readable"),
	"error_message":    str("why it ended"),
	"created_at":       str("RFC 3339"),
	"updated_at":       str("RFC 3339"),
	"link":             str("the run in the console"),
	"steps":            arr("the steps so far", stepSchema),
	"pending_actions":  arr("what it waits for", actionSchema),
	"pendingAgentCall": nullable(agentCallRefSchema),
}, "id", "flow", "kind", "status", "steps", "pending_actions", "pendingAgentCall")

var runMetaSchema = object("a run (metadata; get_run has the steps)", js{
	"id":              str("the runId"),
	"flow":            str("the flow"),
	"kind":            enum("flow or agent", "flow", "agent"),
	"thread":          str("<channel>:<key>"),
	"requester":       str("who started it"),
	"status":          enum("the run's state", runStatuses...),
	"error_code":      str("why it ended"),
	"created_at":      str("RFC 3339"),
	"updated_at":      str("RFC 3339"),
	"pending_actions": integer("how many actions it waits for", 0, 1000),
}, "id", "flow", "status")

// compileSchema compiles a schema written here; a mistake is a bug.
func compileSchema(name string, s js) *jsonschema.Schema {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		panic(err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://mcp/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		panic(err)
	}
	out, err := c.Compile(url)
	if err != nil {
		panic(fmt.Sprintf("mcp: schema %s: %v", name, err))
	}
	return out
}

// validateInput checks raw tool arguments against a compiled input
// schema; the message names the first offending member.
func validateInput(s *jsonschema.Schema, raw json.RawMessage) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := core.CheckJSON(raw); err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %v", err)
	}
	if err := s.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			return nil, err
		}
		leaf := ve
		for len(leaf.Causes) > 0 {
			leaf = leaf.Causes[0]
		}
		msg := leaf.ErrorKind.LocalizedString(message.NewPrinter(language.English))
		if loc := strings.Join(leaf.InstanceLocation, "."); loc != "" {
			msg = loc + ": " + msg
		}
		return nil, errors.New(msg)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("arguments must be an object")
	}
	return m, nil
}
