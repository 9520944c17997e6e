package api

import (
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Token scopes on every route, and the attacks they close.

const (
	ciToken    = "ci-token"
	agentToken = "agent-token"
	readToken  = "read-token"
)

func scopedSetup(t *testing.T) *bundle {
	return setup(t, func(o *Options) {
		o.Tokens = append(o.Tokens,
			// ci acts as an identity that is an approver, but may not decide.
			Token{Name: "ci", Token: ciToken, Actor: "console:bob", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest}},
			// an agent with no scopes key, and one that claims decide.
			Token{Name: "claude", Token: agentToken, Actor: "agent:claude"},
			Token{Name: "claude2", Token: agentToken + "2", Actor: "agent:claude2", Scopes: []core.Scope{core.ScopeRead, core.ScopeDecide}},
			Token{Name: "reader", Token: readToken, Actor: "console:reader", Scopes: []core.Scope{core.ScopeRead}},
		)
	})
}

func TestAttack_TokenWithoutDecideApproves(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	addApproval(b, "a1", func(a *approvals.Approval) { a.Eligible = []string{"console:bob", "agent:claude", "agent:claude2"} })
	for _, tok := range []string{ciToken, agentToken, agentToken + "2", readToken} {
		r := b.do(t, "POST", "/api/v1/approvals/a1/decision", tok, map[string]string{"action": "approve"})
		want(t, r, 403, string(core.DecisionHumanRequired))
	}
	got := b.do(t, "GET", "/api/v1/approvals/a1", adminToken, nil)
	if got.body["status"] != "pending" {
		t.Fatalf("a token without decide changed the approval: %s", got.raw)
	}
	// Each refused attempt went to the engine (which audits it) marked
	// unverified, never as a decision.
	b.eng.st.mu.Lock()
	defer b.eng.st.mu.Unlock()
	if len(b.eng.decisions) != 4 {
		t.Fatalf("engine saw %d decisions, want 4 refused attempts", len(b.eng.decisions))
	}
	for _, d := range b.eng.decisions {
		if !strings.Contains(d.Unverified, "no scope decide") {
			t.Fatalf("decision passed on as trusted: %+v", d)
		}
	}
}

func TestScopesPerRoute(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	addApproval(b, "a1", nil)
	b.st.addRun(&core.Run{ID: "r1", Flow: "deploy", Requester: "console:alice", Status: core.RunQueued, Thread: core.Thread{Channel: "console", Key: "t"}})
	// read-only: reads, nothing else.
	want(t, b.do(t, "GET", "/api/v1/runs", readToken, nil), 200, "")
	want(t, b.do(t, "GET", "/api/v1/approvals", readToken, nil), 200, "")
	want(t, b.do(t, "GET", "/api/v1/grants", readToken, nil), 200, "")
	want(t, b.do(t, "GET", "/api/v1/audit", readToken, nil), 200, "")
	want(t, b.do(t, "POST", "/api/v1/messages", readToken, map[string]string{"thread": "t", "text": "deploy x"}), 403, "missing_scope")
	want(t, b.do(t, "POST", "/api/v1/runs/r1/cancel", readToken, map[string]any{}), 403, "missing_scope")
	want(t, b.do(t, "DELETE", "/api/v1/grants/g-1", readToken, nil), 403, "missing_scope")
	// dead letters are admin's.
	want(t, b.do(t, "GET", "/api/v1/deliveries", ciToken, nil), 403, "missing_scope")
	want(t, b.do(t, "POST", "/api/v1/deliveries/d1/requeue", ciToken, map[string]any{}), 403, "missing_scope")
	want(t, b.do(t, "POST", "/api/v1/deliveries/d1/requeue", bobToken, map[string]any{}), 404, "not_found")
	// agents read their own runs and request by default.
	want(t, b.do(t, "GET", "/api/v1/runs/r1", agentToken, nil), 404, "not_found")
	b.st.addRun(&core.Run{ID: "r-agent", Flow: "deploy", Requester: "agent:claude", Status: core.RunQueued, Thread: core.Thread{Channel: "console", Key: "t"}})
	want(t, b.do(t, "GET", "/api/v1/runs/r-agent", agentToken, nil), 200, "")
	want(t, b.do(t, "POST", "/api/v1/messages", agentToken, map[string]string{"thread": "t", "text": "hello"}), 200, "")
}

