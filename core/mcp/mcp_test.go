package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

var externalTools = []string{"answer_ask", "call_agent_tool", "cancel_run", "claim_agent_call", "complete_agent_call", "fail_agent_call",
	"flow", "get_agent_call", "get_artifact", "get_record", "get_run", "interact", "list_artifacts", "list_runs", "list_workflows",
	"read_agent_asset", "status"}

var internalTools = []string{"answer_ask", "cancel_run", "flow", "get_artifact", "get_record", "get_run", "interact", "list_artifacts",
	"list_runs", "list_workflows", "status"}

func names(ts []*sdk.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	sort.Strings(out)
	return out
}

// Every protocol version the SDK speaks: the same tools, a run started
// and read; sessions exactly where the version has them.
func TestEveryProtocolVersion(t *testing.T) {
	t.Parallel()
	for _, v := range sdk.SupportedProtocolVersions() {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			c := connect(t, adminToken, clientOpts{version: v})
			if got := c.cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s", got, v)
			}
			if got := names(c.tools()); !slices.Equal(got, externalTools) {
				t.Fatalf("tools = %v", got)
			}
			st := c.mustOK("status", map[string]any{})
			if st.obj("service")["endpoint"] != PathExternal || st.obj("service")["store"] != "ok" {
				t.Fatalf("status = %v", st.out)
			}
			run := c.mustOK("flow", map[string]any{"flowName": "status", "intent": "api"}).obj("run")
			got := c.mustOK("get_run", map[string]any{"runId": run["id"]}).obj("run")
			if got["flow"] != "status" || got["kind"] != "flow" {
				t.Fatalf("run = %v", got)
			}
			stateless := v >= statelessFrom
			if sessions := c.rt.sessions.Load(); stateless != (sessions == 0) {
				t.Fatalf("version %s: %d responses with Mcp-Session-Id", v, sessions)
			}
		})
	}
}

func TestEndpointsTakeOnlyTheirTokens(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		path, token string
		ok          bool
	}{
		{PathExternal, adminToken, true}, {PathCodex, agentToken, true},
		{PathExternal, studioToken, false}, {PathCodex, studioToken, false},
		{PathInternal, studioToken, true}, {PathStudio, studioToken, true},
		{PathInternal, adminToken, false}, {PathStudio, agentToken, false},
		{PathExternal, "nope", false},
	} {
		_, err := tryConnect(t, c.token, clientOpts{path: c.path})
		if (err == nil) != c.ok {
			t.Errorf("%s with %s: err %v, want ok=%v", c.path, c.token, err, c.ok)
		}
	}
	in := connect(t, studioToken, clientOpts{path: PathInternal})
	if got := names(in.tools()); !slices.Equal(got, internalTools) {
		t.Fatalf("internal tools = %v", got)
	}
	if st := in.mustOK("status", map[string]any{}); st.obj("service")["endpoint"] != PathInternal {
		t.Fatal(st.out)
	}
	// Codex sees the same tools, some described its way.
	cx := connect(t, adminToken, clientOpts{path: PathCodex})
	ts := cx.tools()
	if got := names(ts); !slices.Equal(got, externalTools) {
		t.Fatalf("codex tools = %v", got)
	}
	for _, tl := range ts {
		if tl.Name == "flow" && !strings.HasPrefix(tl.Description, "Start an opsgate flow") {
			t.Errorf("codex flow description = %q", tl.Description)
		}
	}
}

