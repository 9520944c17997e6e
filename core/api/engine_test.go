package api

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/coretest"
	"github.com/opsgate/opsgate/store/sqlite"
)

// These tests drive the API against the real engine on a real SQLite store:
// the HTTP mapping tests above prove the shapes and status codes; these
// prove the API and the engine agree on them end to end.

// Compile-time checks: the real pieces satisfy the seams this package
// declares.
var (
	_ Engine = (*engine.Engine)(nil)
	_ Store  = (*sqlite.Store)(nil)
)

// countingTool records dispatches.
type countingTool struct {
	mu    sync.Mutex
	calls []tools.Call
}

func (c *countingTool) Run(_ context.Context, call tools.Call) (tools.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, call)
	return tools.Result{Output: fmt.Sprintf("deployed %v %v to %v", call.Args["service"], call.Args["version"], call.Args["env"])}, nil
}

func (c *countingTool) Preview(context.Context, tools.Call) (string, error) {
	return "would deploy", nil
}

func (c *countingTool) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

type realBundle struct {
	*bundle
	store  *sqlite.Store
	deploy *countingTool
}

const (
	reqToken   = "req-token"
	aliceToken = "alice-token"
	bobTok     = "bob-real-token"
	eveToken   = "eve-token"
)

// withTokens adds tokens to setupReal's API.
func withTokens(ts ...Token) func(*Options) {
	return func(o *Options) { o.Tokens = append(o.Tokens, ts...) }
}

