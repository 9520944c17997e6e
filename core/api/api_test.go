package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/testkit"
)

const (
	adminToken = "s3cret-admin-token"
	bobToken   = "bob-token"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

type bundle struct {
	st  *memStore
	eng *fakeEngine
	url string
	h   http.Handler
}

func setup(t *testing.T, mod ...func(*Options)) *bundle {
	t.Helper()
	st := newMemStore()
	now := func() time.Time { return testNow }
	eng := &fakeEngine{st: st, now: now}
	o := Options{
		Engine: eng, Store: st, Now: now,
		Tokens: []Token{
			{Name: "admin", Token: adminToken, Actor: "console:admin"},
			{Name: "bob", Token: bobToken, Actor: "console:bob"},
		},
		PollInterval: 20 * time.Millisecond,
	}
	for _, f := range mod {
		f(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{st: st, eng: eng, url: srv.URL, h: h}
}

type resp struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r resp) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (r resp) errField(k string) string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e[k].(string)
	return s
}

func (b *bundle) do(t *testing.T, method, path, token string, body any) resp {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(v)
	case []byte:
		rd = bytes.NewReader(v)
	default:
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, b.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: string(raw)}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		t.Fatalf("%s %s: response is not a JSON object (%d): %q", method, path, res.StatusCode, raw)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s %s: Content-Type %q", method, path, ct)
	}
	return out
}

func want(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d; body %s", r.status, status, r.raw)
	}
	if code != "" && r.errCode() != code {
		t.Fatalf("error code %q, want %q; body %s", r.errCode(), code, r.raw)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	eng := &fakeEngine{st: st}
	cases := map[string]Options{
		"NoEngine":    {Store: st},
		"NoStore":     {Engine: eng},
		"EmptyToken":  {Engine: eng, Store: st, Tokens: []Token{{Name: "x", Actor: "console:x"}}},
		"BadActor":    {Engine: eng, Store: st, Tokens: []Token{{Name: "x", Token: "t", Actor: "admin"}}},
		"EmptyActor":  {Engine: eng, Store: st, Tokens: []Token{{Name: "x", Token: "t"}}},
		"ActorNoUser": {Engine: eng, Store: st, Tokens: []Token{{Name: "x", Token: "t", Actor: "console:"}}},
	}
	for name, o := range cases {
		if _, err := New(o); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for name, hdr := range map[string]string{
		"Missing":     "",
		"WrongScheme": "Basic " + adminToken,
		"NoToken":     "Bearer ",
		"Wrong":       "Bearer not-the-token",
		"Prefix":      "Bearer " + adminToken[:5],
		"Longer":      "Bearer " + adminToken + "x",
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", b.url+"/api/v1/runs", nil)
			if hdr != "" {
				req.Header.Set("Authorization", hdr)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			var body map[string]map[string]string
			if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if res.StatusCode != 401 || body["error"]["code"] != "unauthorized" {
				t.Fatalf("got %d %v", res.StatusCode, body)
			}
			if !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Fatalf("WWW-Authenticate %q", res.Header.Get("WWW-Authenticate"))
			}
		})
	}
	t.Run("UnknownRouteNeedsTokenToo", func(t *testing.T) {
		want(t, b.do(t, "GET", "/api/v1/nope", "", nil), 401, "unauthorized")
	})
	t.Run("EachTokenActsAsItsActor", func(t *testing.T) {
		want(t, b.do(t, "POST", "/api/v1/messages", adminToken, map[string]string{"thread": "a", "text": "hello"}), 200, "")
		want(t, b.do(t, "POST", "/api/v1/messages", bobToken, map[string]string{"thread": "a", "text": "hello"}), 200, "")
		b.eng.mu.Lock()
		defer b.eng.mu.Unlock()
		if got := []string{b.eng.events[0].Actor.ID, b.eng.events[1].Actor.ID}; got[0] != "console:admin" || got[1] != "console:bob" {
			t.Fatalf("actors %v", got)
		}
	})
}

