package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

const (
	appToken   = "app-token"   // console:alice, may decide, agent_concurrency 1
	otherToken = "other-token" // another app
	agentTok   = "agent-token" // agent:claude: session.run, never decides
)

type agentBundle struct {
	*bundle
	fa       *fakeAgent
	sessions *memSessions
}

func setupAgent(t *testing.T) *agentBundle {
	t.Helper()
	return setupAgentWith(t, NewAttendance())
}

// setupAgentWith is setupAgent whose API and fake engine share att.
func setupAgentWith(t *testing.T, att *Attendance) *agentBundle {
	t.Helper()
	sessions := &memSessions{}
	var fa *fakeAgent
	b := setup(t, func(o *Options) {
		fa = newFakeAgent(o.Store.(*memStore), att)
		o.Tokens = append(o.Tokens,
			Token{Name: "app", Token: appToken, Actor: "console:alice",
				Scopes: []core.Scope{core.ScopeRead, core.ScopeDecide, core.ScopeSessionRun}, AgentConcurrency: 1},
			Token{Name: "other", Token: otherToken, Actor: "api:other", Scopes: []core.Scope{core.ScopeSessionRun}},
			Token{Name: "claude", Token: agentTok, Actor: "agent:claude"})
		o.Agent = &AgentOptions{Engine: fa, Sessions: sessions, Attendance: att,
			Agents: []AgentInfo{{Name: "ops", Model: "default", Default: true, Tools: []string{"deploy"}, Settings: json.RawMessage(`{"max_steps":20}`)},
				{Name: "triage", Model: "small"}},
			Models: []ModelInfo{{Name: "default", Provider: "openai", Model: "gpt-4.1-mini"}, {Name: "small", Provider: "openai", Model: "qwen3:8b"}}}
	})
	return &agentBundle{bundle: b, fa: fa, sessions: sessions}
}

// sseEvent is one received event.
type gotEvent struct {
	name string
	data map[string]any
}

// stream is an open event stream of one POST.
type stream struct {
	status int
	events chan gotEvent
	cancel context.CancelFunc
	body   string // the JSON error body when the status is not 200
}

// post opens POST path with Accept: text/event-stream and reads its events
// in the background.
func (b *agentBundle) post(t *testing.T, path, token string, body any) *stream {
	t.Helper()
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", b.url+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	s := &stream{status: res.StatusCode, events: make(chan gotEvent, 64), cancel: cancel}
	if res.StatusCode != 200 {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		res.Body.Close()
		s.body = buf.String()
		close(s.events)
		return s
	}
	if ct := res.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	go func() {
		defer close(s.events)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var name string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				var d map[string]any
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d)
				s.events <- gotEvent{name: name, data: d}
			}
		}
	}()
	return s
}

// next returns the next event, failing after a while.
func (s *stream) next(t *testing.T) gotEvent {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(hang):
		t.Fatalf("no event within %v", hang)
	}
	return gotEvent{}
}

// until reads events up to and including the first one named name.
func (s *stream) until(t *testing.T, name string) (seen []string, ev gotEvent) {
	t.Helper()
	for range 100 {
		ev = s.next(t)
		seen = append(seen, ev.name)
		if ev.name == name {
			return seen, ev
		}
	}
	t.Fatalf("no %s in %v", name, seen)
	return nil, gotEvent{}
}

// ended reports that the stream closed after its last event.
func (s *stream) ended(t *testing.T) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			t.Fatalf("event %s after turn.finished", ev.name)
		}
	case <-time.After(hang):
		t.Fatal("stream still open after turn.finished")
	}
}

// eventually polls cond for a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	// A hang backstop, not a latency bound: the machine may be loaded.
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func (b *agentBundle) newSession(t *testing.T, token string) string {
	t.Helper()
	r := b.do(t, "POST", "/api/v1/agent/sessions", token, map[string]any{})
	want(t, r, 201, "")
	return r.body["sessionId"].(string)
}

