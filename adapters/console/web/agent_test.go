package web

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// TestApproveAllOnTheConsole: an agent's turn with two gated calls shows
// both cards with "Approve all"; one click decides both, each through the
// engine, and the run goes on.
func TestApproveAllOnTheConsole(t *testing.T) {
	t.Parallel()
	m := fakellm.Replies(
		&llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "deploy", Arguments: `{"service":"api","version":"1","reason":"api first"}`},
			{ID: "c2", Name: "deploy", Arguments: `{"service":"web","version":"2","reason":"then web"}`},
		}},
		&llm.Response{Text: "Both deployed."},
	)
	b := setup(t, setupOpts{agent: m})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	runID := b.send(t, "agent-1", "ship api and web please") // requested by console:bob
	var pending []*approvals.Approval
	waitUntil(t, "two pending approvals", func() bool {
		pending, _, _ = b.store.ApprovalList(context.Background(), approvals.ApprovalListParams{RunID: runID, Status: approvals.StatusPending})
		return len(pending) == 2
	})
	page := c.do("GET", "/approvals", nil, nil)
	if page.status != 200 || strings.Count(page.body, `data-action="approve-all"`) != 2 || !strings.Contains(page.body, "then web") {
		t.Fatalf("approvals page: %d\n%s", page.status, page.body)
	}
	r := c.do("POST", "/approvals/"+pending[0].ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve_all"}}, nil)
	if r.status != http.StatusOK && r.status != http.StatusSeeOther {
		t.Fatalf("approve all: %d %s", r.status, r.body)
	}
	run := b.waitRun(t, runID, core.RunSucceeded)
	b.deploy.mu.Lock()
	n := len(b.deploy.calls)
	b.deploy.mu.Unlock()
	if n != 2 || run.Kind() != core.RunKindAgent {
		t.Fatalf("deploy ran %d times", n)
	}
}

// waitUntil polls cond (a 2 min hang backstop; the machine may be loaded).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAskUserOnTheConsole: the run page shows the agent's question as a
// form and the conversation; answering it resumes the run with the answer.
func TestAskUserOnTheConsole(t *testing.T) {
	t.Parallel()
	m := fakellm.Replies(
		&llm.Response{Text: "Let me ask.", ToolCalls: []llm.ToolCall{{ID: "q1", Name: "ask_user",
			Arguments: `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]},{"id":"why","kind":"text","text":"Why now?","optional":true}]}`}}},
		&llm.Response{Text: "Deploying to prod."},
	)
	b := setup(t, setupOpts{agent: m})
	c := newClient(t, b.url)
	csrf := c.signIn(bobToken)
	runID := b.send(t, "agent-q", "ship it please")
	b.waitRun(t, runID, core.RunWaitingInput)
	page := c.do("GET", "/runs/"+runID, nil, nil)
	if page.status != 200 || !strings.Contains(page.body, "data-question") || !strings.Contains(page.body, "Which environment?") ||
		!strings.Contains(page.body, `value="prod"`) || !strings.Contains(page.body, "Let me ask.") || !strings.Contains(page.body, "→ ask_user") {
		t.Fatalf("run page: %d\n%s", page.status, page.body)
	}
	r := c.do("POST", "/runs/"+runID+"/answer", url.Values{csrfField: {csrf}, "action_id": {"ask-0"}, "q:env": {"prod"}}, nil)
	if r.status != http.StatusOK && r.status != http.StatusSeeOther {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	b.waitRun(t, runID, core.RunSucceeded)
	reqs := m.Requests()
	last := reqs[len(reqs)-1].Messages
	if got := last[len(last)-1].Text; !strings.Contains(got, "Answered by console:bob:") || !strings.Contains(got, `"answer":"prod"`) || !strings.Contains(got, `"isSkipped":true`) {
		t.Fatalf("the model got %q", got)
	}
	page = c.do("GET", "/runs/"+runID, nil, nil)
	if !strings.Contains(page.body, "Deploying to prod.") || strings.Contains(page.body, "data-question") {
		t.Fatalf("final page:\n%s", page.body)
	}
}
