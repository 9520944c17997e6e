package api

import (
	"strings"
	"testing"

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
