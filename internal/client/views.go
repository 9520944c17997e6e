package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/history"
)

// Approval and Run are the API's own views, so the client reads exactly
// what the server writes.
type (
	Approval = api.ApprovalView
	Run      = api.RunView
	Step     = api.StepView
)

// Me is GET /api/v1/me.
type Me struct {
	Actor  string   `json:"actor"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

// Has reports whether the token holds scope.
func (m *Me) Has(scope string) bool {
	for _, s := range m.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// QuestionItem is one question of a pending question (core/agent's
// ask_user shape as the API shows it).
type QuestionItem struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"` // text | choice | confirm
	Text     string   `json:"text"`
	Choices  []string `json:"choices,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

// PendingAction is one entry of a run's "pending_actions" (GET
// /api/v1/runs/{id}): an approval or a question it waits for.
type PendingAction struct {
	ID           string         `json:"id"`
	Kind         string         `json:"kind"` // approval | question | agent_call
	StepIndex    int            `json:"step_index"`
	CallID       string         `json:"call_id,omitempty"`
	Tool         string         `json:"tool,omitempty"`
	ProposedArgs map[string]any `json:"proposed_args,omitempty"`
	Reason       string         `json:"reason,omitempty"`
	Risk         string         `json:"risk,omitempty"`
	Questions    []QuestionItem `json:"questions,omitempty"`
	Answerers    []string       `json:"answerers,omitempty"`
	CreatedAt    string         `json:"created_at"`
	ExpiresAt    string         `json:"expires_at"`
}

// RunDetail is one run with what it waits for.
type RunDetail struct {
	Run
	Kind           string          `json:"kind,omitempty"`
	PendingActions []PendingAction `json:"pending_actions,omitempty"`
}

// QuestionAnswer is one answer of the question array
// [{"questionId","isSkipped","answer"}].
type QuestionAnswer struct {
	QuestionID string `json:"questionId"`
	IsSkipped  bool   `json:"isSkipped"`
	Answer     string `json:"answer"`
}

// Confirmation answers a single confirm question.
type Confirmation struct {
	IsConfirmed bool   `json:"isConfirmed"`
	Feedback    string `json:"feedback,omitempty"`
}

// RunEvent is one event of GET /api/v1/runs/{id}/events.
type RunEvent struct {
	Seq   int64           `json:"seq"`
	RunID string          `json:"run_id"`
	Type  string          `json:"type"`
	At    string          `json:"at"`
	Data  json.RawMessage `json:"data"`
}

// Decision is the body of POST /api/v1/approvals/{id}/decision.
type Decision struct {
	Action string         `json:"action"`
	Args   map[string]any `json:"args,omitempty"`
	Reason string         `json:"reason,omitempty"`
	Scope  string         `json:"scope,omitempty"`
}

// Me asks who the token acts as.
func (c *Client) Me(ctx context.Context) (*Me, error) {
	var m Me
	return &m, c.Do(ctx, "GET", "/api/v1/me", nil, nil, &m)
}

// Approval reads one approval (with input_schema while pending).
func (c *Client) Approval(ctx context.Context, id string) (*Approval, error) {
	var a Approval
	return &a, c.Do(ctx, "GET", "/api/v1/approvals/"+url.PathEscape(id), nil, nil, &a)
}

// Approvals lists approvals with status ("" for all), newest first.
func (c *Client) Approvals(ctx context.Context, status string, limit int) ([]*Approval, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if status != "" {
		q.Set("status", status)
	}
	var page struct {
		Items []*Approval `json:"items"`
	}
	return page.Items, c.Do(ctx, "GET", "/api/v1/approvals", q, nil, &page)
}

// Runs lists runs, newest first (status "" for all).
func (c *Client) Runs(ctx context.Context, status string, limit int) ([]*Run, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if status != "" {
		q.Set("status", status)
	}
	var page struct {
		Items []*Run `json:"items"`
	}
	return page.Items, c.Do(ctx, "GET", "/api/v1/runs", q, nil, &page)
}

// Run reads one run with its steps and pending actions.
func (c *Client) Run(ctx context.Context, id string) (*RunDetail, error) {
	var r RunDetail
	return &r, c.Do(ctx, "GET", "/api/v1/runs/"+url.PathEscape(id), nil, nil, &r)
}

// Decide posts a decision and returns the approval as it is after it.
func (c *Client) Decide(ctx context.Context, id string, d Decision) (*Approval, error) {
	var a Approval
	return &a, c.Do(ctx, "POST", "/api/v1/approvals/"+url.PathEscape(id)+"/decision", nil, d, &a)
}

// Answer answers a question of a run; answer is a []QuestionAnswer or a
// Confirmation.
func (c *Client) Answer(ctx context.Context, runID, actionID string, answer any) (*RunDetail, error) {
	var r RunDetail
	body := map[string]any{"action_id": actionID, "answer": answer}
	return &r, c.Do(ctx, "POST", "/api/v1/runs/"+url.PathEscape(runID)+"/answer", nil, body, &r)
}

// Time parses an API time ("" is the zero time).
func Time(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// AuditQuery selects a page of the audit log (GET /api/v1/audit).
type AuditQuery struct {
	// Newest lists newest first; Cursor then goes back from an entry.
	Newest bool
	Cursor string
	Limit  int
	// Filters, exact matches.
	Actor, Tool, RunID, Kind string
}

// Audit reads one page of the audit log; next is "" after the last page.
func (c *Client) Audit(ctx context.Context, aq AuditQuery) (entries []approvals.AuditEntry, next string, err error) {
	q := url.Values{}
	if aq.Limit > 0 {
		q.Set("limit", strconv.Itoa(aq.Limit))
	}
	if aq.Newest {
		q.Set("order", "newest")
	}
	for k, v := range map[string]string{"cursor": aq.Cursor, "actor": aq.Actor, "tool": aq.Tool, "run_id": aq.RunID, "kind": aq.Kind} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var page struct {
		Items      []approvals.AuditEntry `json:"items"`
		NextCursor string                 `json:"next_cursor"`
	}
	if err := c.Do(ctx, "GET", "/api/v1/audit", q, nil, &page); err != nil {
		return nil, "", err
	}
	return page.Items, page.NextCursor, nil
}

// AuditCalls names the calls that entries' approvals asked for (for
// history.Sentence): from the entries themselves where they carry them,
// else reading at most max approvals with get (Client.Approval). One that
// cannot be read is left out; its sentence names the tool alone.
func AuditCalls(ctx context.Context, get func(context.Context, string) (*Approval, error), entries []approvals.AuditEntry, max int) history.Calls {
	calls := history.CallsOf(entries)
	for i, id := range history.Missing(entries, calls) {
		if i == max {
			break
		}
		a, err := get(ctx, id)
		if err != nil {
			continue
		}
		calls[id] = history.Call{Tool: a.Tool, Args: a.ProposedArgs}
	}
	return calls
}
