package api

import (
	"strings"
	"testing"
	"time"
)

// A pending approval says what happens next and what each scope would
// save before anyone saves it; "for" bounds a grant; the grant lists what
// it covers until when, and is revoked through the API.
func TestRealGrantOffersForAndRevoke(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	r := b.do(t, "POST", "/api/v1/messages", reqToken, map[string]string{"thread": "ops-g", "text": "scale api 3"})
	want(t, r, 201, "")
	runID := r.body["run"].(map[string]any)["id"].(string)
	var aid string
	deadline := time.Now().Add(hang)
	for aid == "" && time.Now().Before(deadline) {
		r := b.do(t, "GET", "/api/v1/approvals?status=pending&run_id="+runID, reqToken, nil)
		if items := r.body["items"].([]any); len(items) == 1 {
			aid = items[0].(map[string]any)["id"].(string)
		}
	}
	if aid == "" {
		t.Fatal("no approval")
	}
	r = b.do(t, "GET", "/api/v1/approvals/"+aid, aliceToken, nil)
	want(t, r, 200, "")
	next, _ := r.body["next"].(map[string]any)
	if next["kind"] != "remind" || !strings.Contains(next["text"].(string), "reminded at") || len(r.body["escalation"].([]any)) != 2 {
		t.Fatalf("next and ladder: %s", r.raw)
	}
	offers := map[string]map[string]any{}
	for _, o := range r.body["grant_offers"].([]any) {
		m := o.(map[string]any)
		offers[m["scope"].(string)] = m
	}
	task, session := offers["task"], offers["session"]
	if task["offered"] != true || task["covers"].(map[string]any)["run_id"] != runID || task["takes_for"] != false {
		t.Fatalf("task offer: %v", task)
	}
	cov := session["covers"].(map[string]any)
	if session["offered"] != true || session["max_for"] != "1h0m0s" || cov["requester"] != "console:req" || cov["until"] == nil || cov["rule"] == "" {
		t.Fatalf("session offer: %v", session)
	}
	if fo := offers["forever"]["covers"].(map[string]any); fo["args"].(map[string]any)["n"] != "3" || fo["until"] != nil {
		t.Fatalf("forever offer: %v", offers["forever"])
	}

	// Bad "for": malformed, on a scope that saves nothing, on a reject,
	// longer than a session may last.
	dec := "/api/v1/approvals/" + aid + "/decision"
	want(t, b.do(t, "POST", dec, aliceToken, map[string]any{"action": "approve", "scope": "session", "for": "soon"}), 422, "invalid")
	want(t, b.do(t, "POST", dec, aliceToken, map[string]any{"action": "approve", "scope": "task", "for": "1h"}), 422, "invalid")
	want(t, b.do(t, "POST", dec, aliceToken, map[string]any{"action": "reject", "scope": "session", "for": "1h"}), 422, "invalid")
	want(t, b.do(t, "POST", dec, aliceToken, map[string]any{"action": "approve", "scope": "session", "for": "3h"}), 400, "bad_request")
	want(t, b.do(t, "POST", dec, aliceToken, map[string]any{"action": "approve", "scope": "sometimes"}), 422, "invalid")

	r = b.do(t, "POST", dec, aliceToken, map[string]any{"action": "approve", "scope": "session", "for": "30m"})
	want(t, r, 200, "")
	d := r.body["decisions"].([]any)[0].(map[string]any)
	if d["scope"] != "session" || d["for"] != "30m0s" {
		t.Fatalf("decision: %v", d)
	}
	b.waitRun(t, runID, "succeeded")
	r = b.do(t, "GET", "/api/v1/grants", aliceToken, nil)
	want(t, r, 200, "")
	items := r.body["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("grants: %s", r.raw)
	}
	g := items[0].(map[string]any)
	created, _ := time.Parse(time.RFC3339, g["created_at"].(string))
	until, _ := time.Parse(time.RFC3339, g["until"].(string))
	if g["scope"] != "session" || g["tool"] != "scale" || g["requester"] != "console:req" || g["granted_by"] != "console:alice" ||
		g["rule"] == "" || until.Sub(created) != 30*time.Minute {
		t.Fatalf("grant: %v", g)
	}
	r = b.do(t, "DELETE", "/api/v1/grants/"+g["id"].(string), bobTok, nil)
	want(t, r, 200, "")
	if r.body["active"] != false {
		t.Fatalf("revoked: %s", r.raw)
	}
}

func TestParseFor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"": 0, "90m": 90 * time.Minute, "2h": 2 * time.Hour, "7d": 7 * 24 * time.Hour} {
		if got, err := ParseFor(in); err != nil || got != want {
			t.Errorf("ParseFor(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0s", "-1h", "soon", "1.5d", "400d", "d", "10"} {
		if _, err := ParseFor(in); err == nil {
			t.Errorf("ParseFor(%q) accepted", in)
		}
	}
}

func FuzzParseFor(f *testing.F) {
	for _, s := range []string{"2h", "7d", "", "-1h", "99999999999d", "1h30m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseFor(s)
		if err == nil && (d < 0 || d > maxFor || (s != "" && d == 0)) {
			t.Fatalf("ParseFor(%q) = %v", s, d)
		}
	})
}
