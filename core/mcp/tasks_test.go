package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// rpc26 sends one 2026-07-28 request to /mcp on base (the test server by
// default) and returns the decoded reply. tasks says whether the request
// declares the Tasks extension.
func rpc26(t *testing.T, base, token, method string, params map[string]any, tasks bool, extraMeta ...any) (int, map[string]any) {
	t.Helper()
	if base == "" {
		base = theEnv.url
	}
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}}}
	if tasks {
		caps["extensions"] = map[string]any{extTasks: map[string]any{}}
	}
	meta := map[string]any{metaProtocolVersion: "2026-07-28", metaClientCapabilities: caps, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}
	for i := 0; i+1 < len(extraMeta); i += 2 {
		meta[extraMeta[i].(string)] = extraMeta[i+1]
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = meta
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	name := ""
	if n, ok := params["name"].(string); ok {
		name = n
	}
	if id, ok := params["taskId"].(string); ok {
		name = id
	}
	req, _ := http.NewRequest(http.MethodPost, base+PathExternal, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %d, not JSON: %v", method, res.StatusCode, err)
	}
	return res.StatusCode, out
}

func resultOf(t *testing.T, out map[string]any) map[string]any {
	t.Helper()
	r, ok := out["result"].(map[string]any)
	if !ok {
		t.Fatalf("no result: %v", out)
	}
	return r
}

func rpcErr(out map[string]any) (float64, string) {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(float64)
	msg, _ := e["message"].(string)
	return code, msg
}