func TestRouting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("UnknownRouteIs404JSON", func(t *testing.T) {
		want(t, b.do(t, "GET", "/api/v1/nothing-here", adminToken, nil), 404, "not_found")
		want(t, b.do(t, "GET", "/api/v2/runs", adminToken, nil), 404, "not_found")
	})
	t.Run("WrongMethodIs405JSON", func(t *testing.T) {
		r := b.do(t, "DELETE", "/api/v1/runs", adminToken, nil)
		want(t, r, 405, "method_not_allowed")
		if !strings.Contains(r.header.Get("Allow"), "GET") {
			t.Fatalf("Allow %q", r.header.Get("Allow"))
		}
		want(t, b.do(t, "PUT", "/api/v1/messages", adminToken, nil), 405, "method_not_allowed")
		want(t, b.do(t, "GET", "/api/v1/approvals/a1/decision", adminToken, nil), 405, "method_not_allowed")
	})
	t.Run("AccessLogNamesActorAndStatus", func(t *testing.T) {
		var buf testkit.LogBuffer
		b := setup(t, func(o *Options) {
			o.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		})
		want(t, b.do(t, "POST", "/api/v1/messages", bobToken, map[string]string{"thread": "a", "text": "deploy x"}), 201, "")
		want(t, b.do(t, "GET", "/api/v1/runs", "wrong", nil), 401, "")
		out := buf.String()
		if !strings.Contains(out, "status=201 actor=console:bob") || !strings.Contains(out, "status=401 actor=\"\"") {
			t.Fatalf("log:\n%s", out)
		}
		if strings.Contains(out, bobToken) {
			t.Fatal("the log contains a token")
		}
	})
	t.Run("PanicIs500JSON", func(t *testing.T) {
		b := setup(t)
		b.eng.panic = true
		want(t, b.do(t, "POST", "/api/v1/messages", adminToken, map[string]string{"thread": "a", "text": "x"}), 500, "internal")
	})
}

func TestMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	t.Run("StartsRun201", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/messages", adminToken, map[string]string{"thread": "ops-1", "text": "deploy api 1.2.3"})
		want(t, r, 201, "")
		run := r.body["run"].(map[string]any)
		if run["thread"] != "console:ops-1" || run["requester"] != "console:admin" || run["status"] != "queued" {
			t.Fatalf("run %v", run)
		}
		if r.header.Get("Location") != "/api/v1/runs/"+run["id"].(string) {
			t.Fatalf("Location %q", r.header.Get("Location"))
		}
		if id, _ := r.body["event_id"].(string); len(id) != 36 || id[14] != '7' {
			t.Fatalf("event_id %q is not a UUIDv7", id)
		}
		b.eng.mu.Lock()
		ev := b.eng.events[len(b.eng.events)-1]
		b.eng.mu.Unlock()
		if ev.Channel != "console" || ev.Thread != (core.Thread{Channel: "console", Key: "ops-1"}) ||
			ev.Text != "deploy api 1.2.3" || !ev.ReceivedAt.Equal(testNow) {
			t.Fatalf("event %+v", ev)
		}
	})
	t.Run("SameEventIDIsIdempotent", func(t *testing.T) {
		body := map[string]string{"thread": "ops-2", "text": "deploy web 2", "event_id": "client-1"}
		r1 := b.do(t, "POST", "/api/v1/messages", adminToken, body)
		want(t, r1, 201, "")
		r2 := b.do(t, "POST", "/api/v1/messages", adminToken, body)
		want(t, r2, 200, "")
		if r2.body["event_id"] != "client-1" || r2.body["duplicate"] != true ||
			r2.body["run"].(map[string]any)["id"] != r1.body["run"].(map[string]any)["id"] {
			t.Fatalf("second delivery %s", r2.raw)
		}
	})
	t.Run("NoRunIs200WithNull", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/messages", adminToken, map[string]string{"thread": "console:ops-3", "text": "hello"})
		want(t, r, 200, "")
		if v, ok := r.body["run"]; !ok || v != nil {
			t.Fatalf("run %v (present %v)", v, ok)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		big := strings.Repeat("x", MaxMessageText+1)
		cases := []struct {
			name, body string
			status     int
			code       string
			field      string
		}{
			{"MissingThread", `{"text":"deploy"}`, 422, "invalid", "thread"},
			{"EmptyThread", `{"thread":"  ","text":"deploy"}`, 422, "invalid", "thread"},
			{"MissingText", `{"thread":"t"}`, 422, "invalid", "text"},
			{"EmptyText", `{"thread":"t","text":""}`, 422, "invalid", "text"},
			{"WrongType", `{"thread":5,"text":"x"}`, 422, "invalid", "thread"},
			{"TextTooLong", `{"thread":"t","text":"` + big + `"}`, 413, "too_large", "text"},
			{"Malformed", `{"thread":"t",`, 400, "malformed_json", ""},
			{"NotJSON", `thread=t&text=x`, 400, "malformed_json", ""},
			{"Array", `[1,2]`, 400, "malformed_json", ""},
			{"Trailing", `{"thread":"t","text":"x"} {}`, 400, "malformed_json", ""},
			{"Empty", ``, 400, "malformed_json", ""},
			{"UnknownField", `{"thread":"t","text":"x","txet":"y"}`, 400, "unknown_field", ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := b.do(t, "POST", "/api/v1/messages", adminToken, c.body)
				want(t, r, c.status, c.code)
				if r.errField("field") != c.field {
					t.Fatalf("field %q, want %q", r.errField("field"), c.field)
				}
			})
		}
	})
	t.Run("BodyOverCapIs413", func(t *testing.T) {
		b := setup(t, func(o *Options) { o.MaxBodyBytes = 64 })
		r := b.do(t, "POST", "/api/v1/messages", adminToken, `{"thread":"t","text":"`+strings.Repeat("y", 100)+`"}`)
		want(t, r, 413, "too_large")
		b.eng.mu.Lock()
		defer b.eng.mu.Unlock()
		if len(b.eng.events) != 0 {
			t.Fatal("an oversized body reached the engine")
		}
	})
	t.Run("DefaultCapIs1MiB", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/approvals/x/decision", adminToken, `{"action":"reject","reason":"`+strings.Repeat("y", 1<<20)+`"}`)
		want(t, r, 413, "too_large")
	})
}

func addRuns(b *bundle, n int) {
	loc := time.FixedZone("CEST", 2*3600)
	for i := range n {
		at := testNow.Add(time.Duration(i) * time.Minute).In(loc)
		b.st.addRun(&core.Run{ID: "r" + string(rune('a'+i)), Flow: "deploy", Thread: core.Thread{Channel: "slack", Key: "T1/C1"},
			Requester: "slack:U1", Status: core.RunSucceeded, CreatedAt: at, UpdatedAt: at,
			Steps: []core.Step{{Index: 0, Tool: "deploy", Status: core.StepSucceeded, Output: "ok", Args: map[string]any{"service": "api"}}}})
	}
}

func TestRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	addRuns(b, 5)
	t.Run("GetShape", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/runs/ra", adminToken, nil)
		want(t, r, 200, "")
		if r.body["thread"] != "slack:T1/C1" || r.body["created_at"] != "2026-03-04T05:06:07Z" {
			t.Fatalf("run %s", r.raw)
		}
		st := r.body["steps"].([]any)[0].(map[string]any)
		if st["index"] != 0.0 || st["tool"] != "deploy" || st["output"] != "ok" || st["args"].(map[string]any)["service"] != "api" {
			t.Fatalf("step %v", st)
		}
	})
	t.Run("UnknownIs404", func(t *testing.T) {
		want(t, b.do(t, "GET", "/api/v1/runs/nope", adminToken, nil), 404, "not_found")
	})
	t.Run("PaginatesWithCursor", func(t *testing.T) {
		var ids []string
		cursor := ""
		for range 10 {
			r := b.do(t, "GET", "/api/v1/runs?limit=2&cursor="+cursor, adminToken, nil)
			want(t, r, 200, "")
			items := r.body["items"].([]any)
			if len(items) > 2 {
				t.Fatalf("%d items over limit", len(items))
			}
			for _, it := range items {
				ids = append(ids, it.(map[string]any)["id"].(string))
			}
			cursor = r.body["next_cursor"].(string)
			if cursor == "" {
				break
			}
		}
		if strings.Join(ids, ",") != "re,rd,rc,rb,ra" {
			t.Fatalf("pages gave %v", ids)
		}
	})
	t.Run("Filters", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/runs?status=failed", adminToken, nil)
		want(t, r, 200, "")
		if items := r.body["items"].([]any); len(items) != 0 || r.body["next_cursor"] != "" {
			t.Fatalf("status filter %s", r.raw)
		}
		r = b.do(t, "GET", "/api/v1/runs?thread=slack:T1/C1&status=succeeded", adminToken, nil)
		if items := r.body["items"].([]any); len(items) != 5 {
			t.Fatalf("thread filter %d items", len(items))
		}
		r = b.do(t, "GET", "/api/v1/runs?id_prefix=rc", adminToken, nil)
		if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["id"] != "rc" {
			t.Fatalf("id_prefix filter %s", r.raw)
		}
	})
	t.Run("BadQueryIs422", func(t *testing.T) {
		for q, field := range map[string]string{
			"status=bogus": "status", "limit=0": "limit", "limit=x": "limit",
			"thread=nocolon": "thread", "cursor=forged": "cursor",
			"id_prefix=a%25": "id_prefix", "id_prefix=" + strings.Repeat("a", 37): "id_prefix",
		} {
			r := b.do(t, "GET", "/api/v1/runs?"+q, adminToken, nil)
			want(t, r, 422, "invalid")
			if r.errField("field") != field {
				t.Errorf("%s: field %q", q, r.errField("field"))
			}
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		b.st.addRun(&core.Run{ID: "live", Thread: core.Thread{Channel: "console", Key: "x"}, Status: core.RunWaitingApproval})
		r := b.do(t, "POST", "/api/v1/runs/live/cancel", bobToken, nil)
		want(t, r, 200, "")
		if r.body["status"] != "cancelled" || r.body["error_message"] != "cancelled by console:bob" {
			t.Fatalf("cancel %s", r.raw)
		}
		r = b.do(t, "POST", "/api/v1/runs/live/cancel", bobToken, nil)
		want(t, r, 409, "already_final")
		if !strings.Contains(r.errField("message"), "cancelled") {
			t.Fatalf("409 message %q", r.errField("message"))
		}
		want(t, b.do(t, "POST", "/api/v1/runs/nope/cancel", bobToken, nil), 404, "not_found")
	})
}

func addApproval(b *bundle, id string, mod func(*approvals.Approval)) {
	a := &approvals.Approval{ID: id, RunID: "run-" + id, Thread: "console:ops", Requester: "console:carol", Tool: "deploy",
		Risk: approvals.RiskHighImpact, ProposedArgs: map[string]any{"service": "api"}, Status: approvals.StatusPending,
		Approvers: []string{"group:sre"}, Eligible: []string{"console:admin", "console:bob"}, Quorum: 1,
		CreatedAt: testNow.Add(-time.Minute), ExpiresAt: testNow.Add(time.Hour)}
	if mod != nil {
		mod(a)
	}
	b.st.mu.Lock()
	b.st.approvals = append(b.st.approvals, a)
	b.st.mu.Unlock()
	b.st.addRun(&core.Run{ID: a.RunID, Thread: core.Thread{Channel: "console", Key: "ops"}, Status: core.RunWaitingApproval,
		Steps: []core.Step{{Index: 0, Tool: "deploy", Status: core.StepWaitingApproval, ApprovalID: id, Args: a.ProposedArgs}}})
}