func TestAgentSessions(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	t.Run("NeedsScopeSessionRun", func(t *testing.T) {
		want(t, b.do(t, "POST", "/api/v1/agent/sessions", adminToken, map[string]any{}), 403, "missing_scope")
		want(t, b.do(t, "GET", "/api/v1/agent/models", adminToken, nil), 403, "missing_scope")
	})
	t.Run("DefaultAgentAndSettingsFixed", func(t *testing.T) {
		id := b.newSession(t, appToken)
		s, err := b.sessions.AgentSessionGet(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if s.Agent != "ops" || s.Token != "app" || s.Actor != "console:alice" || string(s.Settings) != `{"max_steps":20}` ||
			s.Thread != (core.Thread{Channel: core.AgentSessionChannel, Key: id}) {
			t.Errorf("session %+v", s)
		}
	})
	t.Run("UnknownAgent", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/agent/sessions", appToken, map[string]any{"agent": "nope"})
		want(t, r, 422, "invalid")
		if r.errField("field") != "agent" {
			t.Errorf("field %q", r.errField("field"))
		}
	})
	t.Run("OwnedByTheCreatingToken", func(t *testing.T) {
		id := b.newSession(t, appToken)
		want(t, b.do(t, "GET", "/api/v1/agent/sessions/"+id, appToken, nil), 200, "")
		want(t, b.do(t, "GET", "/api/v1/agent/sessions/"+id, otherToken, nil), 404, "not_found")
		want(t, b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"sessionId": id, "text": "hello"}), 404, "not_found")
		r := b.do(t, "GET", "/api/v1/agent/sessions", otherToken, nil)
		want(t, r, 200, "")
		for _, it := range r.body["items"].([]any) {
			if it.(map[string]any)["sessionId"] == id {
				t.Error("another token lists this session")
			}
		}
	})
	t.Run("AgentFixedForSession", func(t *testing.T) {
		id := b.newSession(t, otherToken)
		r := b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"sessionId": id, "agent": "triage", "text": "hello"})
		want(t, r, 422, "invalid")
	})
	t.Run("ModelsAndAgents", func(t *testing.T) {
		r := b.do(t, "GET", "/api/v1/agent/models", otherToken, nil)
		want(t, r, 200, "")
		if items := r.body["items"].([]any); len(items) != 2 || items[0].(map[string]any)["name"] != "default" {
			t.Errorf("models %s", r.raw)
		}
		r = b.do(t, "GET", "/api/v1/agent/agents", otherToken, nil)
		if items := r.body["items"].([]any); len(items) != 2 || items[0].(map[string]any)["default"] != true {
			t.Errorf("agents %s", r.raw)
		}
		r = b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "hello", "model": "gpt-5"})
		want(t, r, 422, "invalid")
	})
}

func TestAgentRunResult(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	r := b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "hello", "model": "small"})
	want(t, r, 200, "")
	if r.body["status"] != "finished" || r.body["text"] != "hi there" || r.body["error"] != nil || r.body["pendingQuestion"] != nil ||
		r.body["sessionId"] == "" || r.body["turnId"] == "" {
		t.Fatalf("result %s", r.raw)
	}
	b.fa.mu.Lock()
	started := b.fa.started[0]
	b.fa.mu.Unlock()
	if started.Model != "small" || started.Actor.ID != "api:other" || started.Text != "hello" || !strings.HasPrefix(started.EventID, "api-") {
		t.Errorf("engine got %+v", started)
	}
	// The turn can be read back, and the session lists it.
	sid := r.body["sessionId"].(string)
	got := b.do(t, "GET", "/api/v1/agent/turns/"+r.body["turnId"].(string), otherToken, nil)
	want(t, got, 200, "")
	if got.body["status"] != "finished" || got.body["text"] != "hi there" {
		t.Errorf("turn %s", got.raw)
	}
	want(t, b.do(t, "GET", "/api/v1/agent/turns/"+r.body["turnId"].(string), appToken, nil), 404, "not_found")
	ses := b.do(t, "GET", "/api/v1/agent/sessions/"+sid, otherToken, nil)
	if turns := ses.body["turns"].([]any); len(turns) != 1 {
		t.Errorf("session %s", ses.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "  "}), 422, "invalid")
	want(t, b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "hi", "extra": 1}), 400, "unknown_field")
}