func TestOriginRules(t *testing.T) {
	t.Parallel()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, c := range []struct {
		path, token, origin string
		status              int
	}{
		{PathExternal, adminToken, "", 200},
		{PathExternal, adminToken, "https://ops.example.com", 200},
		{PathExternal, adminToken, "http://localhost:6274", 200},
		{PathExternal, adminToken, "https://evil.example", 403},
		{PathExternal, adminToken, "http://localhost:9999", 403},
		{PathExternal, adminToken, "null", 403},
		{PathInternal, studioToken, "http://127.0.0.1:5173", 200},
		{PathInternal, studioToken, "http://localhost:3000", 200},
		{PathInternal, studioToken, "https://ops.example.com", 403},
		{PathStudio, studioToken, "https://evil.example", 403},
	} {
		res, body := post(t, c.path, c.token, init, "Origin", c.origin)
		if res.StatusCode != c.status {
			t.Errorf("%s from %q: %d %s, want %d", c.path, c.origin, res.StatusCode, body, c.status)
		}
		if c.status == 403 {
			var m struct {
				Error struct{ Code int } `json:"error"`
			}
			if json.Unmarshal(body, &m) != nil || m.Error.Code != -32600 {
				t.Errorf("403 body is not a JSON-RPC error: %s", body)
			}
		}
	}
	// An internal endpoint refuses a page's own origin unless configured,
	// and programs only from loopback (the test client is loopback).
	if !theEnv.srv.checkOrigin(endpoints[2], &http.Request{RemoteAddr: "127.0.0.1:5000", Header: http.Header{}}) ||
		theEnv.srv.checkOrigin(endpoints[2], &http.Request{RemoteAddr: "10.1.2.3:5000", Header: http.Header{}}) {
		t.Error("internal endpoint without Origin: loopback only")
	}
}

