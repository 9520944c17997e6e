package api

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// FuzzDecisionBody feeds arbitrary bodies to the decision endpoint: decoding
// must never panic or answer 5xx, every answer must be the JSON error shape
// or an approval, and a refused body must not change the approval.
func FuzzDecisionBody(f *testing.F) {
	for _, s := range []string{
		`{"action":"approve"}`, `{"action":"reject","reason":"no"}`,
		`{"action":"edit","args":{"service":"api","n":1.5e300}}`, `{"action":"edit","args":null}`,
		`{"action":"approve","scope":"session"}`, `{"action":"approve"`, `[]`, `null`, `"x"`, ``,
		`{"action":"edit","args":{"service":"forbidden"}}`, `{"args":{"a":[{"b":{}}]}}`, "{\"action\":\"\xff\"}",
		`{"action":"approve"} trailing`, `{"action":1e999}`,
		`{"action":"approve","scope":"forever","pattern":{"service":"a*"}}`, `{"action":"reject","scope":"forever","pattern":{}}`,
		`{"action":"approve","scope":"call","pattern":{"x":"*"}}`, `{"action":"approve","pattern":{"x":1}}`, `{"reason":"` + string(make([]byte, 5000)) + `"}`,
	} {
		f.Add([]byte(s))
	}
	st := newMemStore()
	now := func() time.Time { return testNow }
	h, err := New(Options{Engine: &fakeEngine{st: st, now: now}, Store: st, Now: now, MaxBodyBytes: 8 << 10,
		Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		st.mu.Lock()
		st.approvals = []*approvals.Approval{{ID: "a1", RunID: "r", Status: approvals.StatusPending,
			Eligible: []string{"console:admin"}, Quorum: 1, ExpiresAt: testNow.Add(time.Hour)}}
		st.mu.Unlock()
		req := httptest.NewRequest("POST", "/api/v1/approvals/a1/decision", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%d for %q: %s", rec.Code, body, rec.Body)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("response is not JSON: %q", rec.Body)
		}
		a, _ := st.ApprovalGet(t.Context(), "a1")
		switch {
		case rec.Code == http.StatusOK:
			if out["id"] == nil || a.Status == approvals.StatusPending {
				t.Fatalf("200 without a decision: %s", rec.Body)
			}
		case out["error"] == nil:
			t.Fatalf("%d without an error object: %s", rec.Code, rec.Body)
		case a.Status != approvals.StatusPending:
			t.Fatalf("refused (%d) but the approval changed", rec.Code)
		}
	})
}