func TestAgentRunStream(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", otherToken, map[string]any{"text": "hello"})
	if s.status != 200 {
		t.Fatalf("status %d: %s", s.status, s.body)
	}
	seen, fin := s.until(t, core.EventTurnFinished)
	if strings.Join(seen, " ") != "run.queued turn.started message.committed turn.finished" {
		t.Errorf("events %v", seen)
	}
	if fin.data["status"] != "finished" || fin.data["text"] != "hi there" || fin.data["error"] != nil {
		t.Errorf("turn.finished %v", fin.data)
	}
	s.ended(t)
}

func TestAgentConcurrency(t *testing.T) {
	t.Parallel()
	b := setupAgent(t) // the app token runs 1 turn at once and queues 4
	first := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "block"})
	ev := first.next(t)
	if ev.name != core.EventRunQueued || ev.data["position"] != 0.0 {
		t.Fatalf("first event %v", ev)
	}
	first.until(t, core.EventTurnStarted)
	firstTurn := "turn-1"

	t.Run("OneTurnPerSession", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/agent/runs", appToken, map[string]any{"text": "hello", "sessionId": ev.data["sessionId"]})
		want(t, r, 409, "session_busy")
	})
	var queued []*stream
	for i := range 4 {
		s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "hello"})
		ev := s.next(t)
		if ev.name != core.EventRunQueued || ev.data["position"] != float64(i+1) {
			t.Fatalf("queued turn %d: %v", i, ev)
		}
		queued = append(queued, s)
	}
	full := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "hello"})
	if full.status != 429 || !strings.Contains(full.body, "queue_full") {
		t.Fatalf("beyond the queue: %d %s", full.status, full.body)
	}
	// Another token has its own bound.
	want(t, b.do(t, "POST", "/api/v1/agent/runs", otherToken, map[string]any{"text": "hello"}), 200, "")

	b.fa.release(firstTurn)
	first.until(t, core.EventTurnFinished)
	// Each queued turn moves up (run.queued with smaller positions, as its
	// waiter sees them), starts and finishes.
	for i, s := range queued {
		seen, fin := s.until(t, core.EventTurnFinished)
		if fin.data["status"] != "finished" {
			t.Errorf("queued turn %d: %v (%v)", i, fin.data, seen)
		}
	}
}

func TestAgentLeavingWhileQueuedStartsNothing(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	first := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "block"})
	first.next(t)
	_, started := first.until(t, core.EventTurnStarted)
	_ = started
	b.fa.mu.Lock()
	firstTurn := fmt.Sprintf("turn-%d", b.fa.nturn)
	b.fa.mu.Unlock()
	second := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "hello"})
	if ev := second.next(t); ev.data["position"] != 1.0 || ev.data["turnId"] != nil {
		t.Fatalf("second %v", ev)
	}
	second.cancel()
	third := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "hello"})
	// The second left the queue: the third is next.
	var pos any
	for range 20 {
		ev := third.next(t)
		pos = ev.data["position"]
		if pos == 1.0 {
			break
		}
	}
	if pos != 1.0 {
		t.Errorf("third position %v after the second left", pos)
	}
	b.fa.release(firstTurn)
	first.until(t, core.EventTurnFinished)
	third.until(t, core.EventTurnFinished)
	b.fa.mu.Lock()
	n := len(b.fa.started)
	b.fa.mu.Unlock()
	if n != 2 {
		t.Errorf("%d turns started; the one that left the queue must never start", n)
	}
}

