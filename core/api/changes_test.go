package api

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// schemaEngine is the fake engine with the optional ToolSchemas capability.
type schemaEngine struct{ *fakeEngine }

func (schemaEngine) ToolInputSchema(_ context.Context, tool string) (map[string]any, error) {
	if tool != "deploy" {
		return nil, fmt.Errorf("no tool %q: %w", tool, core.ErrNotFound)
	}
	return map[string]any{"type": "object", "required": []any{"service"},
		"properties": map[string]any{"service": map[string]any{"type": "string", "pattern": "^[a-z]+$"}}}, nil
}

// nextChange returns the next non-comment event of a change stream with
// its data decoded.
func nextChange(t *testing.T, s *sseStream) (string, map[string]any) {
	t.Helper()
	for {
		f := s.next(t)
		if f.comment != "" || f.event == "" {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(f.data), &data); err != nil {
			t.Fatalf("event %s: data %q: %v", f.event, f.data, err)
		}
		return f.event, data
	}
}

func TestChanges(t *testing.T) {
	t.Parallel()
	t.Run("SnapshotThenReadyThenChanges", func(t *testing.T) {
		b := setup(t)
		addApproval(b, "a1", nil)
		s := openSSE(t, b, "/api/v1/events", nil)
		// The snapshot: the pending approval, its run, then ready.
		got := map[string]string{}
		for {
			ev, d := nextChange(t, s)
			if ev == "ready" {
				if d["approvals"] != float64(1) || d["runs"] != float64(1) {
					t.Fatalf("ready %v", d)
				}
				break
			}
			got[ev] = fmt.Sprint(d["id"], "=", d["status"])
		}
		if got["approval"] != "a1=pending" || got["run"] != "run-a1=waiting_approval" {
			t.Fatalf("snapshot %v", got)
		}
		// A new approval shows up, alone (nothing else changed).
		addApproval(b, "a2", nil)
		seen := map[string]bool{}
		for len(seen) < 2 {
			ev, d := nextChange(t, s)
			seen[ev+":"+fmt.Sprint(d["id"])] = true
		}
		if !seen["approval:a2"] || !seen["run:run-a2"] {
			t.Fatalf("after a new approval: %v", seen)
		}
		// Deciding a1 sends it once more, with its final status; its run
		// moving on is a run event.
		b.st.mu.Lock()
		for _, a := range b.st.approvals {
			if a.ID == "a1" {
				a.Status = approvals.StatusApproved
				a.Decisions = append(a.Decisions, approvals.Decision{Actor: "console:admin", Action: approvals.ActionApprove, At: testNow})
			}
		}
		b.st.mu.Unlock()
		b.st.setRun("run-a1", func(r *core.Run) { r.Status = core.RunSucceeded; r.UpdatedAt = testNow.Add(time.Second) })
		seen = map[string]bool{}
		for len(seen) < 2 {
			ev, d := nextChange(t, s)
			seen[fmt.Sprint(ev, ":", d["id"], "=", d["status"])] = true
		}
		if !seen["approval:a1=approved"] || !seen["run:run-a1=succeeded"] {
			t.Fatalf("after the decision: %v", seen)
		}
	})
	t.Run("KindsNarrowTheFeed", func(t *testing.T) {
		b := setup(t)
		addApproval(b, "a1", nil)
		s := openSSE(t, b, "/api/v1/events?kinds=approvals", nil)
		ev, d := nextChange(t, s)
		if ev != "approval" || d["id"] != "a1" {
			t.Fatalf("first %s %v", ev, d)
		}
		if ev, d := nextChange(t, s); ev != "ready" || d["runs"] != float64(0) {
			t.Fatalf("then %s %v, want ready without runs", ev, d)
		}
	})
	t.Run("UnknownKindIs422", func(t *testing.T) {
		b := setup(t)
		r := b.do(t, "GET", "/api/v1/events?kinds=approvals,audit", adminToken, nil)
		want(t, r, 422, "invalid")
		if r.errField("field") != "kinds" {
			t.Fatalf("field %q", r.errField("field"))
		}
	})
	t.Run("ConfinedTokenSeesItsOwn", func(t *testing.T) {
		b := setup(t, func(o *Options) {
			o.Tokens = append(o.Tokens, Token{Name: "ci", Token: "req-only", Actor: "api:ci", Scopes: []core.Scope{core.ScopeRequest}},
				Token{Name: "dora", Token: "decide-only", Actor: "console:dora", Scopes: []core.Scope{core.ScopeDecide}})
		})
		addApproval(b, "theirs", nil)
		addApproval(b, "mine", func(a *approvals.Approval) { a.Requester = "api:ci" })
		b.st.setRun("run-mine", func(r *core.Run) { r.Requester = "api:ci" })
		s := openSSEToken(t, b, "/api/v1/events", "req-only", nil)
		got := map[string]string{}
		for {
			ev, d := nextChange(t, s)
			if ev == "ready" {
				if d["approvals"] != float64(1) || d["runs"] != float64(1) {
					t.Fatalf("ready %v: a token without read watches only its own runs", d)
				}
				break
			}
			got[ev] = fmt.Sprint(d["id"])
		}
		if got["approval"] != "mine" || got["run"] != "run-mine" {
			t.Fatalf("a request-only token watched %v", got)
		}
		want(t, b.do(t, "GET", "/api/v1/events", "decide-only", nil), 403, "missing_scope")
	})
	t.Run("ClientGoneReleasesSubscriptions", func(t *testing.T) {
		b := setup(t)
		s := openSSE(t, b, "/api/v1/events", nil)
		if ev, _ := nextChange(t, s); ev != "ready" {
			t.Fatalf("first event %s on an empty store", ev)
		}
		s.res.Body.Close()
		deadline := time.Now().Add(hang)
		for b.st.activeSubs() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d subscriptions still open after the client left", b.st.activeSubs())
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestMe(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) {
		o.Tokens = append(o.Tokens, Token{Name: "ci", Token: "ci-only", Actor: "api:ci", Scopes: []core.Scope{core.ScopeRequest}})
	})
	r := b.do(t, "GET", "/api/v1/me", "ci-only", nil)
	want(t, r, 200, "")
	if r.body["actor"] != "api:ci" || r.body["name"] != "ci" || fmt.Sprint(r.body["scopes"]) != "[request]" {
		t.Fatalf("me %s", r.raw)
	}
	r = b.do(t, "GET", "/api/v1/me", adminToken, nil)
	if r.body["actor"] != "console:admin" || fmt.Sprint(r.body["scopes"]) != "[read request decide admin]" {
		t.Fatalf("admin me %s", r.raw)
	}
	want(t, b.do(t, "GET", "/api/v1/me", "", nil), 401, "unauthorized")
}

func TestApprovalInputSchema(t *testing.T) {
	t.Parallel()
	b := setup(t, func(o *Options) { o.Engine = schemaEngine{o.Engine.(*fakeEngine)} })
	addApproval(b, "a1", nil)
	addApproval(b, "a2", func(a *approvals.Approval) { a.Status = approvals.StatusRejected })
	addApproval(b, "a3", func(a *approvals.Approval) { a.Tool = "gone" })
	r := b.do(t, "GET", "/api/v1/approvals/a1", adminToken, nil)
	sch, _ := r.body["input_schema"].(map[string]any)
	if sch["type"] != "object" || fmt.Sprint(sch["required"]) != "[service]" {
		t.Fatalf("pending approval's input_schema: %s", r.raw)
	}
	for _, id := range []string{"a2", "a3"} {
		if r := b.do(t, "GET", "/api/v1/approvals/"+id, adminToken, nil); r.body["input_schema"] != nil || r.status != 200 {
			t.Fatalf("%s (decided, or its tool gone) carries an input_schema: %s", id, r.raw)
		}
	}
	// Lists stay small: no schema per item.
	l := b.do(t, "GET", "/api/v1/approvals?status=pending", adminToken, nil)
	for _, it := range l.body["items"].([]any) {
		if it.(map[string]any)["input_schema"] != nil {
			t.Fatalf("list item with input_schema: %s", l.raw)
		}
	}
}
