package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/coretest"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestAgentRunOverTheAPI: free text starts an agent run; its question is
// answered with POST /api/v1/runs/{id}/answer; the run's view says kind
// agent and carries the token usage.
func TestAgentRunOverTheAPI(t *testing.T) {
	t.Parallel()
	st := coretest.Store(t)
	m := fakellm.Replies(
		&llm.Response{ToolCalls: []llm.ToolCall{{ID: "q1", Name: "ask_user",
			Arguments: `{"questions":[{"id":"go","kind":"confirm","text":"Go ahead?"}]}`}}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 7}},
		&llm.Response{Text: "Going ahead.", Usage: llm.Usage{InputTokens: 120, OutputTokens: 3}},
	)
	eng, err := engine.New(engine.Options{
		Store: st, Policy: &approvals.Policy{},
		Agents:       []engine.Agent{{Name: "ops", ModelName: "fake", Model: m, Default: true}},
		Groups:       map[string][]string{"sre": {"console:alice"}},
		ApprovalTTL:  time.Hour,
		PollInterval: 20 * time.Millisecond,
		Lease:        2 * time.Second,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	coretest.Run(t, eng)
	h, err := New(Options{Engine: eng, Store: st, PollInterval: 50 * time.Millisecond, Tokens: []Token{
		{Name: "req", Token: reqToken, Actor: "console:req"},
		{Name: "eve", Token: eveToken, Actor: "console:eve"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := &realBundle{bundle: &bundle{url: srv.URL, h: h}, store: st}

	r := b.do(t, "POST", "/api/v1/messages", reqToken, map[string]string{"thread": "console:agent-api", "text": "could you go ahead?"})
	want(t, r, 201, "")
	runID := r.body["run"].(map[string]any)["id"].(string)
	run := b.waitRun(t, runID, core.RunWaitingInput)
	if run["kind"] != "agent" || run["agent"] != "ops" {
		t.Fatalf("run view %v", run)
	}
	// The run says what it waits for, so a client can show the question
	// and answer it without reading the thread.
	pa, _ := run["pending_actions"].([]any)
	if len(pa) != 1 {
		t.Fatalf("pending_actions %v", run["pending_actions"])
	}
	act := pa[0].(map[string]any)
	qs, _ := act["questions"].([]any)
	if act["id"] != "ask-0" || act["kind"] != "question" || len(qs) != 1 || qs[0].(map[string]any)["text"] != "Go ahead?" || act["expires_at"] == "" {
		t.Fatalf("pending action %v", act)
	}
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/answer", reqToken, map[string]any{"action_id": "ask-0", "answer": "{not json"}), 422, "")
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/answer", eveToken, map[string]any{"action_id": "ask-0",
		"answer": map[string]any{"isConfirmed": true}}), 403, "")
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/answer", reqToken, map[string]any{"action_id": "ask-0",
		"answer": []map[string]any{{"questionId": "go", "isSkipped": false, "answer": "maybe"}}}), 422, "")
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/answer", reqToken, map[string]any{"action_id": "ask-9",
		"answer": map[string]any{"isConfirmed": true}}), 404, "")
	want(t, b.do(t, "POST", "/api/v1/runs/"+runID+"/answer", reqToken, map[string]any{"action_id": "ask-0",
		"answer": map[string]any{"isConfirmed": true, "feedback": "ship it"}}), 200, "")
	run = b.waitRun(t, runID, core.RunSucceeded)
	u, _ := run["usage"].(map[string]any)
	if u["input_tokens"] != 220.0 || u["output_tokens"] != 10.0 || u["model_calls"] != 2.0 {
		t.Fatalf("usage %v", run["usage"])
	}
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Text; !strings.Contains(got, `"isConfirmed":true`) || !strings.Contains(got, "ship it") {
		t.Fatalf("the model got %q", got)
	}
}

// TestAgentTextDeltasOverSSE: /api/v1/runs/{id}/events carries text.delta
// frames (without ids) while the model writes, then the stored events.
func TestAgentTextDeltasOverSSE(t *testing.T) {
	t.Parallel()
	st := coretest.Store(t)
	m := fakellm.NewGated("hel", "lo")
	eng, err := engine.New(engine.Options{
		Store: st, Policy: &approvals.Policy{},
		Agents:       []engine.Agent{{Name: "ops", ModelName: "fake", Model: m, Default: true}},
		PollInterval: 20 * time.Millisecond, Lease: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	coretest.Run(t, eng)
	h, err := New(Options{Engine: eng, Store: st, PollInterval: 50 * time.Millisecond, Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	b := &bundle{url: srv.URL, h: h}
	r := b.do(t, "POST", "/api/v1/messages", adminToken, map[string]string{"thread": "console:sse", "text": "say hello"})
	want(t, r, 201, "")
	runID := r.body["run"].(map[string]any)["id"].(string)
	s := openSSE(t, b, "/api/v1/runs/"+runID+"/events", nil)
	close(m.Ready)
	var text string
	var types []string
	for range 100 {
		f := s.next(t)
		if f.comment != "" {
			continue
		}
		types = append(types, f.event)
		if f.event == core.EventTextDelta {
			if f.id != "" {
				t.Errorf("a delta has id %q", f.id)
			}
			var d struct{ Text string }
			_ = json.Unmarshal([]byte(f.data), &d)
			text += d.Text
		}
		if f.event == "end" {
			break
		}
	}
	if text != "hello" || !slices.Contains(types, core.EventMessageCommitted) {
		t.Fatalf("deltas %q, events %v", text, types)
	}
}
