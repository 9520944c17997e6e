package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/router"
)

// The result shapes. A run is the HTTP API's run (README, API v1) plus what
// it waits for: pending_actions (the API's name) and pendingAgentCall
// (the MCP name docs/mcp.md gives), so an agent can follow a run it started.

type flowView struct {
	Name        string    `json:"name"`
	Description string    `json:"description"`
	Command     string    `json:"command"`
	Usage       string    `json:"usage"`
	Arguments   []argView `json:"arguments"`
	Stages      []string  `json:"stages"`
	pattern     *router.Pattern
}

type argView struct {
	Name     string  `json:"name"`
	Required bool    `json:"required"`
	Default  *string `json:"default,omitempty"`
}

type runView struct {
	ID               string         `json:"id"`
	Flow             string         `json:"flow"`
	Kind             string         `json:"kind"`
	Thread           string         `json:"thread"`
	Requester        string         `json:"requester"`
	Status           core.RunStatus `json:"status"`
	Args             map[string]any `json:"args"`
	Reason           string         `json:"reason"`
	StepIndex        int            `json:"step_index"`
	ErrorCode        string         `json:"error_code,omitempty"`
	ErrorMessage     string         `json:"error_message,omitempty"`
	CreatedAt        string         `json:"created_at"`
	UpdatedAt        string         `json:"updated_at"`
	Link             string         `json:"link,omitempty"`
	Steps            []stepView     `json:"steps"`
	PendingActions   []actionView   `json:"pending_actions"`
	PendingAgentCall *agentCallRef  `json:"pendingAgentCall"`
	run              *core.Run      `json:"-"`
	calls            []*core.AgentCall
}

type stepView struct {
	Index      int             `json:"index"`
	Stage      string          `json:"stage,omitempty"`
	Tool       string          `json:"tool"`
	Status     core.StepStatus `json:"status"`
	Args       map[string]any  `json:"args"`
	Output     string          `json:"output"`
	Error      string          `json:"error,omitempty"`
	ApprovalID string          `json:"approval_id,omitempty"`
	Attempts   int             `json:"attempts"`
	StartedAt  string          `json:"started_at,omitempty"`
	FinishedAt string          `json:"finished_at,omitempty"`
}

type actionView struct {
	ID           string              `json:"id"`
	Kind         string              `json:"kind"`
	Status       string              `json:"status"`
	Answerable   bool                `json:"answerable"`
	Tool         string              `json:"tool,omitempty"`
	Risk         string              `json:"risk,omitempty"`
	ProposedArgs map[string]any      `json:"proposed_args,omitempty"`
	Preview      string              `json:"dry_run_preview,omitempty"`
	Digest       string              `json:"digest,omitempty"`
	Link         string              `json:"link,omitempty"`
	Questions    []questionItem      `json:"questions,omitempty"`
	Stage        string              `json:"stage,omitempty"`
	ClaimedBy    string              `json:"claimed_by,omitempty"`
	ExpiresAt    string              `json:"expires_at,omitempty"`
	ask          *pendingQuestion    `json:"-"`
	approval     *approvals.Approval `json:"-"`
}

