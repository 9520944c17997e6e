package api

import (
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// The attacks of issue 26 that the REST surface answered wrongly; each one
// failed on the main branch before core/authority answered for the API.

// itemIDs lists the ids of a list response's items.
func itemIDs(t *testing.T, r resp) []string {
	t.Helper()
	items, ok := r.body["items"].([]any)
	if !ok {
		t.Fatalf("no items: %s", r.raw)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

// An agent: token without scopes reads only its own runs and their
// approvals over REST, as over MCP, and no audit log.
func TestAttack_AgentTokenReadsEverythingOverREST(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	addApproval(b, "a-other", func(a *approvals.Approval) { a.Requester = "console:carol" })
	b.st.setRun("run-a-other", func(r *core.Run) { r.Requester = "console:carol" })
	addApproval(b, "a-own", func(a *approvals.Approval) { a.Requester = "agent:claude" })
	b.st.setRun("run-a-own", func(r *core.Run) { r.Requester = "agent:claude" })
	b.st.mu.Lock()
	b.st.audit = append(b.st.audit, approvals.AuditEntry{Seq: 1, Kind: approvals.AuditApprovalRequested, Actor: "console:carol", RunID: "run-a-other"})
	b.st.mu.Unlock()

	runs := b.do(t, "GET", "/api/v1/runs", agentToken, nil)
	want(t, runs, 200, "")
	if ids := itemIDs(t, runs); len(ids) != 1 || ids[0] != "run-a-own" {
		t.Errorf("the agent lists runs %v, want only its own", ids)
	}
	want(t, b.do(t, "GET", "/api/v1/runs/run-a-other", agentToken, nil), 404, "not_found")
	want(t, b.do(t, "GET", "/api/v1/runs/run-a-own", agentToken, nil), 200, "")
	want(t, b.do(t, "GET", "/api/v1/runs/run-a-other/events", agentToken, nil), 404, "not_found")
	as := b.do(t, "GET", "/api/v1/approvals", agentToken, nil)
	want(t, as, 200, "")
	if ids := itemIDs(t, as); len(ids) != 1 || ids[0] != "a-own" {
		t.Errorf("the agent lists approvals %v, want only its own run's", ids)
	}
	want(t, b.do(t, "GET", "/api/v1/approvals/a-other", agentToken, nil), 404, "not_found")
	want(t, b.do(t, "GET", "/api/v1/approvals/a-own", agentToken, nil), 200, "")
	want(t, b.do(t, "GET", "/api/v1/audit", agentToken, nil), 403, "forbidden")
	want(t, b.do(t, "GET", "/api/v1/grants", agentToken, nil), 403, "forbidden")

	// Scopes that say read grant more: claude2 has scopes [read, decide].
	if ids := itemIDs(t, b.do(t, "GET", "/api/v1/runs", agentToken+"2", nil)); len(ids) != 2 {
		t.Errorf("an agent with scope read lists %v, want every run", ids)
	}
	want(t, b.do(t, "GET", "/api/v1/audit", agentToken+"2", nil), 200, "")
}

// A token that may decide nothing (scopes [read, request]) acting as an
// approver's identity does not cancel another person's run: standing as an
// approver needs scope decide.
func TestAttack_TokenWithoutDecideCancelsAnyRun(t *testing.T) {
	t.Parallel()
	const ciTok, bobDecides, daveTok = "ci-bob-token", "bob-decides-token", "dave-token"
	b := setupReal(t, withTokens(
		Token{Name: "ci", Token: ciTok, Actor: "console:bob", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest}},
		Token{Name: "bob-decides", Token: bobDecides, Actor: "console:bob", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}},
		Token{Name: "dave", Token: daveTok, Actor: "console:dave", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}}))
	runID, _ := b.startDeploy(t, "ops-cancel")
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/cancel", ciTok, map[string]any{}), 403, "forbidden")
	// dave may decide, but nothing of this run's: the same refusal.
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/cancel", daveTok, map[string]any{}), 403, "forbidden")
	b.waitRun(t, runID, core.RunWaitingApproval)
	// bob with scope decide may: he is an eligible approver of the run's
	// approval.
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/cancel", bobDecides, map[string]any{}), 200, "")
	b.waitRun(t, runID, core.RunCancelled)
}

// App B never reads app A's Agent API session through the run API: not the
// run, not its events, not in the list. An admin token does.
func TestAttack_OtherAppReadsSessionThroughRunAPI(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	r := b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "hello"})
	want(t, r, 200, "")
	turn := r.body["turn_id"].(string)
	// app (console:alice, scopes read, decide, session.run) reads every
	// run, but not another app's session.
	want(t, b.do(t, "GET", "/api/v1/runs/"+turn, appToken, nil), 404, "not_found")
	want(t, b.do(t, "GET", "/api/v1/runs/"+turn+"/events", appToken, nil), 404, "not_found")
	for _, id := range itemIDs(t, b.do(t, "GET", "/api/v1/runs", appToken, nil)) {
		if id == turn {
			t.Errorf("app B lists app A's turn %s", turn)
		}
	}
	want(t, b.do(t, "POST", "/api/v1/runs/"+turn+"/cancel", appToken, map[string]any{}), 404, "not_found")
	want(t, b.do(t, "GET", "/api/v1/runs/"+turn, adminToken, nil), 200, "")
}