func TestAgentPermission(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "deploy api"})
	seen, p := s.until(t, core.EventPermissionRequested)
	if strings.Join(seen, " ") != "run.queued turn.started tool.started permission.requested" {
		t.Errorf("events %v", seen)
	}
	sid, rid := p.data["sessionId"].(string), p.data["requestId"].(string)
	if p.data["toolName"] != "deploy" || p.data["reason"] != "you asked for 1.2.3" || p.data["toolInput"].(map[string]any)["service"] != "api" {
		t.Errorf("permission.requested %v", p.data)
	}
	t.Run("OnlyAllowOnceOrDeny", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/agent/reply", appToken, map[string]any{"sessionId": sid, "requestId": rid, "decision": "allowAlways"})
		want(t, r, 422, "invalid")
	})
	t.Run("NotAnotherAppsSession", func(t *testing.T) {
		r := b.do(t, "POST", "/api/v1/agent/reply", otherToken, map[string]any{"sessionId": sid, "requestId": rid, "decision": "allowOnce"})
		want(t, r, 404, "not_found")
	})
	t.Run("RequestOfAnotherSession", func(t *testing.T) {
		other := b.newSession(t, appToken)
		r := b.do(t, "POST", "/api/v1/agent/reply", appToken, map[string]any{"sessionId": other, "requestId": rid, "decision": "allowOnce"})
		want(t, r, 404, "not_found")
	})
	r := b.do(t, "POST", "/api/v1/agent/reply", appToken, map[string]any{"sessionId": sid, "requestId": rid, "decision": "allowOnce"})
	want(t, r, 200, "")
	if r.body["status"] != "approved" {
		t.Errorf("reply %s", r.raw)
	}
	b.eng.mu.Lock()
	d := b.eng.decisions[len(b.eng.decisions)-1]
	b.eng.mu.Unlock()
	if d.Action != approvals.ActionApprove || d.Scope != approvals.ScopeCall || d.ApprovalID != rid {
		t.Errorf("decision %+v", d)
	}
	seen, fin := s.until(t, core.EventTurnFinished)
	if !strings.Contains(strings.Join(seen, " "), "tool.finished") || fin.data["text"] != "Deployed api." {
		t.Errorf("after the reply: %v %v", seen, fin.data)
	}
	// A second reply is refused by the decision checks: already decided.
	want(t, b.do(t, "POST", "/api/v1/agent/reply", appToken, map[string]any{"sessionId": sid, "requestId": rid, "decision": "deny"}),
		409, "already_decided")
}

func TestAgentReplyNeverByAnAgent(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", agentTok, map[string]any{"text": "deploy api"})
	_, p := s.until(t, core.EventPermissionRequested)
	r := b.do(t, "POST", "/api/v1/agent/reply", agentTok, map[string]any{"sessionId": p.data["sessionId"], "requestId": p.data["requestId"], "decision": "allowOnce"})
	want(t, r, 403, string(core.DecisionHumanRequired))
	b.eng.mu.Lock()
	d := b.eng.decisions[len(b.eng.decisions)-1]
	b.eng.mu.Unlock()
	if d.Unverified == "" {
		t.Error("the refused reply did not go through the engine (unaudited)")
	}
	s.cancel()
}

func TestAgentNoOneCanAnswer(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	// Without the event stream nobody sees permission.requested: the call
	// is denied at once and the turn goes on.
	r := b.do(t, "POST", "/api/v1/agent/runs", appToken, map[string]any{"text": "deploy api"})
	want(t, r, 200, "")
	if r.body["status"] != "finished" || !strings.Contains(r.body["text"].(string), "no_approver") {
		t.Errorf("result %s", r.raw)
	}
	b.fa.mu.Lock()
	n := b.fa.unattended
	b.fa.mu.Unlock()
	if n != 1 {
		t.Errorf("unattended approvals %d, want 1", n)
	}
}

func TestAgentStreamDroppedMidWait(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "deploy api"})
	_, p := s.until(t, core.EventPermissionRequested)
	turn := strings.TrimPrefix(p.data["requestId"].(string), "ap-")
	s.cancel() // the app hangs up while the approval waits
	eventually(t, "the wait released as a denial", func() bool {
		b.fa.mu.Lock()
		defer b.fa.mu.Unlock()
		return len(b.fa.releases) == 1 && b.fa.releases[0] == turn
	})
	eventually(t, "the turn ended", func() bool { return b.fa.status(turn) == core.RunSucceeded })
	// Its slot is free again (agent_concurrency 1).
	eventually(t, "slot free", func() bool {
		r := b.do(t, "GET", "/api/v1/agent/turns/"+turn, appToken, nil)
		return r.body["status"] == "finished"
	})
	r := b.do(t, "POST", "/api/v1/agent/runs", appToken, map[string]any{"text": "hello"})
	want(t, r, 200, "")
}

