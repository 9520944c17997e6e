package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/npmtest"
)

// goConstants finds, in the module's non-test Go files under dirs, every
// string constant declared with one of the named types (bare or
// package-qualified): the statuses the engine can write, wherever a
// package declares one.
func goConstants(t *testing.T, types []string, dirs ...string) map[string][]string {
	t.Helper()
	root := filepath.Dir(npmtest.Dir(t))
	root = filepath.Dir(root) // testdata/npm → the module root
	want := map[string]bool{}
	for _, ty := range types {
		want[ty] = true
	}
	out := map[string][]string{}
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join(root, d), func(p string, de os.DirEntry, err error) error {
			if err != nil || de.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(gotoken.NewFileSet(), p, nil, 0)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != gotoken.CONST {
					continue
				}
				for _, sp := range gd.Specs {
					vs := sp.(*ast.ValueSpec)
					name := ""
					switch ty := vs.Type.(type) {
					case *ast.Ident:
						name = ty.Name
					case *ast.SelectorExpr:
						name = ty.Sel.Name
					}
					if !want[name] {
						continue
					}
					for _, v := range vs.Values {
						if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == gotoken.STRING {
							s, _ := strconv.Unquote(lit.Value)
							out[name] = append(out[name], s)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func enumOf(t *testing.T, s js, path ...string) []string {
	t.Helper()
	var cur any = s
	for _, p := range path {
		cur = cur.(js)[p]
	}
	var out []string
	for _, v := range cur.(js)["enum"].([]any) {
		out = append(out, v.(string))
	}
	return out
}

// TestSchemaEnumsCoverGoConstants: every status a package of the module
// declares for runs, steps, agent calls and their tool calls is in the
// output schemas' enums (a status the engine writes but the schema lacks
// is what made Claude Code refuse get_run on a question: waiting_input).
func TestSchemaEnumsCoverGoConstants(t *testing.T) {
	t.Parallel()
	consts := goConstants(t, []string{"RunStatus", "StepStatus", "AgentCallStatus", "AgentReceiptStatus"}, "core", "approvals")
	for ty, enum := range map[string][]string{
		"RunStatus":          enumOf(t, runSchema, "properties", "status"),
		"StepStatus":         enumOf(t, stepSchema, "properties", "status"),
		"AgentCallStatus":    enumOf(t, agentCallSchema, "properties", "status"),
		"AgentReceiptStatus": enumOf(t, receiptSchema, "properties", "status"),
	} {
		if len(consts[ty]) < 5 {
			t.Fatalf("found only %v of %s: the scan is broken", consts[ty], ty)
		}
		for _, c := range consts[ty] {
			if !slices.Contains(enum, c) {
				t.Errorf("%s %q is declared in Go but missing from the output schema's enum %v", ty, c, enum)
			}
		}
	}
	if got := enumOf(t, runMetaSchema, "properties", "status"); !slices.Equal(got, enumOf(t, runSchema, "properties", "status")) {
		t.Errorf("list_runs and get_run disagree on run statuses: %v", got)
	}
}

// jsonFields lists the JSON member names of a struct type (its exported,
// non-"-" fields).
func jsonFields(ty reflect.Type) (all, always []string) {
	for f := range ty.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		all = append(all, name)
		if !strings.Contains(opts, "omitempty") {
			always = append(always, name)
		}
	}
	return all, always
}

// TestViewsMatchSchemas: each result type's JSON members are exactly its
// schema's properties, and the schema requires only members the type
// always writes.
func TestViewsMatchSchemas(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v any
		s js
	}{
		{runView{}, runSchema}, {stepView{}, stepSchema}, {actionView{}, actionSchema}, {questionItem{}, questionSchema},
		{agentCallRef{}, agentCallRefSchema}, {runMeta{}, runMetaSchema}, {flowView{}, workflowSchema}, {serviceView{}, serviceSchema},
		{agentCallView{}, agentCallSchema}, {receiptView{}, receiptSchema}, {core.AgentAsset{}, assetSchema},
		{artifactView{}, artifactSchema}, {recordView{}, recordSchema},
		{interaction{}, runSchemaOf(t, "interact", "interaction")},
	} {
		ty := reflect.TypeOf(c.v)
		all, always := jsonFields(ty)
		props := c.s["properties"].(js)
		for _, f := range all {
			if _, ok := props[f]; !ok {
				t.Errorf("%s writes %q, which its schema does not declare", ty, f)
			}
		}
		for p := range props {
			if !slices.Contains(all, p) {
				t.Errorf("%s's schema declares %q, which the type never writes", ty, p)
			}
		}
		if req, ok := c.s["required"].([]any); ok {
			for _, r := range req {
				// get_artifact always sets the content (lists leave it out).
				if !slices.Contains(always, r.(string)) && !(ty == reflect.TypeOf(artifactView{}) && r == "content") {
					t.Errorf("%s's schema requires %q, which the type may omit", ty, r)
				}
			}
		}
	}
}

// runSchemaOf is a tool's output schema member.
func runSchemaOf(t *testing.T, tool, member string) js {
	t.Helper()
	for _, tl := range theEnv.srv.tools() {
		if tl.name == tool {
			return tl.out["properties"].(js)[member].(js)
		}
	}
	t.Fatalf("no tool %s", tool)
	return nil
}

// outputSchemas compiles every tool's declared output schema, as a client
// sees it.
func outputSchemas(t *testing.T) map[string]*jsonschema.Schema {
	out := map[string]*jsonschema.Schema{}
	for _, tl := range theEnv.srv.tools() {
		out[tl.name] = compileSchema(tl.name+"-out-test", toJS(t, lean(tl.out, 0)))
	}
	return out
}

func validateOut(t *testing.T, s *jsonschema.Schema, what string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err := s.Validate(doc); err != nil {
		t.Errorf("%s does not match its output schema: %v\n%s", what, err, b)
	}
}

// TestEveryStatusShapeMatchesSchemas renders a run in every run status
// with a step in every step status, an agent call in every status with a
// tool call in every status, and checks each against the output schema
// of each tool that returns it.
func TestEveryStatusShapeMatchesSchemas(t *testing.T) {
	t.Parallel()
	schemas := outputSchemas(t)
	consts := goConstants(t, []string{"RunStatus", "StepStatus", "AgentCallStatus", "AgentReceiptStatus"}, "core", "approvals")
	now := time.Now()
	for _, rs := range consts["RunStatus"] {
		r := &core.Run{ID: "synthetic-" + rs, Flow: "agent:ops", Thread: core.Thread{Channel: "console", Key: "x"}, Requester: "console:admin",
			Status: core.RunStatus(rs), CreatedAt: now, UpdatedAt: now}
		for i, ss := range consts["StepStatus"] {
			r.Steps = append(r.Steps, core.Step{Index: i, Tool: "deploy", Status: core.StepStatus(ss), StartedAt: &now})
		}
		v, err := theEnv.srv.runView(context.Background(), caller{actor: core.Actor{ID: "console:admin"}}, r)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range []string{"get_run", "flow", "cancel_run", "answer_ask", "complete_agent_call", "fail_agent_call"} {
			validateOut(t, schemas[tool], tool+" of a "+rs+" run", runOut{Run: v})
		}
		validateOut(t, schemas["list_runs"], "list_runs of a "+rs+" run", map[string]any{"runs": []runMeta{newRunMeta(r, 1)}})
	}
	for _, cs := range consts["AgentCallStatus"] {
		c := &core.AgentCall{ID: "c", RunID: "r", Status: core.AgentCallStatus(cs), CreatedAt: now}
		var rs []core.AgentReceipt
		for _, st := range consts["AgentReceiptStatus"] {
			rs = append(rs, core.AgentReceipt{ToolCallID: st, ToolID: "deploy", Status: core.AgentReceiptStatus(st)})
		}
		v := theEnv.srv.callView(c, rs)
		validateOut(t, schemas["get_agent_call"], "an agent call "+cs, map[string]any{"agentCall": v})
		validateOut(t, schemas["claim_agent_call"], "a claimed call "+cs, map[string]any{"task": v, "ownerToken": "og_x"})
		for _, r := range rs {
			validateOut(t, schemas["call_agent_tool"], "a tool call "+string(r.Status), map[string]any{"output": theEnv.srv.receiptView(&r)})
		}
	}
	_ = approvals.StatusPending
}

// TestStructuredOutputInEveryState drives real runs into every state the
// engine reaches — flow runs waiting for an approval, an agent task, a
// question; approved, rejected, cancelled, failed, interrupted; agent
// runs waiting for an answer or an approval, answered, failed — and calls
// every tool that shows them. client.call validates each structured
// result against the tool's declared output schema, as Claude Code does.
func TestStructuredOutputInEveryState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := connect(t, adminToken)
	alice := core.Actor{ID: "console:alice"}
	var runs []string
	flow := func(name, intent string, statuses ...core.RunStatus) string {
		id := c.mustOK("flow", map[string]any{"flowName": name, "intent": intent}).obj("run")["id"].(string)
		waitRun(t, id, statuses...)
		runs = append(runs, id)
		return id
	}
	decide := func(run string, action approvals.Action) {
		as, _, err := theEnv.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: run, Status: approvals.StatusPending})
		if err != nil || len(as) != 1 {
			t.Fatalf("approvals of %s: %v %v", run, as, err)
		}
		if _, err := theEnv.eng.Decide(ctx, alice, "console", core.Decision{ApprovalID: as[0].ID, Action: action, Scope: approvals.ScopeCall, Reason: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	flow("status", "states", core.RunSucceeded)
	waiting := flow("deploy", "states 1.0", core.RunWaitingApproval)
	approved := flow("deploy", "states 1.1", core.RunWaitingApproval)
	decide(approved, approvals.ActionApprove)
	waitRun(t, approved, core.RunSucceeded)
	rejected := flow("deploy", "states 1.2", core.RunWaitingApproval)
	decide(rejected, approvals.ActionReject)
	waitRun(t, rejected, core.RunRejected)
	cancelled := flow("deploy", "states 1.3", core.RunWaitingApproval)
	c.mustOK("cancel_run", map[string]any{"runId": cancelled})
	interrupted := flow("deploy", "states 1.4", core.RunWaitingApproval)
	r := waitRun(t, interrupted, core.RunWaitingApproval)
	st := r.Steps[0]
	st.Status, st.Error = core.StepInterrupted, "the outcome is unknown"
	if err := theEnv.store.RunCheckpoint(ctx, core.Checkpoint{RunID: interrupted, ExpectStatus: []core.RunStatus{core.RunWaitingApproval},
		Now: time.Now(), Status: core.RunInterrupted, Release: true, Step: &st, ErrorCode: "interrupted", ErrorMessage: "crashed mid-dispatch"}); err != nil {
		t.Fatal(err)
	}
	// An agent task: pending, claimed with a tool call waiting for an
	// approval, then failed; another completed.
	task := flow("triage", "states-svc", core.RunWaitingInput)
	call := c.mustOK("get_run", map[string]any{"runId": task}).obj("run", "pendingAgentCall")["id"].(string)
	c.mustOK("get_agent_call", map[string]any{"runId": task, "callId": call})
	own := c.mustOK("claim_agent_call", map[string]any{"runId": task, "callId": call, "claimId": "states"}).out["ownerToken"].(string)
	ref := map[string]any{"runId": task, "callId": call, "ownerToken": own}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range ref {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	c.mustOK("call_agent_tool", with(map[string]any{"toolCallId": "s2", "toolId": "status", "input": map[string]any{"service": "x"}}))
	if r := c.call("call_agent_tool", with(map[string]any{"toolCallId": "s3", "toolId": "nope"})); !r.isError {
		t.Fatalf("an unknown tool: %v", r.out)
	}
	c.mustOK("call_agent_tool", with(map[string]any{"toolCallId": "s1", "toolId": "deploy", "input": map[string]any{"service": "x", "version": "1"}}))
	c.mustOK("get_agent_call", map[string]any{"runId": task, "callId": call})
	c.mustOK("fail_agent_call", with(map[string]any{"message": "gave up"}))
	waitRun(t, task, core.RunFailed)

	// Agent runs: a question (its step waiting_input), answered; an
	// approval; a failed model call; a plain answer.
	asked := agentRun(t, "console:admin", "ask me something", core.RunWaitingInput).ID
	answered := agentRun(t, "console:admin", "ask again", core.RunWaitingInput).ID
	agentApproval := agentRun(t, "console:admin", "deploy it", core.RunWaitingApproval).ID
	failed := agentRun(t, "console:admin", "fail now", core.RunFailed).ID
	hello := agentRun(t, "console:admin", "hi", core.RunSucceeded).ID
	got := c.mustOK("get_run", map[string]any{"runId": asked}).obj("run")
	if got["kind"] != "agent" || got["status"] != "waiting_input" {
		t.Fatalf("agent run = %v", got)
	}
	steps := got["steps"].([]any)
	if len(steps) != 1 || steps[0].(map[string]any)["status"] != "waiting_input" {
		t.Fatalf("steps = %v", steps)
	}
	c.mustOK("answer_ask", map[string]any{"runId": answered, "actionId": "ask-0", "answer": []any{map[string]any{"questionId": "env", "answer": "prod"}}})
	waitRun(t, answered, core.RunSucceeded)
	runs = append(runs, asked, answered, agentApproval, failed, hello)

	for _, id := range runs {
		got := c.mustOK("get_run", map[string]any{"runId": id}).obj("run")
		for _, a := range got["pending_actions"].([]any) {
			act := a.(map[string]any)
			if act["kind"] == "agent_call" {
				continue
			}
			c.call("interact", map[string]any{"runId": id, "actionId": act["id"]})
			if act["kind"] == "approval" {
				c.mustErr(string(core.DecisionHumanRequired), "answer_ask", map[string]any{"runId": id, "actionId": act["id"], "answer": map[string]any{"isConfirmed": true}})
			}
		}
		for _, s := range got["steps"].([]any) {
			if stage, _ := s.(map[string]any)["stage"].(string); stage != "" {
				c.call("get_artifact", map[string]any{"artifactId": id + "/" + stage})
			}
		}
		if st := core.RunStatus(got["status"].(string)); st.Final() {
			c.mustErr("conflict", "cancel_run", map[string]any{"runId": id})
		}
	}
	c.mustOK("list_runs", map[string]any{})
	for _, f := range []string{"deploy", "triage", "status", "agent:ops"} {
		c.mustOK("list_runs", map[string]any{"flowName": f})
	}
	c.mustOK("list_artifacts", map[string]any{"limit": 50})
	c.mustOK("cancel_run", map[string]any{"runId": waiting})
	c.mustOK("cancel_run", map[string]any{"runId": agentApproval})
	c.mustOK("cancel_run", map[string]any{"runId": asked})
}