func TestApprovals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	addApproval(b, "a1", nil)
	addApproval(b, "a2", nil)
	addApproval(b, "old", func(a *approvals.Approval) { a.ExpiresAt = testNow.Add(-time.Second) })
	t.Run("GetShape", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals/a1", adminToken, nil)
		want(t, r, 200, "")
		for k, v := range map[string]any{"id": "a1", "run_id": "run-a1", "thread": "console:ops", "requester": "console:carol",
			"tool": "deploy", "risk": "high_impact", "status": "pending", "quorum": 1.0, "approved_args": nil,
			"executed_args": nil, "decided_at": nil, "created_at": "2026-03-04T05:05:07Z", "expires_at": "2026-03-04T06:06:07Z",
			"dry_run_preview": "", "reason": ""} {
			if got, ok := r.body[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		if d, ok := r.body["decisions"].([]any); !ok || len(d) != 0 {
			t.Errorf("decisions %v", r.body["decisions"])
		}
		if ap := r.body["approvers"].([]any); len(ap) != 1 || ap[0] != "group:sre" {
			t.Errorf("approvers %v", ap)
		}
	})
	t.Run("IDPrefix", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals?id_prefix=a", adminToken, nil)
		want(t, r, 200, "")
		if items := r.body["items"].([]any); len(items) != 2 {
			t.Fatalf("id_prefix=a: %s", r.raw)
		}
		want(t, b.do(t, "GET", "/api/v1/approvals?id_prefix=a_", adminToken, nil), 422, "invalid")
	})
	t.Run("UnknownIs404", func(t *testing.T) {
		want(t, b.do(t, "GET", "/api/v1/approvals/nope", adminToken, nil), 404, "not_found")
		want(t, b.do(t, "POST", "/api/v1/approvals/nope/decision", adminToken, map[string]string{"action": "approve"}), 404, "not_found")
	})
	t.Run("Refusals", func(t *testing.T) {
		want(t, b.do(t, "POST", "/api/v1/approvals/old/decision", adminToken, map[string]string{"action": "approve"}), 410, "expired")
		r := b.do(t, "POST", "/api/v1/approvals/a2/decision", "s3cret-admin-token", map[string]any{"action": "edit", "args": map[string]any{"env": "x"}})
		want(t, r, 422, "invalid_args")
		if r.errField("field") != "service" {
			t.Fatalf("field %q", r.errField("field"))
		}
		want(t, b.do(t, "POST", "/api/v1/approvals/a2/decision", adminToken, map[string]any{"action": "edit", "args": map[string]any{"service": "forbidden"}}), 403, "denied_by_policy")
	})
	t.Run("NotApproverIs403", func(t *testing.T) {
		b := setup(t, func(o *Options) { o.Tokens = append(o.Tokens, Token{Name: "eve", Token: "eve", Actor: "console:eve"}) })
		addApproval(b, "a1", nil)
		want(t, b.do(t, "POST", "/api/v1/approvals/a1/decision", "eve", map[string]string{"action": "approve"}), 403, "not_approver")
	})
	t.Run("BadBodies", func(t *testing.T) {
		for body, wantStatus := range map[string]int{
			`{"action":"approve"`:                   400,
			`{"action":"approve","scop":"call"}`:    400,
			`nope`:                                  400,
			`{}`:                                    422,
			`{"action":"maybe"}`:                    422,
			`{"action":"approve","scope":"always"}`: 422,
			`{"action":"edit"}`:                     422,
			`{"action":"approve","args":{"a":1}}`:   422,
			`{"action":"edit","args":[1]}`:          422,
			`{"action":1}`:                          422,
		} {
			r := b.do(t, "POST", "/api/v1/approvals/a2/decision", adminToken, body)
			if r.status != wantStatus {
				t.Errorf("%s: %d, want %d (%s)", body, r.status, wantStatus, r.raw)
			}
		}
		if a, _ := b.st.ApprovalGet(t.Context(), "a2"); a.Status != approvals.StatusPending {
			t.Fatal("a bad body changed the approval")
		}
	})
	t.Run("ApproveThenConflictNamesWinner", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/approvals/a1/decision", adminToken, map[string]string{"action": "approve", "reason": "lgtm", "scope": "session"})
		want(t, r, 200, "")
		if r.body["status"] != "approved" || r.body["approved_args"].(map[string]any)["service"] != "api" {
			t.Fatalf("approve %s", r.raw)
		}
		d := r.body["decisions"].([]any)[0].(map[string]any)
		if d["actor"] != "console:admin" || d["channel"] != "api" || d["action"] != "approve" || d["reason"] != "lgtm" || d["at"] != "2026-03-04T05:06:07Z" {
			t.Fatalf("decision %v", d)
		}
		r = b.do(t, "POST", "/api/v1/approvals/a1/decision", bobToken, map[string]string{"action": "reject"})
		want(t, r, 409, "already_decided")
		if r.errField("by") != "console:admin" || !strings.Contains(r.errField("message"), "console:admin") {
			t.Fatalf("409 %s", r.raw)
		}
	})
	t.Run("ExecutedArgsOnceDispatched", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals/a1", adminToken, nil)
		if r.body["executed_args"] != nil {
			t.Fatalf("executed_args before dispatch: %v", r.body["executed_args"])
		}
		b.st.setRun("run-a1", func(run *core.Run) {
			run.Steps[0].Status, run.Steps[0].Args = core.StepSucceeded, map[string]any{"service": "api", "env": "staging"}
		})
		r = b.do(t, "GET", "/api/v1/approvals/a1", adminToken, nil)
		if ex, _ := r.body["executed_args"].(map[string]any); ex["env"] != "staging" {
			t.Fatalf("executed_args %v", r.body["executed_args"])
		}
	})
	t.Run("ListFilters", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/approvals?status=pending", adminToken, nil)
		want(t, r, 200, "")
		var ids []string
		for _, it := range r.body["items"].([]any) {
			ids = append(ids, it.(map[string]any)["id"].(string))
		}
		if strings.Join(ids, ",") != "old,a2" {
			t.Fatalf("pending %v", ids)
		}
		r = b.do(t, "GET", "/api/v1/approvals?run_id=run-a1&limit=1", adminToken, nil)
		if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["executed_args"] == nil {
			t.Fatalf("by run %s", r.raw)
		}
		r = b.do(t, "GET", "/api/v1/approvals?limit=1", adminToken, nil)
		c := r.body["next_cursor"].(string)
		r2 := b.do(t, "GET", "/api/v1/approvals?limit=5&cursor="+c, adminToken, nil)
		if len(r2.body["items"].([]any)) != 2 {
			t.Fatalf("second page %s", r2.raw)
		}
		want(t, b.do(t, "GET", "/api/v1/approvals?status=maybe", adminToken, nil), 422, "invalid")
	})
}

func TestConcurrentDecisionsOneWins(t *testing.T) {
	t.Parallel()
	b := setup(t)
	addApproval(b, "race", nil)
	const n = 30
	var wg sync.WaitGroup
	results := make([]resp, n)
	for i := range n {
		wg.Go(func() {
			tok, action := adminToken, "approve"
			if i%2 == 1 {
				tok, action = bobToken, "reject"
			}
			results[i] = b.do(t, "POST", "/api/v1/approvals/race/decision", tok, map[string]string{"action": action})
		})
	}
	wg.Wait()
	a, _ := b.st.ApprovalGet(t.Context(), "race")
	winner := a.Decisions[0].Actor
	wins := 0
	for _, r := range results {
		switch r.status {
		case 200:
			wins++
		case 409:
			if r.errField("by") != winner {
				t.Errorf("409 names %q, winner %q", r.errField("by"), winner)
			}
		default:
			t.Errorf("status %d: %s", r.status, r.raw)
		}
	}
	if wins != 1 || len(a.Decisions) != 1 {
		t.Fatalf("%d wins, %d decisions", wins, len(a.Decisions))
	}
}