func TestAgentQuestion(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "ask me"})
	seen, fin := s.until(t, core.EventTurnFinished)
	if strings.Join(seen, " ") != "run.queued turn.started question.requested turn.finished" {
		t.Errorf("events %v", seen)
	}
	s.ended(t)
	pq, _ := fin.data["pendingQuestion"].(map[string]any)
	if fin.data["status"] != "finished" || pq == nil || pq["requestId"] != "q1" || len(pq["questions"].([]any)) != 1 {
		t.Fatalf("turn.finished %v", fin.data)
	}
	sid := fin.data["sessionId"].(string)
	// The result shape says the same.
	got := b.do(t, "GET", "/api/v1/agent/turns/"+fin.data["turnId"].(string), appToken, nil)
	if got.body["pendingQuestion"] == nil {
		t.Errorf("turn %s", got.raw)
	}
	want(t, b.do(t, "POST", "/api/v1/agent/answer", appToken, map[string]any{"sessionId": sid, "requestId": "q1", "answers": []map[string]any{
		{"questionId": "env", "isSkipped": false, "answer": "moon"}}}), 422, "invalid")
	want(t, b.do(t, "POST", "/api/v1/agent/answer", appToken, map[string]any{"sessionId": sid, "requestId": "q9", "answers": []map[string]any{
		{"questionId": "env", "isSkipped": false, "answer": "prod"}}}), 409, "no_pending_question")
	a := b.post(t, "/api/v1/agent/answer", appToken, map[string]any{"sessionId": sid, "requestId": "q1", "answers": []map[string]any{
		{"questionId": "env", "isSkipped": false, "answer": "prod"}}})
	seen, fin = a.until(t, core.EventTurnFinished)
	if strings.Join(seen, " ") != "run.queued message.committed turn.finished" || fin.data["text"] != "You chose prod." || fin.data["pendingQuestion"] != nil {
		t.Errorf("continued turn: %v %v", seen, fin.data)
	}
	want(t, b.do(t, "POST", "/api/v1/agent/answer", appToken, map[string]any{"sessionId": sid, "requestId": "q1", "answers": []map[string]any{
		{"questionId": "env", "isSkipped": false, "answer": "prod"}}}), 409, "no_pending_question")
}

func TestAgentCancelWithLateResult(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"text": "deploy api"})
	_, p := s.until(t, core.EventPermissionRequested)
	turn := strings.TrimPrefix(p.data["requestId"].(string), "ap-")
	r := b.do(t, "POST", "/api/v1/agent/turns/"+turn+"/cancel", appToken, nil)
	want(t, r, 200, "")
	if r.body["status"] != "aborted" {
		t.Errorf("cancel %s", r.raw)
	}
	_, fin := s.until(t, core.EventTurnFinished)
	if fin.data["status"] != "aborted" {
		t.Errorf("turn.finished %v", fin.data)
	}
	// The pending approval is withdrawn: a reply now is refused.
	r = b.do(t, "POST", "/api/v1/agent/reply", appToken, map[string]any{"sessionId": p.data["sessionId"], "requestId": p.data["requestId"], "decision": "allowOnce"})
	want(t, r, 409, "turn_finished")
	eventually(t, "the late result refused", func() bool {
		b.fa.mu.Lock()
		defer b.fa.mu.Unlock()
		return b.fa.late > 0
	})
	if st := b.fa.status(turn); st != core.RunCancelled {
		t.Errorf("after the late result the run is %s", st)
	}
	want(t, b.do(t, "POST", "/api/v1/agent/turns/"+turn+"/cancel", appToken, nil), 409, "turn_finished")
}

func TestAgentOutcomeUnknown(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	r := b.do(t, "POST", "/api/v1/agent/runs", appToken, map[string]any{"text": "crash now"})
	want(t, r, 200, "")
	e, _ := r.body["error"].(map[string]any)
	if r.body["status"] != "error" || e["code"] != CodeOutcomeUnknown || !strings.Contains(e["message"].(string), "Read the session") {
		t.Errorf("result %s", r.raw)
	}
	ses := b.do(t, "GET", "/api/v1/agent/sessions/"+r.body["sessionId"].(string), appToken, nil)
	turns := ses.body["turns"].([]any)
	if len(turns) != 1 || turns[0].(map[string]any)["error"].(map[string]any)["code"] != CodeOutcomeUnknown {
		t.Errorf("session %s", ses.raw)
	}
}

func TestAgentAPIOff(t *testing.T) {
	t.Parallel()
	b := setup(t)
	want(t, b.do(t, "GET", "/api/v1/agent/models", adminToken, nil), 404, "agent_api_off")
}