// taskGet polls tasks/get until the task has status (bounded).
func taskGet(t *testing.T, base, token, id string, statuses ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for {
		_, out := rpc26(t, base, token, "tasks/get", map[string]any{"taskId": id}, true)
		r := resultOf(t, out)
		for _, s := range statuses {
			if r["status"] == s {
				if r["resultType"] != "complete" {
					t.Fatalf("tasks/get resultType %v", r["resultType"])
				}
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %v, want %v", id, r["status"], statuses)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func approve(t *testing.T, run string) {
	t.Helper()
	as, _, err := theEnv.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: run, Status: approvals.StatusPending})
	if err != nil || len(as) != 1 {
		t.Fatalf("approvals of %s: %v %v", run, as, err)
	}
	if _, err := theEnv.eng.Decide(context.Background(), core.Actor{ID: "console:alice"}, "console",
		core.Decision{ApprovalID: as[0].ID, Action: approvals.ActionApprove, Scope: approvals.ScopeCall, Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
}

func toolResult(t *testing.T, r map[string]any) map[string]any {
	t.Helper()
	res, _ := r["result"].(map[string]any)
	sc, _ := res["structuredContent"].(map[string]any)
	if sc == nil {
		t.Fatalf("no tool result in %v", r)
	}
	return sc
}

// TestFlowTaskLifecycle: a client declaring the Tasks extension gets a
// stored task for a flow that waits for an approval; tasks/get follows it
// (on another server instance too: a restart or another replica) to the
// finished run; nobody else reads it; a client without the extension keeps
// the run as the result.
func TestFlowTaskLifecycle(t *testing.T) {
	t.Parallel()
	_, out := rpc26(t, "", adminToken, "tools/call", map[string]any{"name": "flow", "arguments": map[string]any{"flowName": "deploy", "intent": "task 1.0"}}, true,
		"traceparent", trace)
	task := resultOf(t, out)
	id, _ := task["taskId"].(string)
	if task["resultType"] != "task" || task["status"] != "working" || !strings.HasPrefix(id, "tsk_") || task["ttlMs"] != float64(DefaultTaskTTL.Milliseconds()) {
		t.Fatalf("flow with tasks: %v", task)
	}
	stored, err := theEnv.store.MCPTaskGet(context.Background(), id)
	if err != nil || stored.TraceParent != trace || stored.Actor != "console:admin" {
		t.Fatalf("stored task %+v %v", stored, err)
	}
	if tp, err := theEnv.store.RunTraceGet(context.Background(), stored.RunID); err != nil || tp != trace {
		t.Fatalf("the run's trace context: %q %v", tp, err)
	}
	ap, _ := task["_meta"].(map[string]any)[approvalMeta].(map[string]any)
	if ap == nil || !strings.HasPrefix(ap["link"].(string), "https://ops.example.com/approvals/") || ap["expiresAt"] == "" ||
		!strings.Contains(task["statusMessage"].(string), ap["link"].(string)) {
		t.Fatalf("the task does not name the approval: %v", task)
	}
	// A restart, or another replica: a new server over the same store.
	other, err := New(Options{Engine: theEnv.eng, Store: theEnv.store, StateKey: testKey, PublicURL: "https://ops.example.com",
		Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}}, Flows: flowsOf(testFlows)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(other.Routes()[PathExternal])
	defer hs.Close()
	taskGet(t, hs.URL, adminToken, id, "working")
	// Nobody else reads it; a client without the extension may not.
	if _, out := rpc26(t, "", readerToken, "tasks/get", map[string]any{"taskId": id}, true); func() bool {
		c, _ := rpcErr(out)
		data, _ := out["error"].(map[string]any)["data"].(map[string]any)
		return c != codeInvalidParams || data["code"] != "not_found"
	}() {
		t.Fatalf("another token (the authority's use_task: only its creator): %v", out)
	}
	if _, out := rpc26(t, "", adminToken, "tasks/get", map[string]any{"taskId": id}, false); func() bool { c, _ := rpcErr(out); return c != codeMissingCapability }() {
		t.Fatalf("without the extension: %v", out)
	}
	if _, out := rpc26(t, "", adminToken, "tasks/get", map[string]any{"taskId": "tsk_nope"}, true); func() bool {
		c, m := rpcErr(out)
		return c != codeInvalidParams || !strings.Contains(m, "not found")
	}() {
		t.Fatalf("unknown task: %v", out)
	}
	approve(t, stored.RunID)
	done := taskGet(t, "", adminToken, id, "completed")
	if run := toolResult(t, done)["run"].(map[string]any); run["status"] != "succeeded" || run["id"] != stored.RunID {
		t.Fatalf("completed task: %v", done)
	}
	// Without the extension: the run, as before.
	_, out = rpc26(t, "", adminToken, "tools/call", map[string]any{"name": "flow", "arguments": map[string]any{"flowName": "deploy", "intent": "task 1.1"}}, false)
	plain := resultOf(t, out)
	if plain["resultType"] == "task" || plain["structuredContent"] == nil {
		t.Fatalf("without tasks: %v", plain)
	}
	run := plain["structuredContent"].(map[string]any)["run"].(map[string]any)
	c := connect(t, adminToken)
	c.mustOK("cancel_run", map[string]any{"runId": run["id"]})
}

// TestTaskOffersApproverTheConsole: to the person who may approve, the
// task is input_required with a URL elicitation of the approval's console
// page (they decide there, as themselves); tasks/cancel cancels the run.
func TestTaskOffersApproverTheConsole(t *testing.T) {
	t.Parallel()
	_, out := rpc26(t, "", aliceToken, "tools/call", map[string]any{"name": "flow", "arguments": map[string]any{"flowName": "deploy", "intent": "approver 1.0"}}, true)
	task := resultOf(t, out)
	id := task["taskId"].(string)
	if task["status"] != "input_required" {
		t.Fatalf("for an approver: %v", task)
	}
	var elicit map[string]any
	for k, v := range task["inputRequests"].(map[string]any) {
		if strings.HasPrefix(k, "approval-") {
			elicit = v.(map[string]any)
		}
	}
	params, _ := elicit["params"].(map[string]any)
	if elicit["method"] != "elicitation/create" || params["mode"] != "url" || !strings.HasPrefix(params["url"].(string), "https://ops.example.com/approvals/") {
		t.Fatalf("inputRequests: %v", task["inputRequests"])
	}
	// Opening the page decides nothing: the task still waits.
	_, out = rpc26(t, "", aliceToken, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"approval-x": map[string]any{"action": "accept"}}}, true)
	if resultOf(t, out)["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v", out)
	}
	taskGet(t, "", aliceToken, id, "input_required")
	_, out = rpc26(t, "", aliceToken, "tasks/cancel", map[string]any{"taskId": id}, true)
	if resultOf(t, out)["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v", out)
	}
	taskGet(t, "", aliceToken, id, "cancelled")
}

