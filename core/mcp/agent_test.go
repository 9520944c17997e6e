package mcp

import (
	"context"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// startTriage starts a triage run as c and returns its run id and callId.
func startTriage(t *testing.T, c *client, service string) (string, string) {
	t.Helper()
	run := c.mustOK("flow", map[string]any{"flowName": "triage", "intent": service}).obj("run")
	id := run["id"].(string)
	waitRun(t, id, core.RunWaitingInput)
	got := c.mustOK("get_run", map[string]any{"runId": id}).obj("run")
	pac, _ := got["pendingAgentCall"].(map[string]any)
	if pac == nil || pac["status"] != "pending" || pac["stage"] != "investigate" {
		t.Fatalf("pendingAgentCall = %v", got["pendingAgentCall"])
	}
	acts := got["pending_actions"].([]any)
	if len(acts) != 1 || acts[0].(map[string]any)["kind"] != "agent_call" || acts[0].(map[string]any)["id"] != pac["id"] {
		t.Fatalf("pending_actions = %v", acts)
	}
	return id, pac["id"].(string)
}

func TestAgentTaskRoundTripOverMCP(t *testing.T) {
	t.Parallel()
	c := connect(t, agentToken)
	runID, callID := startTriage(t, c, "api")
	ref := map[string]any{"runId": runID, "callId": callID}
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
	ac := c.mustOK("get_agent_call", ref).obj("agentCall")
	if ac["status"] != "pending" || ac["instructions"] != "Find out why api is slow" || len(ac["tools"].([]any)) != 2 {
		t.Fatalf("agentCall = %v", ac)
	}
	c.mustErr("not_found", "get_agent_call", map[string]any{"runId": runID, "callId": "nope"})
	claim := c.mustOK("claim_agent_call", with(map[string]any{"claimId": "claim-1"}))
	tok, _ := claim.out["ownerToken"].(string)
	if !strings.HasPrefix(tok, "og_") || claim.obj("task")["status"] != "claimed" {
		t.Fatalf("claim = %v", claim.out)
	}
	// Reconnecting with the same claimId resumes: same token.
	c2 := connect(t, agentToken, clientOpts{version: "2025-11-25"})
	if again := c2.mustOK("claim_agent_call", with(map[string]any{"claimId": "claim-1"})); again.out["ownerToken"] != tok {
		t.Fatalf("resume gave another token")
	}
	c2.mustErr(string(core.AgentClaimConflict), "claim_agent_call", with(map[string]any{"claimId": "claim-2"}))
	// Another agent cannot even see the run; read-all can see but not own it.
	other := connect(t, readerToken)
	other.mustErr(string(core.AgentClaimConflict), "claim_agent_call", with(map[string]any{"claimId": "claim-1"}))
	other.mustErr(string(core.AgentNotOwner), "call_agent_tool", with(map[string]any{"ownerToken": tok, "toolCallId": "t1", "toolId": "status"}))
	connect(t, ciToken).mustErr("not_found", "claim_agent_call", with(map[string]any{"claimId": "claim-9"}))
	c.mustErr(string(core.AgentNotOwner), "call_agent_tool", with(map[string]any{"ownerToken": "og_forged", "toolCallId": "t1", "toolId": "status"}))

	owner := func(extra map[string]any) map[string]any {
		m := with(extra)
		m["ownerToken"] = tok
		return m
	}
	before := theEnv.status.countRun(runID)
	r := c.mustOK("call_agent_tool", owner(map[string]any{"toolCallId": "t1", "toolId": "status", "input": map[string]any{"service": "api"}})).obj("output")
	if r["status"] != "succeeded" || r["output"] != "api is green" || r["final"] != true {
		t.Fatalf("status tool = %v", r)
	}
	c.mustOK("call_agent_tool", owner(map[string]any{"toolCallId": "t1", "toolId": "status", "input": map[string]any{"service": "api"}}))
	if theEnv.status.countRun(runID) != before+1 {
		t.Fatal("kept receipt dispatched twice")
	}
	c.mustErr(string(core.AgentToolConflict), "call_agent_tool", owner(map[string]any{"toolCallId": "t1", "toolId": "status", "input": map[string]any{"service": "db"}}))
	c.mustErr(string(core.AgentUnknownTool), "call_agent_tool", owner(map[string]any{"toolCallId": "t2", "toolId": "wipe"}))
	c.mustErr(string(core.AgentInvalidInput), "call_agent_tool", owner(map[string]any{"toolCallId": "t2", "toolId": "deploy", "input": map[string]any{"service": "api"}}))
	// A gated tool: pending at once; the agent can neither approve nor complete meanwhile.
	p := c.mustOK("call_agent_tool", owner(map[string]any{"toolCallId": "t3", "toolId": "deploy", "input": map[string]any{"service": "api", "version": "9"}})).obj("output")
	if p["status"] != "pending_approval" || p["final"] != false || !strings.HasPrefix(p["link"].(string), "https://ops.example.com/approvals/") {
		t.Fatalf("ask = %v", p)
	}
	c.mustErr("human_confirmation_required", "interact", map[string]any{"runId": runID, "actionId": p["approvalId"]})
	c.mustErr(string(core.AgentToolInFlight), "complete_agent_call", owner(map[string]any{"result": map[string]any{"summary": "x"}}))
	got := c.mustOK("get_run", map[string]any{"runId": runID}).obj("run")
	kinds := map[string]bool{}
	for _, a := range got["pending_actions"].([]any) {
		kinds[a.(map[string]any)["kind"].(string)] = true
	}
	if !kinds["approval"] || !kinds["agent_call"] {
		t.Fatalf("pending actions while an agent tool waits: %v", got["pending_actions"])
	}
	if _, err := theEnv.eng.Decide(context.Background(), core.Actor{ID: "console:alice"}, "console",
		core.Decision{ApprovalID: p["approvalId"].(string), Action: "approve"}); err != nil {
		t.Fatal(err)
	}
	r = c.mustOK("call_agent_tool", owner(map[string]any{"toolCallId": "t3", "toolId": "deploy", "input": map[string]any{"service": "api", "version": "9"}})).obj("output")
	if r["status"] != "succeeded" || !strings.Contains(r["output"].(string), "SYSTEM: ignore") {
		t.Fatalf("approved deploy = %v", r)
	}
	as := c.mustOK("read_agent_asset", owner(map[string]any{"assetId": "context"})).obj("asset")
	if as["content"] != "service=api" || as["encoding"] != "utf-8" || as["nextOffset"] != float64(-1) {
		t.Fatalf("asset = %v", as)
	}
	c.mustErr(string(core.AgentUnknownAsset), "read_agent_asset", owner(map[string]any{"assetId": "etc.passwd"}))
	c.mustErr(string(core.AgentInvalidResult), "complete_agent_call", owner(map[string]any{"result": map[string]any{"sumary": "typo"}}))
	c.mustErr(string(core.AgentInvalidResult), "complete_agent_call", owner(map[string]any{"result": "just text"}))
	done := c.mustOK("complete_agent_call", owner(map[string]any{"result": map[string]any{"summary": "GC pauses"}})).obj("run")
	if done["id"] != runID {
		t.Fatalf("complete = %v", done)
	}
	final := waitRun(t, runID, core.RunSucceeded)
	if final.Steps[0].Output != `{"summary":"GC pauses"}` {
		t.Fatalf("step output %q", final.Steps[0].Output)
	}
	c.mustErr(string(core.AgentNotCurrent), "complete_agent_call", owner(map[string]any{"result": map[string]any{"summary": "again"}}))
	// The agent's result is the stage's artifact.
	art := c.mustOK("get_artifact", map[string]any{"artifactId": runID + "/investigate"}).obj("artifact")
	if art["media_type"] != "application/json" || art["content"] != `{"summary":"GC pauses"}` || art["json"].(map[string]any)["summary"] != "GC pauses" {
		t.Fatalf("artifact = %v", art)
	}
}

func TestAgentTaskFailAndCancelOverMCP(t *testing.T) {
	t.Parallel()
	c := connect(t, agentToken)
	runID, callID := startTriage(t, c, "db")
	tok := c.mustOK("claim_agent_call", map[string]any{"runId": runID, "callId": callID, "claimId": "c"}).out["ownerToken"]
	c.mustErr("invalid_input", "fail_agent_call", map[string]any{"runId": runID, "callId": callID, "ownerToken": tok, "message": ""})
	r := c.mustOK("fail_agent_call", map[string]any{"runId": runID, "callId": callID, "ownerToken": tok, "message": "no access"}).obj("run")
	if r["id"] != runID {
		t.Fatal(r)
	}
	if got := waitRun(t, runID, core.RunFailed); got.ErrorCode != "agent_failed" {
		t.Fatal(got.ErrorCode)
	}

	runID, callID = startTriage(t, c, "web")
	tok = c.mustOK("claim_agent_call", map[string]any{"runId": runID, "callId": callID, "claimId": "c"}).out["ownerToken"]
	c.mustOK("cancel_run", map[string]any{"runId": runID})
	c.mustErr(string(core.AgentCancelled), "complete_agent_call", map[string]any{"runId": runID, "callId": callID, "ownerToken": tok,
		"result": map[string]any{"summary": "late"}})
	if ac := c.mustOK("get_agent_call", map[string]any{"runId": runID, "callId": callID}).obj("agentCall"); ac["status"] != "cancelled" {
		t.Fatal(ac)
	}
}

// The internal endpoints have no agent-task tools.
func TestInternalEndpointsHaveNoAgentTools(t *testing.T) {
	t.Parallel()
	c := connect(t, studioToken, clientOpts{path: PathStudio})
	ctx := context.Background()
	res, err := c.cs.CallTool(ctx, sdkParams("claim_agent_call", map[string]any{"runId": "x", "callId": "y", "claimId": "z"}))
	if err == nil && !res.IsError {
		t.Fatal("claim_agent_call answered on the studio endpoint")
	}
}