// FuzzAgentBodies feeds arbitrary bodies to the Agent API's POST paths:
// never a panic or a 5xx, always JSON (or an event stream that ends with
// turn.finished), and a reply that is refused decides nothing.
func FuzzAgentBodies(f *testing.F) {
	for _, s := range []string{
		`{"text":"hello"}`, `{"text":"hello","session_id":"x"}`, `{"text":"hello","model":"nope"}`, `{"text":""}`,
		`{"session_id":"s","request_id":"ap-1","decision":"allowOnce"}`, `{"decision":"allowAlways"}`,
		`{"session_id":"s","request_id":"q1","answers":[{"questionId":"env","answer":"prod"}]}`, `{"answers":null}`,
		`{"agent":"nope"}`, `{}`, `[]`, `null`, ``, `{"text":1}`, "{\"text\":\"\xff\"}", `{"text":"a"} trailing`,
	} {
		for _, p := range []string{"/api/v1/agent/runs", "/api/v1/agent/reply", "/api/v1/agent/answer", "/api/v1/agent/sessions"} {
			f.Add(p, []byte(s))
		}
	}
	st := newMemStore()
	now := func() time.Time { return testNow }
	att := NewAttendance()
	h, err := New(Options{Engine: &fakeEngine{st: st, now: now}, Store: st, Now: now, MaxBodyBytes: 8 << 10, PollInterval: 5 * time.Millisecond,
		Tokens: []Token{{Name: "other", Token: otherToken, Actor: "api:other", Scopes: []core.Scope{core.ScopeSessionRun}}},
		Agent: &AgentOptions{Engine: newFakeAgent(st, att), Sessions: &memSessions{}, Attendance: att,
			Agents: []AgentInfo{{Name: "ops", Model: "default", Default: true}}, Models: []ModelInfo{{Name: "default"}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path string, body []byte) {
		switch path {
		case "/api/v1/agent/runs", "/api/v1/agent/reply", "/api/v1/agent/answer", "/api/v1/agent/sessions":
		default:
			t.Skip()
		}
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+otherToken)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %d for %q: %s", path, rec.Code, body, rec.Body)
		}
		var out map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: response is not JSON: %q", path, rec.Body)
		}
		if rec.Code >= 400 && out["error"] == nil {
			t.Fatalf("%s %d without an error object: %s", path, rec.Code, rec.Body)
		}
	})
}

// TestAgentAPINamesAreCamelCase: results use the design's names only;
// bodies in the earlier snake_case are still read.
func TestAgentAPINamesAreCamelCase(t *testing.T) {
	t.Parallel()
	b := setupAgent(t)
	sid := b.newSession(t, appToken)
	r := b.do(t, "POST", "/api/v1/agent/runs", appToken, map[string]any{"session_id": sid, "text": "hello"})
	want(t, r, 200, "")
	if r.body["sessionId"] != sid || r.body["turnId"] == nil {
		t.Fatalf("result %v", r.body)
	}
	s := b.do(t, "GET", "/api/v1/agent/sessions/"+sid, appToken, nil)
	want(t, s, 200, "")
	list := b.do(t, "GET", "/api/v1/agent/sessions", appToken, nil)
	want(t, list, 200, "")
	for what, body := range map[string]map[string]any{"run": r.body, "session": s.body, "list": list.body} {
		raw, _ := json.Marshal(body)
		for _, snake := range []string{"session_id", "turn_id", "pending_question", "created_at", "next_cursor", "request_id"} {
			if strings.Contains(string(raw), `"`+snake+`"`) {
				t.Errorf("%s carries %s: %s", what, snake, raw)
			}
		}
	}
	if _, ok := list.body["nextCursor"]; !ok {
		t.Errorf("list %v", list.body)
	}
	if _, ok := s.body["consoleUrl"]; !ok {
		t.Errorf("session %v", s.body)
	}
	bad := b.do(t, "POST", "/api/v1/agent/answer", appToken, map[string]any{"sessionId": sid, "answers": []any{}})
	if bad.status != 422 || bad.errField("field") != "requestId" {
		t.Errorf("answer without requestId: %d %v", bad.status, bad.body)
	}
}
