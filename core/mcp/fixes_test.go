package mcp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/testkit"
)

// TestAnnotationsSayWhatToolsDo: readers are read-only; nothing is
// destructive (opsgate's gate, not the client's prompt, guards the risky
// work, and Codex refuses destructive tools under approval_policy=never);
// no tool reaches outside opsgate.
func TestAnnotationsSayWhatToolsDo(t *testing.T) {
	t.Parallel()
	c := connect(t, adminToken)
	readers := map[string]bool{"get_run": true, "list_runs": true, "list_workflows": true, "status": true, "get_record": true,
		"get_artifact": true, "list_artifacts": true, "get_agent_call": true, "read_agent_asset": true}
	idempotent := map[string]bool{"cancel_run": true, "claim_agent_call": true}
	for _, tl := range c.tools() {
		a := tl.Annotations
		if a.ReadOnlyHint != readers[tl.Name] {
			t.Errorf("%s: readOnlyHint %v", tl.Name, a.ReadOnlyHint)
		}
		if a.DestructiveHint == nil && !a.ReadOnlyHint || a.DestructiveHint != nil && *a.DestructiveHint {
			t.Errorf("%s: destructiveHint %v, want false", tl.Name, a.DestructiveHint)
		}
		if a.IdempotentHint != (readers[tl.Name] || idempotent[tl.Name]) {
			t.Errorf("%s: idempotentHint %v", tl.Name, a.IdempotentHint)
		}
		if a.OpenWorldHint == nil || *a.OpenWorldHint {
			t.Errorf("%s: openWorldHint %v", tl.Name, a.OpenWorldHint)
		}
	}
}

// TestSessionlessRequestIs400: before 2026-07-28 a request without a
// session (other than initialize) is the spec's 400 with a JSON-RPC
// error, not a 200 with code 0; initialize still opens one.
func TestSessionlessRequestIs400(t *testing.T) {
	t.Parallel()
	for _, hdr := range [][]string{{"MCP-Protocol-Version", "2025-11-25"}, {"MCP-Protocol-Version", "2025-06-18"}, nil} {
		res, body := post(t, PathExternal, adminToken, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}`, hdr...)
		var m struct {
			ID    int `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if res.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &m) != nil || m.Error.Code != -32600 || m.ID != 3 ||
			!strings.Contains(m.Error.Message, "Mcp-Session-Id") {
			t.Errorf("%v: %d %s", hdr, res.StatusCode, body)
		}
		if res.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%v: a session was opened", hdr)
		}
	}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	if res, body := post(t, PathExternal, adminToken, init); res.StatusCode != http.StatusOK || res.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize: %d %s", res.StatusCode, body)
	}
}

// TestFlowReturnsTheSettledRun: flow answers with the run at its first
// wait or its end, so a client needs no poll to see either.
func TestFlowReturnsTheSettledRun(t *testing.T) {
	t.Parallel()
	c := connect(t, adminToken)
	for intent, want := range map[string]string{"settle": "succeeded"} {
		if got := c.mustOK("flow", map[string]any{"flowName": "status", "intent": intent}).obj("run"); got["status"] != want {
			t.Errorf("status flow: %v", got["status"])
		}
	}
	got := c.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "settle 1.0"}).obj("run")
	if got["status"] != "waiting_approval" || len(got["pending_actions"].([]any)) != 1 {
		t.Fatalf("deploy flow: %v", got)
	}
	c.mustOK("cancel_run", map[string]any{"runId": got["id"]})
	got = c.mustOK("flow", map[string]any{"flowName": "triage", "intent": "settle"}).obj("run")
	if got["status"] != "waiting_input" || got["pendingAgentCall"] == nil {
		t.Fatalf("triage flow: %v", got)
	}
	c.mustOK("cancel_run", map[string]any{"runId": got["id"]})
}

// TestEachToolCallIsLogged: one line per call with the tool, the actor
// and the run; a refused call says its code.
func TestEachToolCallIsLogged(t *testing.T) {
	t.Parallel()
	var buf testkit.LogBuffer
	srv, err := New(Options{Engine: theEnv.eng, Store: theEnv.store, StateKey: testKey, Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}},
		Flows: flowsOf(testFlows), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Routes()[PathExternal])
	defer hs.Close()
	cl := sdk.NewClient(&sdk.Implementation{Name: "log-test", Version: "1"}, nil)
	cs, err := cl.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL, HTTPClient: &http.Client{Transport: &bearer{token: adminToken, base: http.DefaultTransport}},
		MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "flow", Arguments: map[string]any{"flowName": "status", "intent": "logged"}})
	if err != nil || res.IsError {
		t.Fatal(res, err)
	}
	var out struct {
		Run struct{ ID string } `json:"run"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	_ = json.Unmarshal(b, &out)
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "get_run", Arguments: map[string]any{"runId": "nope"}}); err != nil {
		t.Fatal(err)
	}
	logs := buf.String()
	for _, want := range []string{
		`"msg":"mcp tool call","tool":"flow","actor":"console:admin","endpoint":"/mcp","run":"` + out.Run.ID + `"`,
		`"msg":"mcp tool call","tool":"get_run","actor":"console:admin","endpoint":"/mcp","run":"nope","error":"not_found"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
}

// TestApprovalOfferedAsURLToItsApprover: interact on an approval offers
// the person who may decide it (the authority judges alice eligible) its
// console page as a URL elicitation, in every protocol version; the agent
// decides nothing (the approval stays pending, answer_ask stays refused);
// a token whose person may not decide, or a client without URL mode, gets
// human_confirmation_required.
func TestApprovalOfferedAsURLToItsApprover(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			var got []*sdk.ElicitParams
			open := func(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
				got = append(got, req.Params)
				return &sdk.ElicitResult{Action: "accept"}, nil
			}
			alice := connect(t, aliceToken, clientOpts{version: v, elicit: open, urls: true})
			run := alice.mustOK("flow", map[string]any{"flowName": "deploy", "intent": "url " + v}).obj("run")
			acts := run["pending_actions"].([]any)
			id := acts[0].(map[string]any)["id"].(string)
			r := alice.mustOK("interact", map[string]any{"runId": run["id"], "actionId": id})
			in := r.obj("interaction")
			if in["mode"] != "url" || in["outcome"] != "accept" || len(got) != 1 || got[0].Mode != "url" ||
				got[0].URL != "https://ops.example.com/approvals/"+id || got[0].ElicitationID != "approval-"+id {
				t.Fatalf("interact: %v, elicited %+v", r.out, got)
			}
			if a, err := theEnv.store.ApprovalGet(context.Background(), id); err != nil || a.Status != approvals.StatusPending {
				t.Fatalf("the approval after the offer: %v %v", a, err)
			}
			alice.mustErr(string(core.DecisionHumanRequired), "answer_ask", map[string]any{"runId": run["id"], "actionId": id, "answer": map[string]any{"isConfirmed": true}})
			// No URL mode, or not an approver: refused with the link.
			forms := connect(t, aliceToken, clientOpts{version: v, elicit: open})
			forms.mustErr(string(core.DecisionHumanRequired), "interact", map[string]any{"runId": run["id"], "actionId": id})
			admin := connect(t, adminToken, clientOpts{version: v, elicit: open, urls: true})
			admin.mustErr(string(core.DecisionHumanRequired), "interact", map[string]any{"runId": run["id"], "actionId": id})
			if len(got) != 1 {
				t.Fatalf("elicited %d times", len(got))
			}
			admin.mustOK("cancel_run", map[string]any{"runId": run["id"]})
		})
	}
}
