package api

import (
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// TestShortIDsInPaths: a run or approval path takes the short id people
// see (a prefix of the UUID's random part) as well as the whole id; one
// that names several is refused with the list, one that names none is
// 404, and a decision posted to a short id decides that one approval.
func TestShortIDsInPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ts := "01a2504f-1111-7000-8000-" // one millisecond: a run and its cards share it
	runID := ts + "3f9a2c000001"
	b.st.addRun(&core.Run{ID: runID, Flow: "deploy", Thread: core.Thread{Channel: "console", Key: "ops"}, Status: core.RunWaitingApproval,
		CreatedAt: testNow, UpdatedAt: testNow})
	addApproval(b, ts+"3f9b00000002", nil)
	addApproval(b, ts+"3f9b11000003", nil)

	t.Run("RunByShortID", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/runs/3f9a2c0", adminToken, nil)
		want(t, r, 200, "")
		if r.body["id"] != runID {
			t.Fatalf("run %s", r.raw)
		}
	})
	t.Run("ApprovalByShortID", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals/3f9b000", adminToken, nil)
		want(t, r, 200, "")
		if r.body["id"] != ts+"3f9b00000002" {
			t.Fatalf("approval %s", r.raw)
		}
	})
	t.Run("SharedTimestampIsAmbiguous", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals/01a2504f", adminToken, nil)
		want(t, r, 409, CodeAmbiguousID)
		msg := r.errField("message")
		for _, id := range []string{ts + "3f9b00000002", ts + "3f9b11000003", "3f9b000", "3f9b110", "deploy, pending"} {
			if !strings.Contains(msg, id) {
				t.Fatalf("message lacks %q:\n%s", id, msg)
			}
		}
	})
	t.Run("AmbiguousDecisionDecidesNothing", func(t *testing.T) {
		want(t, b.do(t, "POST", "/api/v1/approvals/3f9b/decision", adminToken, map[string]string{"action": "approve"}), 409, CodeAmbiguousID)
		for _, id := range []string{ts + "3f9b00000002", ts + "3f9b11000003"} {
			if a, _ := b.st.ApprovalGet(t.Context(), id); len(a.Decisions) != 0 {
				t.Fatalf("%s was decided: %+v", id, a.Decisions)
			}
		}
	})
	t.Run("DecisionByShortID", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/approvals/3f9b11/decision", adminToken, map[string]string{"action": "reject", "reason": "not now"})
		want(t, r, 200, "")
		if r.body["id"] != ts+"3f9b11000003" || r.body["status"] != "rejected" {
			t.Fatalf("decision %s", r.raw)
		}
	})
	t.Run("NamesNothing", func(t *testing.T) {
		want(t, b.do(t, "GET", "/api/v1/runs/ffff000", adminToken, nil), 404, "not_found")
		want(t, b.do(t, "GET", "/api/v1/approvals/3f9a2c0", adminToken, nil), 404, "not_found") // a run's, not an approval's
	})
}

