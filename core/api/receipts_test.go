package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRealDelegateAndPolicy: the policy in force is served rule by rule
// with its version; a hand-over is refused with a clear error for bad
// input and for those who may not decide, and otherwise moves the say:
// the delegator may no longer decide, the group's other member may, and
// the approval shows it. A server without a receipt key says so.
func TestRealDelegateAndPolicy(t *testing.T) {
	t.Parallel()
	b := setupReal(t)

	r := b.do(t, "GET", "/api/v1/policy", reqToken, nil)
	want(t, r, 200, "")
	rules, _ := r.body["rules"].([]any)
	if !strings.HasPrefix(r.body["version"].(string), "p") || len(rules) != 4 { // status, deploy ask, deploy dr* deny, scale (the escalation tests')
		t.Fatalf("policy %s", r.raw)
	}
	rule1 := rules[1].(map[string]any)
	if rule1["index"] != 1.0 || rule1["tool"] != "deploy" || rule1["action"] != "ask" || rule1["quorum"] != 1.0 ||
		rule1["summary"] != "tool deploy" || !strings.HasPrefix(rule1["key"].(string), "r") {
		t.Fatalf("rule 1 %v", rule1)
	}

	_, aid := b.startDeploy(t, "deleg-1")
	path := "/api/v1/approvals/" + aid + "/delegate"
	want(t, b.do(t, "POST", path, aliceToken, map[string]any{}), 422, "invalid")
	want(t, b.do(t, "POST", path, aliceToken, map[string]any{"to": "group:sre", "who": "x"}), 400, "unknown_field")
	want(t, b.do(t, "POST", path, aliceToken, map[string]any{"to": "group:nope"}), 400, "bad_request")
	want(t, b.do(t, "POST", path, aliceToken, map[string]any{"to": "console:bob"}), 400, "bad_request")
	want(t, b.do(t, "POST", path, eveToken, map[string]any{"to": "group:sre"}), 403, "not_approver")
	want(t, b.do(t, "POST", "/api/v1/approvals/nope/delegate", aliceToken, map[string]any{"to": "group:sre"}), 404, "not_found")

	r = b.do(t, "POST", path, aliceToken, map[string]any{"to": "group:sre", "reason": "bob knows it"})
	want(t, r, 200, "")
	if r.body["status"] != "pending" || strings.Contains(r.raw, `"console:alice"],`) {
		t.Fatalf("after handing on %s", r.raw)
	}
	var v struct {
		Eligible  []string `json:"eligible"`
		Why       string   `json:"why"`
		Rule      int      `json:"rule"`
		Decisions []struct {
			Actor, Action, To, Reason string
		} `json:"decisions"`
	}
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Decisions) != 1 || v.Decisions[0].Action != "delegate" || v.Decisions[0].To != "group:sre" || v.Decisions[0].Actor != "console:alice" ||
		strings.Join(v.Eligible, ",") != "console:req,console:bob" || v.Rule != 1 || !strings.HasPrefix(v.Why, "policy rule 1: tool deploy") {
		t.Fatalf("approval %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", aliceToken, map[string]string{"action": "approve"}), 403, "not_approver")
	want(t, b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", bobTok, map[string]string{"action": "approve"}), 200, "")

	// No receipt key on this server.
	want(t, b.do(t, "GET", "/api/v1/approvals/"+aid+"/receipt", reqToken, nil), 404, "no_receipt")
	want(t, b.do(t, "GET", "/api/v1/receipts/key", reqToken, nil), 404, "receipts_off")
	want(t, b.do(t, "GET", "/api/v1/approvals/nope/receipt", reqToken, nil), 404, "not_found")
}