func TestUnknownMethodIsJSONRPC(t *testing.T) {
	t.Parallel()
	res, body := post(t, PathExternal, adminToken, `{"jsonrpc":"2.0","id":7,"method":"tools/frobnicate","params":{}}`)
	var m struct {
		ID    int `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if res.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &m) != nil || m.Error.Code != -32601 || m.ID != 7 {
		t.Fatalf("old protocol: %d %s", res.StatusCode, body)
	}
	res, body = post(t, PathExternal, adminToken, `{"jsonrpc":"2.0","id":8,"method":"nope","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
		"MCP-Protocol-Version", "2026-07-28")
	if json.Unmarshal(body, &m) != nil || m.Error.Code != -32601 || m.ID != 8 {
		t.Fatalf("2026-07-28: %d %s", res.StatusCode, body)
	}
	if res, _ := post(t, PathExternal, adminToken, `{"jsonrpc":"2.0","method":"notifications/whatever"}`); res.StatusCode != http.StatusAccepted {
		t.Fatalf("unknown notification: %d", res.StatusCode)
	}
}

func TestSessionStaysWithItsEndpoint(t *testing.T) {
	t.Parallel()
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	res, _ := post(t, PathExternal, adminToken, init)
	sid := res.Header.Get("Mcp-Session-Id")
	if !strings.HasPrefix(sid, "mcp-") {
		t.Fatalf("session id %q", sid)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	res, body := post(t, PathCodex, adminToken, list, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25")
	if res.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "another MCP endpoint") {
		t.Fatalf("session on another endpoint: %d %s", res.StatusCode, body)
	}
	post(t, PathExternal, adminToken, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25")
	if res, body := post(t, PathExternal, adminToken, list, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"); res.StatusCode != 200 || !strings.Contains(string(body), "list_workflows") {
		t.Fatalf("own endpoint: %d %s", res.StatusCode, body)
	}
	// Another user may not ride the session.
	if res, _ := post(t, PathExternal, agentToken, list, "Mcp-Session-Id", sid, "MCP-Protocol-Version", "2025-11-25"); res.StatusCode != http.StatusForbidden {
		t.Fatalf("another token on the session: %d", res.StatusCode)
	}
}

func TestWellKnownOAuthIsJSON404(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource/mcp"} {
		res, err := http.Get(theEnv.url + p)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		err = json.NewDecoder(res.Body).Decode(&m)
		res.Body.Close()
		if res.StatusCode != 404 || err != nil || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %v", p, res.StatusCode, err)
		}
	}
	s, err := New(Options{Engine: theEnv.eng, Store: theEnv.store, StateKey: testKey, PublicURL: "https://ops.example.com",
		OAuth: &OAuth{AuthorizationServers: []string{"https://auth.example.com"}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	s.Routes()[PathWellKnown].ServeHTTP(rec, httptest.NewRequest("GET", "/.well-known/oauth-protected-resource/mcp", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"resource":"https://ops.example.com/mcp"`) || !strings.Contains(rec.Body.String(), "auth.example.com") {
		t.Fatalf("metadata: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	s.Routes()[PathExternal].ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", nil))
	if rec.Code != 401 || !strings.Contains(rec.Header().Get("WWW-Authenticate"), "resource_metadata") {
		t.Fatalf("401 challenge: %d %v", rec.Code, rec.Header())
	}
}

func TestSchemaViolationsAreBusinessErrors(t *testing.T) {
	t.Parallel()
	c := connect(t, adminToken)
	c.mustErr("invalid_input", "get_run", map[string]any{})
	c.mustErr("invalid_input", "get_run", map[string]any{"runId": "x", "extra": 1})
	c.mustErr("invalid_input", "get_run", map[string]any{"runId": 5})
	c.mustErr("invalid_input", "list_artifacts", map[string]any{"limit": 0})
	c.mustErr("invalid_input", "list_artifacts", map[string]any{"limit": 101})
	c.mustErr("invalid_input", "get_record", map[string]any{"recordId": "../1"})
	r := c.mustErr("invalid_input", "flow", map[string]any{"flowName": "status"})
	if !strings.Contains(r.out["error"].(map[string]any)["message"].(string), "intent") {
		t.Fatalf("message should name the member: %v", r.out)
	}
}

func TestWorkflowTools(t *testing.T) {
	t.Parallel()
	c := connect(t, adminToken)
	wf := c.mustOK("list_workflows", map[string]any{}).out["workflows"].([]any)
	if len(wf) != 3 {
		t.Fatalf("workflows = %v", wf)
	}
	dep := wf[0].(map[string]any)
	if dep["usage"] != "deploy <service> <version> [env=staging]" || fmt.Sprint(dep["stages"]) != "[deploy]" {
		t.Fatalf("deploy = %v", dep)
	}
	tri := wf[2].(map[string]any)
	if fmt.Sprint(tri["stages"]) != "[investigate status]" {
		t.Fatalf("triage = %v", tri)
	}
	c.mustErr("not_found", "flow", map[string]any{"flowName": "nope", "intent": "x"})
	c.mustErr("invalid_intent", "flow", map[string]any{"flowName": "deploy", "intent": "api"})
	// The whole command line works too.
	run := c.mustOK("flow", map[string]any{"flowName": "status", "intent": "status db"}).obj("run")
	if run["requester"] != "console:admin" || !strings.HasPrefix(run["thread"].(string), "console:mcp-") {
		t.Fatalf("run = %v", run)
	}
	done := waitRun(t, run["id"].(string), core.RunSucceeded)
	got := c.mustOK("get_run", map[string]any{"runId": done.ID}).obj("run")
	steps := got["steps"].([]any)
	if len(steps) != 1 || steps[0].(map[string]any)["stage"] != "status" || got["pendingAgentCall"] != nil {
		t.Fatalf("run = %v", got)
	}
	c.mustErr("not_found", "get_run", map[string]any{"runId": "nope"})
	runs := c.mustOK("list_runs", map[string]any{"flowName": "status"}).out["runs"].([]any)
	if len(runs) == 0 || runs[0].(map[string]any)["flow"] != "status" {
		t.Fatalf("runs = %v", runs)
	}
	if _, ok := runs[0].(map[string]any)["steps"]; ok {
		t.Fatal("lists carry metadata only")
	}
	// Cancel: an ended run conflicts, a waiting one is cancelled.
	c.mustErr("conflict", "cancel_run", map[string]any{"runId": done.ID})
	wait := c.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "api 1.0"}).obj("run")
	waitRun(t, wait["id"].(string), core.RunWaitingApproval)
	if got := c.mustOK("cancel_run", map[string]any{"runId": wait["id"]}).obj("run"); got["status"] != "cancelled" {
		t.Fatalf("cancel = %v", got)
	}
}

func TestScopesAndOwnRuns(t *testing.T) {
	t.Parallel()
	admin := connect(t, adminToken)
	agent := connect(t, agentToken)
	reader := connect(t, readerToken)
	ci := connect(t, ciToken)
	ro := connect(t, readOnlyToken)
	dora := connect(t, decideToken)

	adminRun := admin.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "web 2.0"}).obj("run")["id"].(string)
	agentRun := agent.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "api 2.0"}).obj("run")["id"].(string)
	waitRun(t, adminRun, core.RunWaitingApproval)
	waitRun(t, agentRun, core.RunWaitingApproval)

	// An agent token without a scopes key sees only its own runs.
	agent.mustErr("not_found", "get_run", map[string]any{"runId": adminRun})
	mine := agent.mustOK("get_run", map[string]any{"runId": agentRun}).obj("run")
	acts := mine["pending_actions"].([]any)
	if len(acts) != 1 || acts[0].(map[string]any)["kind"] != "approval" || acts[0].(map[string]any)["answerable"] != false ||
		acts[0].(map[string]any)["dry_run_preview"] != "would deploy (secret preview)" {
		t.Fatalf("own approval: %v", acts)
	}
	for _, r := range agent.mustOK("list_runs", map[string]any{}).out["runs"].([]any) {
		if r.(map[string]any)["requester"] != "agent:claude" {
			t.Fatalf("agent lists %v", r)
		}
	}
	ci.mustErr("not_found", "get_run", map[string]any{"runId": adminRun})
	// read on everything: all runs, previews of other threads included.
	other := reader.mustOK("get_run", map[string]any{"runId": adminRun}).obj("run")
	if p := other["pending_actions"].([]any)[0].(map[string]any)["dry_run_preview"]; p != "would deploy (secret preview)" {
		t.Fatalf("reader preview %v", p)
	}
	if st := agent.mustOK("status", map[string]any{}).obj("service"); st["readsAll"] != false {
		t.Fatal(st)
	}
	// Scopes gate tools.
	ro.mustErr("missing_scope", "flow", map[string]any{"flowName": "status", "intent": "x"})
	ro.mustOK("get_run", map[string]any{"runId": adminRun})
	dora.mustErr("missing_scope", "get_run", map[string]any{"runId": adminRun})
	dora.mustErr("missing_scope", "list_runs", map[string]any{})
	ro.mustErr("missing_scope", "cancel_run", map[string]any{"runId": adminRun})
	reader.mustErr("forbidden", "cancel_run", map[string]any{"runId": adminRun})
	dora.mustErr("missing_scope", "get_agent_call", map[string]any{"runId": adminRun, "callId": "x"})
	// Approvals are never answerable over MCP, by anyone.
	a, _, _ := theEnv.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: agentRun})
	for _, cl := range []*client{agent, admin} {
		for _, tool := range []string{"interact", "answer_ask"} {
			args := map[string]any{"runId": agentRun, "actionId": a[0].ID}
			if tool == "answer_ask" {
				args["answer"] = map[string]any{"isConfirmed": true}
			}
			r := cl.mustErr("human_confirmation_required", tool, args)
			if l := r.out["error"].(map[string]any)["link"]; l != "https://ops.example.com/approvals/"+a[0].ID {
				t.Fatalf("link %v", l)
			}
		}
	}
	if cur, _ := theEnv.store.ApprovalGet(context.Background(), a[0].ID); cur.Status != approvals.StatusPending {
		t.Fatalf("approval changed: %s", cur.Status)
	}
	admin.mustOK("cancel_run", map[string]any{"runId": adminRun})
	agent.mustOK("cancel_run", map[string]any{"runId": agentRun})
}