// An agent token sees only its own runs and their approvals: a short id
// looks only among those, so the 409 list of an ambiguous one, or a match,
// never tells it of a run or an approval it may not see. Before, a
// timestamp prefix listed every run of that second, with flows and
// statuses, and the short form of another's run answered 409 or 200.
func TestAttack_ShortIDAmbiguityLeaksRuns(t *testing.T) {
	t.Parallel()
	b := scopedSetup(t)
	ts := "01a2504f-2222-7000-8000-"
	otherRun, ownRun := ts+"3f9a2c000001", ts+"3f9a2d000002"
	otherAp, ownAp := ts+"3f9b00000003", ts+"3f9b11000004"
	b.st.addRun(&core.Run{ID: otherRun, Flow: "secret-migration", Requester: "console:carol", Thread: core.Thread{Channel: "console", Key: "ops"},
		Status: core.RunWaitingApproval, CreatedAt: testNow, UpdatedAt: testNow})
	b.st.addRun(&core.Run{ID: ownRun, Flow: "status", Requester: "agent:claude", Thread: core.Thread{Channel: "console", Key: "mine"},
		Status: core.RunWaitingApproval, CreatedAt: testNow, UpdatedAt: testNow})
	addApproval(b, otherAp, func(a *approvals.Approval) { a.RunID, a.Requester = otherRun, "console:carol" })
	addApproval(b, ownAp, func(a *approvals.Approval) { a.RunID, a.Requester = ownRun, "agent:claude" })
	hidden := []string{otherRun, otherAp, "3f9a2c0", "3f9b000", "secret-migration"}
	noLeak := func(t *testing.T, r resp) {
		t.Helper()
		for _, h := range hidden {
			if strings.Contains(r.raw, h) {
				t.Fatalf("the agent learned %q:\n%s", h, r.raw)
			}
		}
	}

	// The admin sees both: the same short ids are ambiguous for it.
	want(t, b.do(t, "GET", "/api/v1/runs/01a2504f", adminToken, nil), 409, CodeAmbiguousID)
	want(t, b.do(t, "GET", "/api/v1/runs/3f9a", adminToken, nil), 409, CodeAmbiguousID)
	want(t, b.do(t, "GET", "/api/v1/approvals/3f9b", adminToken, nil), 409, CodeAmbiguousID)

	// The agent token: what names its own run and another's names its own.
	for _, typed := range []string{"01a2504f", "3f9a", "3f9a2"} {
		r := b.do(t, "GET", "/api/v1/runs/"+typed, agentToken, nil)
		want(t, r, 200, "")
		noLeak(t, r)
		if r.body["id"] != ownRun {
			t.Fatalf("%s named %v, want its own run", typed, r.body["id"])
		}
	}
	r := b.do(t, "GET", "/api/v1/approvals/3f9b", agentToken, nil)
	want(t, r, 200, "")
	noLeak(t, r)
	if r.body["id"] != ownAp {
		t.Fatalf("3f9b named %v, want its own run's approval", r.body["id"])
	}
	// Another's short form is not found, exactly as an id of nothing is.
	for _, p := range []struct{ path, typed string }{
		{"/api/v1/runs/3f9a2c0", "3f9a2c0"}, {"/api/v1/runs/3f9a2c0/events", "3f9a2c0"}, {"/api/v1/approvals/3f9b000", "3f9b000"},
	} {
		r := b.do(t, "GET", p.path, agentToken, nil)
		want(t, r, 404, "not_found")
		none := b.do(t, "GET", strings.Replace(p.path, p.typed, "eeee000", 1), agentToken, nil)
		if got, nothing := r.errField("message"), strings.ReplaceAll(none.errField("message"), "eeee000", p.typed); got != nothing {
			t.Fatalf("%s answers %q, an id of nothing %q", p.path, got, nothing)
		}
	}
	// What changes something resolves the same way: cancel of another's
	// run by its short form is not found; a decision on a short form that
	// names both approvals reaches only its own (an agent never decides).
	want(t, b.do(t, "POST", "/api/v1/runs/3f9a2c0/cancel", agentToken, map[string]any{}), 404, "not_found")
	r = b.do(t, "POST", "/api/v1/approvals/3f9b/decision", agentToken, map[string]string{"action": "approve"})
	want(t, r, 403, string(core.DecisionHumanRequired))
	noLeak(t, r)
	if a, _ := b.st.ApprovalGet(t.Context(), otherAp); a.Status != approvals.StatusPending || len(a.Decisions) != 0 {
		t.Fatalf("another's approval changed: %+v", a)
	}
}

// Another app never learns an Agent API session's run ids through a short
// id: a prefix both apps' turns share names, for each, its own turn; the
// other's turn's short form is not found for it.
func TestAttack_ShortIDNamesAnotherAppsTurn(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	ts := "01a2504f-3333-7000-8000-"
	appTurn, otherTurn := ts+"5c0a00000001", ts+"5c0a10000002"
	b.st.addRun(&core.Run{ID: appTurn, Thread: core.Thread{Channel: core.AgentSessionChannel, Key: b.newSession(t, appToken)}, Requester: "console:alice",
		Status: core.RunRunning, CreatedAt: testNow, UpdatedAt: testNow})
	b.st.addRun(&core.Run{ID: otherTurn, Thread: core.Thread{Channel: core.AgentSessionChannel, Key: b.newSession(t, otherToken)}, Requester: "api:other",
		Status: core.RunRunning, CreatedAt: testNow, UpdatedAt: testNow})
	want(t, b.do(t, "GET", "/api/v1/runs/5c0a", adminToken, nil), 409, CodeAmbiguousID)
	for tok, own := range map[string]string{appToken: appTurn, otherToken: otherTurn} {
		r := b.do(t, "GET", "/api/v1/runs/5c0a", tok, nil)
		want(t, r, 200, "")
		if r.body["id"] != own {
			t.Fatalf("5c0a named %v for %s, want its own turn", r.body["id"], tok)
		}
	}
	r := b.do(t, "GET", "/api/v1/runs/5c0a1", appToken, nil)
	want(t, r, 404, "not_found")
	if strings.Contains(r.raw, otherTurn) {
		t.Fatalf("app B learned app A's turn: %s", r.raw)
	}
	want(t, b.do(t, "GET", "/api/v1/runs/5c0a0", otherToken, nil), 404, "not_found")
}