// TestTaskAnswersAQuestion: a task over a run waiting for an answer asks
// it as a form (inputRequests); tasks/update with the form's answer
// answers the question and the run goes on to its end.
func TestTaskAnswersAQuestion(t *testing.T) {
	t.Parallel()
	run := agentRun(t, "console:admin", "ask me", core.RunWaitingInput)
	now := time.Now()
	id := newTaskID()
	if err := theEnv.store.MCPTaskCreate(context.Background(), &core.MCPTask{ID: id, Actor: "console:admin", Endpoint: PathExternal, Tool: "flow",
		RunID: run.ID, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	task := taskGet(t, "", adminToken, id, "input_required")
	req, _ := task["inputRequests"].(map[string]any)["ask-0"].(map[string]any)
	params, _ := req["params"].(map[string]any)
	if params["mode"] != "form" || params["requestedSchema"] == nil {
		t.Fatalf("the question as a form: %v", task)
	}
	_, out := rpc26(t, "", adminToken, "tasks/update", map[string]any{"taskId": id,
		"inputResponses": map[string]any{"ask-0": map[string]any{"action": "accept", "content": map[string]any{"env": "prod"}}}}, true)
	if resultOf(t, out)["resultType"] != "complete" {
		t.Fatalf("tasks/update: %v", out)
	}
	done := taskGet(t, "", adminToken, id, "completed")
	if r := toolResult(t, done)["run"].(map[string]any); r["status"] != "succeeded" {
		t.Fatalf("answered: %v", done)
	}
	// An expired handle is refused.
	old := newTaskID()
	_ = theEnv.store.MCPTaskCreate(context.Background(), &core.MCPTask{ID: old, Actor: "console:admin", Endpoint: PathExternal, Tool: "flow",
		RunID: run.ID, CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)})
	if _, out := rpc26(t, "", adminToken, "tasks/get", map[string]any{"taskId": old}, true); func() bool {
		c, m := rpcErr(out)
		return c != codeInvalidParams || !strings.Contains(m, "expired")
	}() {
		t.Fatalf("expired task: %v", out)
	}
}

// TestAgentToolCallTask: call_agent_tool that waits for an approval is a
// task for a client with the extension; tasks/get polls the same tool
// call and completes with its output once approved; notifications/tasks
// on a subscriptions/listen stream says each change.
func TestAgentToolCallTask(t *testing.T) {
	t.Parallel()
	c := connect(t, adminToken)
	run := c.mustOK("flow", map[string]any{"flowName": "triage", "intent": "task-svc"}).obj("run")
	runID := run["id"].(string)
	callID := run["pendingAgentCall"].(map[string]any)["id"].(string)
	own := c.mustOK("claim_agent_call", map[string]any{"runId": runID, "callId": callID, "claimId": "task"}).out["ownerToken"].(string)
	_, out := rpc26(t, "", adminToken, "tools/call", map[string]any{"name": "call_agent_tool", "arguments": map[string]any{"runId": runID, "callId": callID,
		"ownerToken": own, "toolCallId": "tk-1", "toolId": "deploy", "input": map[string]any{"service": "task-svc", "version": "9"}}}, true)
	task := resultOf(t, out)
	id, _ := task["taskId"].(string)
	if task["resultType"] != "task" || task["status"] != "working" {
		t.Fatalf("call_agent_tool with tasks: %v", task)
	}
	events := listen(t, id)
	if ev := <-events; ev["method"] != "notifications/subscriptions/acknowledged" {
		t.Fatalf("first: %v", ev)
	}
	if ev := <-events; ev["method"] != "notifications/tasks" || ev["params"].(map[string]any)["status"] != "working" {
		t.Fatalf("second: %v", ev)
	}
	approve(t, runID)
	var last map[string]any
	for ev := range events {
		last = ev
	}
	p, _ := last["params"].(map[string]any)
	if p["status"] != "completed" || p["_meta"].(map[string]any)[metaSubscriptionID] == nil {
		t.Fatalf("last notification: %v", last)
	}
	if o := toolResult(t, p)["output"].(map[string]any); o["status"] != "succeeded" || o["toolCallId"] != "tk-1" {
		t.Fatalf("the tool's output: %v", p)
	}
	if got := taskGet(t, "", adminToken, id, "completed"); toolResult(t, got)["output"].(map[string]any)["status"] != "succeeded" {
		t.Fatalf("tasks/get: %v", got)
	}
	if n := theEnv.deploy.countRun(runID); n != 1 {
		t.Fatalf("deploy ran %d times", n)
	}
	c.mustOK("fail_agent_call", map[string]any{"runId": runID, "callId": callID, "ownerToken": own, "message": "done"})
}

// listen opens subscriptions/listen for task id and returns its messages;
// the channel closes when the server ends the stream.
func listen(t *testing.T, id string) <-chan map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"taskIds": []string{id, "tsk_not_mine"}},
		"_meta": map[string]any{metaProtocolVersion: "2026-07-28",
			metaClientCapabilities: map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, theEnv.url+PathExternal, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan map[string]any, 16)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]any
				if json.Unmarshal([]byte(d), &m) == nil {
					out <- m
				}
			}
		}
	}()
	return out
}

func TestTraceparentIsValidated(t *testing.T) {
	t.Parallel()
	for tp, ok := range map[string]bool{trace: true, "00-00000000000000000000000000000000-00f067aa0ba902b7-01": false,
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": false, "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7": false, "": false, fmt.Sprintf("%055d", 0): false} {
		if validTraceparent(tp) != ok {
			t.Errorf("%q: want %v", tp, ok)
		}
	}
}
