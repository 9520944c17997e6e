package local_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/local"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/sse"
)

const (
	adminTok  = "admin-token"
	bobTok    = "bob-token"
	readerTok = "reader-token"
)

type bundle struct {
	h   *adaptertest.Harness
	url string
}

func setup(t *testing.T) *bundle {
	t.Helper()
	ts, err := api.NewTokenSet([]api.Token{
		{Name: "admin", Token: adminTok, Actor: "console:admin"},
		{Name: "bob", Token: bobTok, Actor: "console:bob"},
		{Name: "reader", Token: readerTok, Actor: "console:admin", Scopes: []core.Scope{core.ScopeRead, core.ScopeRequest}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var a *local.Adapter
	h := adaptertest.NewHarness(t, adaptertest.HarnessOptions{
		AllowSelfApproval: true,
		Platform: func(h *adaptertest.Harness) delivery.Platform {
			var err error
			a, err = local.New(local.Config{}, local.Deps{Sink: h.Engine, Cards: h.Engine, Store: h.Store, Auth: ts, Authority: h.Engine.Authority(),
				PollInterval: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return a
		},
	})
	mux := http.NewServeMux()
	for p, hd := range a.Routes() {
		mux.Handle(p, hd)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &bundle{h: h, url: srv.URL}
}

func (b *bundle) post(t *testing.T, path, tok string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	switch v := body.(type) {
	case string:
		rd = strings.NewReader(v)
	default:
		j, _ := json.Marshal(v)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest("POST", b.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("POST %s: not JSON (%d): %q", path, res.StatusCode, raw)
	}
	return res.StatusCode, out
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// stream opens the thread's stream and returns its messages as they come.
func (b *bundle) stream(t *testing.T, query string) <-chan local.StreamMessage {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+"/local/v1/stream?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	out := make(chan local.StreamMessage, 100)
	go func() {
		defer res.Body.Close()
		defer close(out)
		rd := sse.NewReader(res.Body)
		for {
			ev, err := rd.Next()
			if err != nil {
				return
			}
			var m local.StreamMessage
			if ev.Type == "ready" {
				m.Kind = "ready"
			} else if json.Unmarshal(ev.Data, &m) != nil {
				continue
			}
			out <- m
		}
	}()
	return out
}

func next(t *testing.T, c <-chan local.StreamMessage, what string, match func(local.StreamMessage) bool) local.StreamMessage {
	t.Helper()
	deadline := time.After(2 * time.Minute) // a hang backstop
	for {
		select {
		case m, ok := <-c:
			if !ok {
				t.Fatalf("stream ended before %s", what)
			}
			if match(m) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %s on the stream within 10s", what)
		}
	}
}

// TestChatRoundTrip: a deploy typed in a local thread runs as the token's
// actor; its card streams back, is approved in place (a decision event of
// channel local), and the card update and the result stream back too.
func TestChatRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := b.stream(t, "thread=local:dev-1")
	next(t, s, "ready", func(m local.StreamMessage) bool { return m.Kind == "ready" })
	code, rc := b.post(t, "/local/v1/messages", adminTok, map[string]string{"thread": "dev-1", "text": "deploy api 1.2.3"})
	if code != 201 || rc["run_id"] == "" {
		t.Fatalf("message: %d %v", code, rc)
	}
	runID := rc["run_id"].(string)
	in := next(t, s, "the message itself", func(m local.StreamMessage) bool { return m.Direction == core.MessageIn })
	if in.Actor != "console:admin" || in.Text != "deploy api 1.2.3" || in.RunID != runID {
		t.Fatalf("inbound %+v", in)
	}
	card := next(t, s, "the card", func(m local.StreamMessage) bool { return m.Kind == core.KindCard })
	if card.Card == nil || card.Card.Status != approvals.StatusPending || card.Card.Tool != "deploy" || card.ApprovalID == "" {
		t.Fatalf("card %+v", card)
	}
	code, dr := b.post(t, "/local/v1/decisions", adminTok, map[string]any{"thread": "local:dev-1", "approval_id": card.ApprovalID, "action": "approve"})
	if code != 200 || dr["status"] != "approved" || dr["run_id"] != runID {
		t.Fatalf("decision: %d %v", code, dr)
	}
	upd := next(t, s, "the card update", func(m local.StreamMessage) bool { return m.Kind == core.KindCardUpdate })
	if upd.Card == nil || upd.Card.Outcome == nil || upd.Card.Outcome.Status != approvals.StatusApproved {
		t.Fatalf("card update %+v", upd.Card)
	}
	next(t, s, "the result", func(m local.StreamMessage) bool {
		return m.Kind == core.KindReply && strings.Contains(m.Text, "deployed api 1.2.3")
	})
	b.h.WaitRun(runID, core.RunSucceeded)
	ap, err := b.h.Store.ApprovalGet(context.Background(), card.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ap.Decisions) != 1 || ap.Decisions[0].Channel != local.Channel || ap.Decisions[0].Actor != "console:admin" {
		t.Fatalf("decision recorded as %+v, want console:admin via local", ap.Decisions)
	}
	run := b.h.WaitRun(runID, core.RunSucceeded)
	if run.Thread != (core.Thread{Channel: "local", Key: "dev-1"}) || run.Requester != "console:admin" {
		t.Fatalf("run in %v by %s", run.Thread, run.Requester)
	}
	// A repeated decision event id is a duplicate, not a second decision.
	code, dup := b.post(t, "/local/v1/decisions", adminTok, map[string]any{"thread": "dev-1", "approval_id": card.ApprovalID,
		"action": "approve", "event_id": dr["event_id"]})
	if code != 200 || dup["duplicate"] != true {
		t.Fatalf("replayed decision: %d %v", code, dup)
	}
}

// TestDecisionsAreJudgedLikeAnyOther: the same refusals as every surface,
// through the one mapping, and nothing changes.
func TestDecisionsAreJudgedLikeAnyOther(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, rc := b.post(t, "/local/v1/messages", adminTok, map[string]string{"thread": "dev-2", "text": "deploy api 1.2.3"})
	ap := b.h.WaitApprovalPending(rc["run_id"].(string))
	decide := func(tok string, body map[string]any) (int, map[string]any) {
		body["thread"], body["approval_id"] = "dev-2", ap.ID
		return b.post(t, "/local/v1/decisions", tok, body)
	}
	cases := []struct {
		name string
		tok  string
		body map[string]any
		code int
		err  string
	}{
		{"TokenWithoutDecide", readerTok, map[string]any{"action": "approve"}, 403, string(core.DecisionHumanRequired)},
		{"NotAnApprover", bobTok, map[string]any{"action": "approve"}, 403, string(core.DecisionNotApprover)},
		{"EditOutsideTheSchema", adminTok, map[string]any{"action": "edit", "args": map[string]any{"service": 7}}, 422, string(core.DecisionInvalidArgs)},
	}
	for _, c := range cases {
		code, out := decide(c.tok, c.body)
		if code != c.code || errCode(out) != c.err {
			t.Errorf("%s: %d %v, want %d %s", c.name, code, out, c.code, c.err)
		}
	}
	if got, _ := b.h.Store.ApprovalGet(context.Background(), ap.ID); got.Status != approvals.StatusPending {
		t.Fatalf("a refused decision changed the approval: %s", got.Status)
	}
	if n := b.h.RefusedActions("console:admin")["approve"]; n < 1 {
		t.Errorf("the refusal of the token without decide was not audited (%v)", b.h.RefusedActions("console:admin"))
	}
	if code, out := decide(adminTok, map[string]any{"action": "reject", "reason": "not now"}); code != 200 || out["status"] != "rejected" {
		t.Fatalf("reject: %d %v", code, out)
	}
	code, out := decide(adminTok, map[string]any{"action": "approve"})
	e, _ := out["error"].(map[string]any)
	if code != 409 || e["by"] != "console:admin" {
		t.Fatalf("after the reject: %d %v, want 409 naming the winner", code, out)
	}
	code, out = b.post(t, "/local/v1/decisions", adminTok, map[string]any{"thread": "dev-2", "approval_id": "nope", "action": "approve"})
	if code != 404 {
		t.Fatalf("unknown approval: %d %v", code, out)
	}
}

// TestBadInputChangesNothing: forged tokens, missing scopes and malformed
// bodies are refused with a clear error, and the store records nothing.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		path, tok string
		body      any
		code      int
		err       string
	}{
		{"/local/v1/messages", "wrong", map[string]string{"thread": "x", "text": "deploy api 1"}, 401, "unauthorized"},
		{"/local/v1/messages", "", map[string]string{"thread": "x", "text": "deploy api 1"}, 401, "unauthorized"},
		{"/local/v1/messages", adminTok, `{"thread":"x","text":`, 400, "malformed_json"},
		{"/local/v1/messages", adminTok, `{"thread":"x","txt":"deploy api 1"}`, 400, "unknown_field"},
		{"/local/v1/messages", adminTok, `{"thread":"x","text":"a"} {}`, 400, "malformed_json"},
		{"/local/v1/messages", adminTok, `{"thread":"x","text":5}`, 422, "invalid"},
		{"/local/v1/messages", adminTok, map[string]string{"thread": "", "text": "deploy api 1"}, 422, "invalid"},
		{"/local/v1/messages", adminTok, map[string]string{"thread": "a\nb", "text": "deploy api 1"}, 422, "invalid"},
		{"/local/v1/messages", adminTok, map[string]string{"thread": strings.Repeat("k", 257), "text": "x"}, 422, "invalid"},
		{"/local/v1/messages", adminTok, map[string]string{"thread": "x", "text": "  "}, 422, "invalid"},
		{"/local/v1/messages", adminTok, map[string]string{"thread": "x", "text": strings.Repeat("a", local.MaxText+1)}, 413, "too_large"},
		{"/local/v1/messages", adminTok, strings.Repeat(" ", local.MaxBody+10), 413, "too_large"},
		{"/local/v1/decisions", adminTok, map[string]any{"thread": "x", "approval_id": "a", "action": "maybe"}, 422, "invalid"},
		{"/local/v1/decisions", adminTok, map[string]any{"thread": "x", "approval_id": "a", "action": "approve", "args": map[string]any{}}, 422, "invalid"},
		{"/local/v1/decisions", adminTok, map[string]any{"thread": "x", "approval_id": "a", "action": "edit"}, 422, "invalid"},
		{"/local/v1/decisions", adminTok, map[string]any{"thread": "x", "approval_id": "", "action": "approve"}, 422, "invalid"},
		{"/local/v1/decisions", adminTok, map[string]any{"thread": "x", "approval_id": "a", "action": "approve", "scope": "always"}, 422, "invalid"},
		{"/local/v1/decisions", "wrong", map[string]any{"thread": "x", "approval_id": "a", "action": "approve"}, 401, "unauthorized"},
	}
	for _, c := range cases {
		code, out := b.post(t, c.path, c.tok, c.body)
		if code != c.code || errCode(out) != c.err {
			t.Errorf("POST %s %v: %d %v, want %d %s", c.path, c.body, code, out, c.code, c.err)
		}
	}
	b.h.StoreEmpty(t)
	// A token without request may not start runs here.
	ts, _ := api.NewTokenSet([]api.Token{{Name: "ro", Token: "ro", Actor: "console:ro", Scopes: []core.Scope{core.ScopeRead}}})
	a, _ := local.New(local.Config{}, local.Deps{Sink: b.h.Engine, Cards: b.h.Engine, Store: b.h.Store, Auth: ts, Authority: b.h.Engine.Authority()})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/local/v1/messages", strings.NewReader(`{"thread":"x","text":"deploy api 1"}`))
	req.Header.Set("Authorization", "Bearer ro")
	a.Routes()["POST /local/v1/messages"].ServeHTTP(rec, req)
	if rec.Code != 403 || !strings.Contains(rec.Body.String(), "missing_scope") {
		t.Fatalf("read-only token: %d %s", rec.Code, rec.Body)
	}
	b.h.StoreEmpty(t)
}

func TestStreamHistory(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, text := range []string{"one", "two", "three"} {
		b.post(t, "/local/v1/messages", adminTok, map[string]string{"thread": "h", "text": text})
	}
	b.h.WaitIdle()
	// Each of "one", "two", "three" matches no flow: a message and its
	// help reply. history=2 replays the newest two: "three" and its reply.
	s := b.stream(t, "thread=h&history=2")
	var got []string
	for {
		m := next(t, s, "a message", func(local.StreamMessage) bool { return true })
		if m.Kind == "ready" {
			break
		}
		got = append(got, string(m.Direction)+":"+m.Text[:min(len(m.Text), 5)])
	}
	if len(got) != 2 || got[0] != "in:three" || !strings.HasPrefix(got[1], "out:") {
		t.Fatalf("history %v", got)
	}
	for _, q := range []string{"thread=h&history=-1", "thread=h&history=x", "thread=", "history=2"} {
		req, _ := http.NewRequest("GET", b.url+"/local/v1/stream?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+adminTok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 422 {
			t.Errorf("stream?%s: %d, want 422", q, res.StatusCode)
		}
	}
}

func TestConfigAndNew(t *testing.T) {
	t.Parallel()
	if err := (local.Config{}).Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := local.New(local.Config{}, local.Deps{}); err == nil {
		t.Fatal("New without deps")
	}
}

// TestStreamWireFormat pins the stream's bytes (written through core/sse):
// the reconnect delay, one frame per message with its id, then ready.
func TestStreamWireFormat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/local/v1/messages", adminTok, map[string]string{"thread": "w", "text": "hello"})
	b.h.WaitIdle()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", b.url+"/local/v1/stream?thread=w&history=1", nil)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("headers %v", res.Header)
	}
	br := bufio.NewReader(res.Body)
	var frames []string
	var cur strings.Builder
	for len(frames) < 3 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", frames, err)
		}
		if cur.WriteString(line); line == "\n" {
			frames = append(frames, cur.String())
			cur.Reset()
		}
	}
	m := regexp.MustCompile(`^id: ([^\n]+)\nevent: message\ndata: (\{[^\n]*\})\n\n$`).FindStringSubmatch(frames[1])
	if frames[0] != "retry: 2000\n\n" || m == nil || frames[2] != "event: ready\ndata: {}\n\n" {
		t.Fatalf("frames %q", frames)
	}
	var sm local.StreamMessage
	if err := json.Unmarshal([]byte(m[2]), &sm); err != nil || sm.ID != m[1] || sm.Direction != core.MessageOut {
		t.Fatalf("message frame id %q, data %+v (%v)", m[1], sm, err)
	}
}