func TestAttack_CancelSomeoneElsesRun(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	b.st.addRun(&core.Run{ID: "r1", Flow: "deploy", Requester: "console:alice", Status: core.RunQueued, Thread: core.Thread{Channel: "console", Key: "t"}})
	b.st.addRun(&core.Run{ID: "r2", Flow: "deploy", Requester: "console:bob", Status: core.RunQueued, Thread: core.Thread{Channel: "console", Key: "t"}})
	want(t, b.do(t, "POST", "/api/v1/runs/r1/cancel", ciToken, map[string]any{}), 403, "forbidden")
	want(t, b.do(t, "POST", "/api/v1/runs/nope/cancel", ciToken, map[string]any{}), 404, "not_found")
	want(t, b.do(t, "POST", "/api/v1/runs/r2/cancel", ciToken, map[string]any{}), 200, "")
	want(t, b.do(t, "POST", "/api/v1/runs/r1/cancel", adminToken, map[string]any{}), 200, "")
}

func TestGrantsListAndRevoke(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	exp := testNow.Add(time.Hour)
	past := testNow.Add(-time.Minute)
	b.st.mu.Lock()
	b.st.grants = []*approvals.Grant{
		{ID: "g-a1", Scope: approvals.ScopeSession, Tool: "deploy", Thread: "console:t", Requester: "console:alice", RuleKey: "r1",
			ApprovalID: "a1", Actor: "console:bob", At: testNow, ExpiresAt: &exp},
		{ID: "g-a2", Scope: approvals.ScopeForever, Tool: "scale", Args: map[string]any{"n": "3"}, ApprovalID: "a2", Actor: "console:bob", At: testNow},
		{ID: "g-a3", Scope: approvals.ScopeSession, Tool: "deploy", ApprovalID: "a3", Actor: "console:bob", At: past.Add(-time.Hour), ExpiresAt: &past},
	}
	b.st.mu.Unlock()
	r := b.do(t, "GET", "/api/v1/grants", readToken, nil)
	want(t, r, 200, "")
	if items := r.body["items"].([]any); len(items) != 2 {
		t.Fatalf("active grants: %s", r.raw)
	}
	if r := b.do(t, "GET", "/api/v1/grants?status=all", readToken, nil); len(r.body["items"].([]any)) != 3 {
		t.Fatalf("all grants: %s", r.raw)
	}
	want(t, b.do(t, "GET", "/api/v1/grants?status=revoked", readToken, nil), 422, "invalid")
	r = b.do(t, "DELETE", "/api/v1/grants/g-a2", bobToken, nil)
	want(t, r, 200, "")
	if r.body["revoked_by"] != "console:bob" || r.body["active"] != false || r.body["scope"] != "forever" {
		t.Fatalf("revoked grant: %s", r.raw)
	}
	want(t, b.do(t, "DELETE", "/api/v1/grants/g-a2", adminToken, nil), 409, "already_revoked")
	want(t, b.do(t, "DELETE", "/api/v1/grants/g-nope", adminToken, nil), 404, "not_found")
	if r := b.do(t, "GET", "/api/v1/grants", readToken, nil); len(r.body["items"].([]any)) != 1 {
		t.Fatalf("active grants after the revoke: %s", r.raw)
	}
}

func TestDecisionPatternNeedsForever(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	addApproval(b, "a1", nil)
	want(t, b.do(t, "POST", "/api/v1/approvals/a1/decision", adminToken,
		map[string]any{"action": "approve", "scope": "session", "pattern": map[string]string{"service": "*"}}), 422, "invalid")
	want(t, b.do(t, "POST", "/api/v1/approvals/a1/decision", adminToken,
		map[string]any{"action": "approve", "scope": "forever", "pattern": map[string]string{"service": "a*"}}), 200, "")
}
