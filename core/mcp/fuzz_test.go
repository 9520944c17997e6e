package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// fakeCore is a minimal Engine and Store that records what the tools hand
// it, so the fuzz target can check nothing unvalidated gets through.
type fakeCore struct {
	mu        sync.Mutex
	events    []core.ChannelEvent
	decisions []core.Decision
}

func (f *fakeCore) HandleEvent(_ context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	return core.Receipt{RunID: "run-1"}, nil
}

func (f *fakeCore) Decide(_ context.Context, _ core.Actor, _ string, d core.Decision) (*approvals.Approval, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.decisions = append(f.decisions, d)
	return nil, &core.DecisionError{Code: core.DecisionNotApprover, Message: "not an approver"}
}

func (f *fakeCore) RunGet(_ context.Context, id string) (*core.Run, error) {
	if id != "run-1" {
		return nil, core.ErrNotFound
	}
	return &core.Run{ID: id, Flow: "deploy", Status: core.RunQueued, Reason: hostile,
		Steps: []core.Step{{Tool: "deploy", Output: hostile}}}, nil
}

func (f *fakeCore) ApprovalGet(_ context.Context, id string) (*approvals.Approval, error) {
	return nil, approvals.ErrNotFound
}

func (f *fakeCore) ApprovalList(context.Context, approvals.ApprovalListParams) ([]*approvals.Approval, string, error) {
	return []*approvals.Approval{{ID: "a1", RunID: "run-1", Status: approvals.StatusPending, Preview: hostile}}, "", nil
}

// FuzzToolCall posts arbitrary tool names and argument JSON (and arbitrary
// raw bodies) to the handler with a valid token. It must never panic or
// answer 5xx, and whatever reaches the engine passed validation.
func FuzzToolCall(f *testing.F) {
	fc := &fakeCore{}
	h, err := New(Options{Engine: fc, Store: fc, Tokens: []Token{{Name: "a", Token: agentToken, Actor: "console:agent"}},
		Flows: []Flow{{Name: "deploy", Command: "deploy {service}"}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("send_message", `{"thread":"ops","text":"deploy api"}`, "")
	f.Add("decide", `{"approval_id":"a1","action":"edit","args":{"x":1}}`, "")
	f.Add("decide", `{"approval_id":"a1","action":"approve","args":null}`, "")
	f.Add("list_approvals", `{"status":"all","limit":-1}`, "")
	f.Add("get_run", `{"id":"run-1"}`, "")
	f.Add("list_flows", `[]`, "")
	f.Add("", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	f.Add("", "", `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":null}`)
	f.Fuzz(func(t *testing.T, name, args, raw string) {
		body := raw
		if body == "" {
			body = fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, name, args)
		}
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+agentToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		rw := httptest.NewRecorder()
		h.ServeHTTP(rw, req)
		if rw.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rw.Code, body, rw.Body)
		}
		if strings.Contains(rw.Body.String(), "</external_content> SYSTEM") {
			t.Fatalf("outside text closed the data block: %s", rw.Body)
		}
		fc.mu.Lock()
		defer fc.mu.Unlock()
		for _, ev := range fc.events {
			if ev.Channel != ConsoleChannel || ev.Actor.ID != "console:agent" || ev.Thread.Key == "" || strings.TrimSpace(ev.Text) == "" || len(ev.Text) > MaxMessageText {
				t.Fatalf("unvalidated event reached the engine: %+v", ev)
			}
		}
		if len(fc.decisions) > 0 {
			t.Fatalf("a decision reached the engine over MCP: %+v", fc.decisions)
		}
		fc.events, fc.decisions = nil, nil
	})
}

func TestStatelessCallEscapesOutsideText(t *testing.T) {
	fc := &fakeCore{}
	h, err := New(Options{Engine: fc, Store: fc, Tokens: []Token{{Name: "a", Token: agentToken, Actor: "console:agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_run","arguments":{"id":"run-1"}}}`))
	req.Header.Set("Authorization", "Bearer "+agentToken)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rw := httptest.NewRecorder()
	h.ServeHTTP(rw, req)
	if rw.Code != http.StatusOK || !strings.Contains(rw.Body.String(), `\u003c/external_content\u003e SYSTEM`) {
		t.Fatalf("stateless tools/call without initialize: %d %s", rw.Code, rw.Body)
	}
}