type questionItem struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"`
	Text     string   `json:"text"`
	Choices  []string `json:"choices,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

type agentCallRef struct {
	ID        string               `json:"id"`
	Stage     string               `json:"stage,omitempty"`
	Status    core.AgentCallStatus `json:"status"`
	ClaimedBy string               `json:"claimed_by,omitempty"`
}

type runMeta struct {
	ID             string         `json:"id"`
	Flow           string         `json:"flow"`
	Kind           string         `json:"kind"`
	Thread         string         `json:"thread"`
	Requester      string         `json:"requester"`
	Status         core.RunStatus `json:"status"`
	ErrorCode      string         `json:"error_code,omitempty"`
	CreatedAt      string         `json:"created_at"`
	UpdatedAt      string         `json:"updated_at"`
	PendingActions int            `json:"pending_actions"`
}

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func rfc3339Ptr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return rfc3339(*t)
}

func emptyIfNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// runKind is the run's kind (docs/agents.md): "agent" for an agent's turn,
// "flow" otherwise, as the API says.
func runKind(r *core.Run) string { return r.Kind() }

// stage names step i of a flow's run.
func (s *Server) stage(flow string, i int, st core.Step) string {
	if f := s.byName[flow]; f != nil && i < len(f.Stages) {
		return f.Stages[i]
	}
	if st.Tool == core.AgentTaskStep {
		if v, ok := st.Args["stage"].(string); ok {
			return v
		}
	}
	return st.Tool
}

func (s *Server) link(kind, id string) string { return s.o.PublicURL + "/" + kind + "/" + id }

// runView renders r with what it waits for, as c may see it.
func (s *Server) runView(ctx context.Context, c caller, r *core.Run) (*runView, error) {
	v := &runView{
		ID: r.ID, Flow: r.Flow, Kind: runKind(r), Thread: r.Thread.String(), Requester: r.Requester, Status: r.Status,
		Args: emptyIfNil(r.Args), Reason: r.Reason, StepIndex: r.StepIndex, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage,
		CreatedAt: rfc3339(r.CreatedAt), UpdatedAt: rfc3339(r.UpdatedAt), Link: s.link("runs", r.ID),
		Steps: make([]stepView, 0, len(r.Steps)), PendingActions: []actionView{}, run: r,
	}
	for _, st := range r.Steps {
		v.Steps = append(v.Steps, stepView{Index: st.Index, Stage: s.stage(r.Flow, st.Index, st), Tool: st.Tool, Status: st.Status,
			Args: emptyIfNil(st.Args), Output: st.Output, Error: st.Error, ApprovalID: st.ApprovalID, Attempts: st.Attempts,
			StartedAt: rfc3339Ptr(st.StartedAt), FinishedAt: rfc3339Ptr(st.FinishedAt)})
	}
	acts, calls, err := s.pendingActions(ctx, c, r)
	if err != nil {
		return nil, err
	}
	v.PendingActions, v.calls = acts, calls
	for _, call := range calls {
		if !call.Status.Final() {
			v.PendingAgentCall = &agentCallRef{ID: call.ID, Stage: call.Task.Stage, Status: call.Status, ClaimedBy: call.ClaimedBy}
			break
		}
	}
	return v, nil
}

func newRunMeta(r *core.Run, pending int) runMeta {
	return runMeta{ID: r.ID, Flow: r.Flow, Kind: runKind(r), Thread: r.Thread.String(), Requester: r.Requester, Status: r.Status,
		ErrorCode: r.ErrorCode, CreatedAt: rfc3339(r.CreatedAt), UpdatedAt: rfc3339(r.UpdatedAt), PendingActions: pending}
}

// pendingQuestion is a question action with its parsed ask.
type pendingQuestion struct {
	q     Question
	items []questionItem
}

// pendingActions lists what r waits for: its pending approvals (visible,
// never answerable here), its open questions, its open agent call.
func (s *Server) pendingActions(ctx context.Context, c caller, r *core.Run) ([]actionView, []*core.AgentCall, error) {
	out := []actionView{}
	if r.Status.Final() {
		calls, err := s.o.Engine.AgentCalls(ctx, r.ID)
		return out, calls, err
	}
	as, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: r.ID, Status: approvals.StatusPending, Limit: 100})
	if err != nil {
		return nil, nil, fmt.Errorf("mcp: approvals of run %s: %w", r.ID, err)
	}
	for _, a := range as {
		out = append(out, s.approvalAction(c, r, a))
	}
	if s.o.Questions != nil {
		qs, err := s.o.Questions.PendingQuestions(ctx, r.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("mcp: questions of run %s: %w", r.ID, err)
		}
		for _, q := range qs {
			pq := parseQuestion(q)
			out = append(out, actionView{ID: q.ID, Kind: "question", Status: "pending", Answerable: true, Questions: pq.items,
				ExpiresAt: rfc3339(q.ExpiresAt), ask: pq})
		}
	}
	calls, err := s.o.Engine.AgentCalls(ctx, r.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("mcp: agent calls of run %s: %w", r.ID, err)
	}
	for _, call := range calls {
		if !call.Status.Final() {
			out = append(out, actionView{ID: call.ID, Kind: "agent_call", Status: string(call.Status), Answerable: false,
				Stage: call.Task.Stage, ClaimedBy: call.ClaimedBy})
		}
	}
	return out, calls, nil
}

// approvalAction shows a pending approval: what is asked, with the card's
// link. Its dry-run preview is shown only to a token that reads
// everything or to the run's own requester (its own thread).
func (s *Server) approvalAction(c caller, r *core.Run, a *approvals.Approval) actionView {
	v := actionView{ID: a.ID, Kind: "approval", Status: string(a.Status), Answerable: false, Tool: a.Tool, Risk: string(a.Risk),
		ProposedArgs: emptyIfNil(a.ProposedArgs), Digest: a.Digest, Link: s.link("approvals", a.ID), ExpiresAt: rfc3339(a.ExpiresAt), approval: a}
	if c.auth.ReadsAll() || (r.Requester == c.actor.ID && a.Thread == r.Thread.String()) {
		v.Preview = a.Preview
	}
	return v
}

func parseQuestion(q Question) *pendingQuestion {
	var ask struct {
		Questions []questionItem `json:"questions"`
	}
	raw := q.Questions
	if len(raw) > 0 && raw[0] == '[' {
		raw = json.RawMessage(`{"questions":` + string(raw) + `}`)
	}
	_ = json.Unmarshal(raw, &ask)
	if ask.Questions == nil {
		ask.Questions = []questionItem{}
	}
	return &pendingQuestion{q: q, items: ask.Questions}
}