// setupReal starts the real engine on SQLite behind the API with the
// tokens req, alice, bob and eve; each mod then changes the API's options
// (withTokens adds tokens).
func setupReal(t *testing.T, mod ...func(*Options)) *realBundle {
	t.Helper()
	st := coretest.Store(t)
	schema := coretest.DeploySchema(t)
	deploy := &countingTool{}
	status := &countingTool{}
	eng, err := engine.New(engine.Options{
		Store: st,
		Tools: []*tools.Tool{
			{Name: "deploy", Risk: approvals.RiskHighImpact, Destructive: true, Schema: schema, Runner: deploy},
			{Name: "status", Risk: approvals.RiskRead, Runner: status},
			{Name: "scale", Risk: approvals.RiskExternal, Runner: status},
		},
		Flows: []engine.Flow{
			{Name: "deploy", Command: "deploy {service} {version} {env=staging}",
				Steps: []engine.FlowStep{{Tool: "deploy", Args: map[string]any{"service": "{{.service}}", "version": "{{.version}}", "env": "{{.env}}"}}}},
			{Name: "status", Command: "status {service}", Steps: []engine.FlowStep{{Tool: "status", Args: map[string]any{"service": "{{.service}}"}}}},
			{Name: "scale", Command: "scale {service} {n}", Steps: []engine.FlowStep{{Tool: "scale", Args: map[string]any{"service": "{{.service}}", "n": "{{.n}}"}}}},
		},
		Policy: &approvals.Policy{Rules: []approvals.Rule{
			{Tool: "status", Effect: approvals.EffectAllow},
			{Tool: "deploy", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}},
			{Tool: "deploy", Args: map[string]string{"env": "dr*"}, Effect: approvals.EffectDeny},
			{Tool: "scale", Effect: approvals.EffectAsk, Approvers: []string{"group:sre"}, Escalation: []approvals.Step{
				{After: 10 * time.Minute, Remind: true}, {After: 2 * time.Hour, Outcome: approvals.TerminalDeny}}},
		}},
		Groups:       map[string][]string{"sre": {"console:req", "console:alice", "console:bob"}},
		ApprovalTTL:  time.Hour,
		PollInterval: 20 * time.Millisecond,
		Lease:        2 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	coretest.Run(t, eng)
	o := Options{Engine: eng, Store: st, PollInterval: 50 * time.Millisecond, Tokens: []Token{
		{Name: "req", Token: reqToken, Actor: "console:req"},
		{Name: "alice", Token: aliceToken, Actor: "console:alice"},
		{Name: "bob", Token: bobTok, Actor: "console:bob"},
		{Name: "eve", Token: eveToken, Actor: "console:eve"},
	}}
	for _, m := range mod {
		m(&o)
	}
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &realBundle{bundle: &bundle{url: srv.URL, h: h}, store: st, deploy: deploy}
}

// startDeploy sends a deploy request and returns the run id and the id of
// the approval it asks for, waiting for the engine to suspend the run.
func (b *realBundle) startDeploy(t *testing.T, thread string) (runID, approvalID string) {
	t.Helper()
	r := b.do(t, "POST", "/api/v1/messages", reqToken, map[string]string{"thread": thread, "text": "deploy api 1.2.3"})
	want(t, r, 201, "")
	runID = r.body["run"].(map[string]any)["id"].(string)
	deadline := time.Now().Add(hang)
	for time.Now().Before(deadline) {
		r := b.do(t, "GET", "/api/v1/approvals?status=pending&run_id="+runID, reqToken, nil)
		want(t, r, 200, "")
		if items := r.body["items"].([]any); len(items) == 1 {
			return runID, items[0].(map[string]any)["id"].(string)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s never asked for approval", runID)
	return "", ""
}

func (b *realBundle) waitRun(t *testing.T, runID string, status core.RunStatus) map[string]any {
	t.Helper()
	deadline := time.Now().Add(hang)
	for {
		r := b.do(t, "GET", "/api/v1/runs/"+runID, reqToken, nil)
		want(t, r, 200, "")
		if r.body["status"] == string(status) {
			return r.body
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %v, want %s: %s", runID, r.body["status"], status, r.raw)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRealApproveFlowWithEventStream(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	runID, aid := b.startDeploy(t, "ops-1")

	s := openSSEToken(t, b.bundle, "/api/v1/runs/"+runID+"/events", reqToken, nil)
	var types []string
	for !containsStr(types, core.EventPermissionRequested) {
		types = append(types, s.nextEvent(t).event)
	}
	if types[0] != core.EventRunQueued {
		t.Fatalf("stream starts with %v", types)
	}

	r := b.do(t, "GET", "/api/v1/approvals/"+aid, reqToken, nil)
	want(t, r, 200, "")
	if r.body["executed_args"] != nil || r.body["approved_args"] != nil || r.body["thread"] != "console:ops-1" ||
		r.body["proposed_args"].(map[string]any)["env"] != "staging" || r.body["dry_run_preview"] != "would deploy" {
		t.Fatalf("pending approval %s", r.raw)
	}

	want(t, b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", reqToken, map[string]string{"action": "approve"}), 403, "self_approval")
	want(t, b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", eveToken, map[string]string{"action": "approve"}), 403, "not_approver")
	r = b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", aliceToken, map[string]any{"action": "edit",
		"args": map[string]any{"service": "Bad Name", "version": "1"}})
	want(t, r, 422, "invalid_args")
	t.Logf("422: %s", r.raw)
	if r.errField("field") == "" {
		t.Errorf("422 without field: %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", aliceToken, map[string]any{"action": "edit",
		"args": map[string]any{"service": "api", "version": "1", "env": "dr1"}}), 403, "denied_by_policy")

	r = b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", aliceToken, map[string]any{"action": "edit",
		"args": map[string]any{"service": "api", "version": "1.2.4"}, "reason": "use the fix"})
	want(t, r, 200, "")
	if r.body["status"] != "edited" || r.body["approved_args"].(map[string]any)["version"] != "1.2.4" {
		t.Fatalf("edit %s", r.raw)
	}

	// The stream carries the dispatch and ends once the run is final.
	for {
		f := s.nextEvent(t)
		types = append(types, f.event)
		if f.event == "end" {
			if !strings.Contains(f.data, `"succeeded"`) {
				t.Fatalf("end %q", f.data)
			}
			break
		}
	}
	for _, ty := range []string{core.EventToolStarted, core.EventToolFinished} {
		if !containsStr(types, ty) {
			t.Errorf("stream %v lacks %s", types, ty)
		}
	}
	s.closed(t)

	run := b.waitRun(t, runID, core.RunSucceeded)
	step := run["steps"].([]any)[0].(map[string]any)
	if step["approval_id"] != aid || !strings.Contains(step["output"].(string), "deployed api 1.2.4 to staging") {
		t.Fatalf("step %v", step)
	}
	r = b.do(t, "GET", "/api/v1/approvals/"+aid, reqToken, nil)
	if ex, _ := r.body["executed_args"].(map[string]any); ex["version"] != "1.2.4" || ex["env"] != "staging" {
		t.Fatalf("executed_args %v", r.body["executed_args"])
	}
	if b.deploy.count() != 1 {
		t.Fatalf("%d dispatches", b.deploy.count())
	}

	// Late decisions lose and are told who won.
	r = b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", bobTok, map[string]string{"action": "reject"})
	want(t, r, 409, "already_decided")
	t.Logf("409: %s", r.raw)
	if !strings.Contains(r.errField("message"), "console:alice") {
		t.Fatalf("409 does not name the winner: %s", r.raw)
	}

	// Replaying with Last-Event-ID resumes after it.
	s2 := openSSEToken(t, b.bundle, "/api/v1/runs/"+runID+"/events", reqToken, map[string]string{"Last-Event-ID": "0"})
	first := s2.nextEvent(t)
	s3 := openSSEToken(t, b.bundle, "/api/v1/runs/"+runID+"/events", reqToken, map[string]string{"Last-Event-ID": first.id})
	if second := s3.nextEvent(t); second.id == first.id || second.event == "end" {
		t.Fatalf("resume after %s gave %+v", first.id, second)
	}

	r = b.do(t, "GET", "/api/v1/audit?run_id="+runID, reqToken, nil)
	want(t, r, 200, "")
	if n := len(r.body["items"].([]any)); n < 4 { // requested, 3 refusals, decided...
		t.Fatalf("%d audit entries for the run: %s", n, r.raw)
	}
	// Newest first (the CLI's audit list, the TUI's history), a kind filter.
	seqs := func(r resp) []float64 {
		var out []float64
		for _, it := range r.body["items"].([]any) {
			out = append(out, it.(map[string]any)["seq"].(float64))
		}
		return out
	}
	r = b.do(t, "GET", "/api/v1/audit?order=newest&limit=2&run_id="+runID, reqToken, nil)
	want(t, r, 200, "")
	newest := seqs(r)
	if len(newest) != 2 || newest[0] <= newest[1] || r.body["next_cursor"] != fmt.Sprint(newest[1]) {
		t.Fatalf("newest first: %s", r.raw)
	}
	r = b.do(t, "GET", "/api/v1/audit?order=newest&limit=2&run_id="+runID+"&cursor="+fmt.Sprint(newest[1]), reqToken, nil)
	if older := seqs(r); len(older) == 0 || older[0] >= newest[1] {
		t.Fatalf("the next page: %s", r.raw)
	}
	r = b.do(t, "GET", "/api/v1/audit?kind=approval.requested&run_id="+runID, reqToken, nil)
	for _, it := range r.body["items"].([]any) {
		if k := it.(map[string]any)["kind"]; k != "approval.requested" {
			t.Fatalf("kind filter let through %v", k)
		}
	}
	want(t, b.do(t, "GET", "/api/v1/audit?order=sideways", reqToken, nil), 422, "invalid")
	r = b.do(t, "GET", "/api/v1/audit/verify", reqToken, nil)
	if r.status != 200 || r.body["ok"] != true {
		t.Fatalf("verify %s", r.raw)
	}
}

func TestRealConcurrentDecisions(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	runID, aid := b.startDeploy(t, "ops-race")
	toks := []string{aliceToken, bobTok}
	const n = 20
	results := make([]resp, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			action := "approve"
			if i%3 == 0 {
				action = "reject"
			}
			results[i] = b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", toks[i%2], map[string]string{"action": action})
		})
	}
	wg.Wait()
	a, err := b.store.ApprovalGet(t.Context(), aid)
	if err != nil {
		t.Fatal(err)
	}
	winners := a.Winners()
	if len(winners) != 1 {
		t.Fatalf("winners %v", winners)
	}
	wins := 0
	for _, r := range results {
		switch r.status {
		case 200:
			wins++
		case 409:
			if !strings.Contains(r.errField("message")+r.errField("by"), winners[0]) {
				t.Errorf("409 does not name %s: %s", winners[0], r.raw)
			}
		default:
			t.Errorf("unexpected %d: %s", r.status, r.raw)
		}
	}
	if wins != 1 {
		t.Fatalf("%d decisions won", wins)
	}
	if a.Status == approvals.StatusRejected {
		b.waitRun(t, runID, core.RunRejected)
	} else {
		b.waitRun(t, runID, core.RunSucceeded)
	}
	if got, wantN := b.deploy.count(), map[bool]int{true: 0, false: 1}[a.Status == approvals.StatusRejected]; got != wantN {
		t.Fatalf("%d dispatches, want %d", got, wantN)
	}
}

func TestRealRunsCancelAndPaging(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	runID, aid := b.startDeploy(t, "ops-cancel")
	r := b.do(t, "POST", "/api/v1/runs/"+runID+"/cancel", aliceToken, nil)
	want(t, r, 200, "")
	if r.body["status"] != "cancelled" {
		t.Fatalf("cancel %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/cancel", aliceToken, nil), 409, "already_final")
	want(t, b.do(t, "POST", "/api/v1/runs/nope/cancel", aliceToken, nil), 404, "not_found")
	r = b.do(t, "POST", "/api/v1/approvals/"+aid+"/decision", aliceToken, map[string]string{"action": "approve"})
	if r.status != 409 && r.status != 410 {
		t.Fatalf("deciding a cancelled run's approval: %d %s", r.status, r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/approvals/nope/decision", aliceToken, map[string]string{"action": "approve"}), 404, "")
	want(t, b.do(t, "GET", "/api/v1/approvals/nope", aliceToken, nil), 404, "not_found")
	want(t, b.do(t, "GET", "/api/v1/runs/nope", aliceToken, nil), 404, "not_found")

	for i := range 4 {
		want(t, b.do(t, "POST", "/api/v1/messages", reqToken, map[string]string{"thread": fmt.Sprint("p", i), "text": "status api"}), 201, "")
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		r := b.do(t, "GET", "/api/v1/runs?limit=2&cursor="+cursor, reqToken, nil)
		want(t, r, 200, "")
		pages++
		for _, it := range r.body["items"].([]any) {
			id := it.(map[string]any)["id"].(string)
			if seen[id] {
				t.Fatalf("run %s on two pages", id)
			}
			seen[id] = true
		}
		if cursor = r.body["next_cursor"].(string); cursor == "" || pages > 10 {
			break
		}
	}
	if len(seen) != 5 || pages != 3 {
		t.Fatalf("%d runs over %d pages", len(seen), pages)
	}
	r = b.do(t, "GET", "/api/v1/runs?cursor=forged", reqToken, nil)
	want(t, r, 422, "invalid")
	if r.errField("field") != "cursor" {
		t.Fatalf("field %q", r.errField("field"))
	}
}

func TestRealDeliveries(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	b.startDeploy(t, "ops-d") // queues a card for the console thread
	r := b.do(t, "GET", "/api/v1/deliveries?status=pending", reqToken, nil)
	want(t, r, 200, "")
	items := r.body["items"].([]any)
	if len(items) == 0 {
		t.Fatalf("no pending deliveries: %s", r.raw)
	}
	id := items[0].(map[string]any)["id"].(string)
	want(t, b.do(t, "POST", "/api/v1/deliveries/"+id+"/requeue", reqToken, nil), 409, "not_dead")

	now := time.Now()
	claimed, err := b.store.OutboxClaim(t.Context(), core.OutboxClaimParams{Channel: "console", Owner: "test", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(claimed) == 0 {
		t.Fatalf("claim: %v (%d)", err, len(claimed))
	}
	dead := claimed[0].ID
	if err := b.store.OutboxRetry(t.Context(), core.OutboxRetryParams{ID: dead, Owner: "test", Error: "boom", Dead: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	r = b.do(t, "GET", "/api/v1/deliveries?status=dead", reqToken, nil)
	if items := r.body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["last_error"] != "boom" {
		t.Fatalf("dead %s", r.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/deliveries/"+dead+"/requeue", reqToken, nil), 200, "")
	want(t, b.do(t, "POST", "/api/v1/deliveries/nope/requeue", reqToken, nil), 404, "not_found")
}

// GET /api/v1/messages is the thread's history: a message that started no
// run is there, followed by opsgate's help reply.
func TestRealThreadMessages(t *testing.T) {
	t.Parallel()
	b := setupReal(t)
	want(t, b.do(t, "POST", "/api/v1/messages", reqToken, map[string]string{"thread": "hist", "text": "hepl"}), 200, "")
	deadline := time.Now().Add(hang)
	for {
		r := b.do(t, "GET", "/api/v1/messages?thread=console:hist", reqToken, nil)
		want(t, r, 200, "")
		items := r.body["items"].([]any)
		if len(items) == 2 {
			out, in := items[0].(map[string]any), items[1].(map[string]any)
			if in["direction"] != "in" || in["text"] != "hepl" || in["actor"] != "console:req" {
				t.Fatalf("oldest item = %v, want the user's message", in)
			}
			if out["direction"] != "out" || !strings.Contains(out["text"].(string), "deploy") {
				t.Fatalf("newest item = %v, want the help reply listing the flows", out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history %s", r.raw)
		}
		time.Sleep(10 * time.Millisecond)
	}
	want(t, b.do(t, "GET", "/api/v1/messages", reqToken, nil), 422, "")
	want(t, b.do(t, "GET", "/api/v1/messages?thread=console:hist&cursor=forged", reqToken, nil), 422, "")
}

func containsStr(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
