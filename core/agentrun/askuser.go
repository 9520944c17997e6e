package agentrun

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
)

// ask_user (docs/agents.md): the model's questions to people. The call
// puts the run in waiting_input with its step waiting_input (the ask as the
// step's args) and a question message in the thread. The engine takes the
// answer (Engine.Answer: from the console, the API, MCP, or a reply in the
// thread), validated against the ask, in ONE guarded checkpoint that
// requeues the run with the step succeeded and the answer (Answered) as
// its output; the resumed turn gives it to the model here. A question
// nobody answers within the approval ttl expires the same way, and the
// model is told.

// StepWaitingInput is the step of an ask_user call waiting for an answer.
const StepWaitingInput core.StepStatus = "waiting_input"

// Answered is a stored answer (the step's output). Agent, when set, is the
// agent (the same agent on another model) the rest of the run uses.
type Answered struct {
	By     string          `json:"by"`
	Answer json.RawMessage `json:"answer"`
	Agent  string          `json:"agent,omitempty"`
}

// RunAgent is the agent an agent run runs as: its flow's, unless an answer
// switched it (the Agent API's answer with a model); ok is false for a
// flow run.
func RunAgent(run *core.Run) (name string, ok bool) {
	name, ok = core.AgentOf(run.Flow)
	if !ok {
		return "", false
	}
	for _, st := range run.Steps {
		if st.Tool != llm.AskUserTool || st.Status != core.StepSucceeded {
			continue
		}
		var an Answered
		if json.Unmarshal([]byte(st.Output), &an) == nil && an.Agent != "" {
			name = an.Agent
		}
	}
	return name, true
}

// askUser handles an ask_user call: a malformed ask is an error result; a
// new one suspends the run; an answered or expired one becomes the result.
func (ax *exec) askUser(ctx context.Context, call llm.Call, idx int) (bool, error) {
	l, host := ax.l, ax.host
	ttl := l.opts.ApprovalTTL
	ask, err := llm.ParseAsk(call.Arguments)
	now := l.now()
	if err != nil {
		st := &core.Step{Index: idx, Tool: llm.AskUserTool, Status: core.StepFailed, Args: call.Args, Error: err.Error(), FinishedAt: &now}
		return ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeInvalid, Problem: err.Error()}, st)
	}
	st := ax.stepAt(idx)
	switch {
	case st == nil:
		return true, ax.suspendAsk(ctx, call, idx, ask)
	case st.Status == StepWaitingInput:
		if st.StartedAt != nil && !now.Before(st.StartedAt.Add(ttl)) {
			next := *st
			next.Status, next.Error, next.FinishedAt = core.StepFailed, "question expired", &now
			msg := llm.Unanswered(call, ttl, now)
			upd := host.QuestionExpired(ax.run, st.Output, ask, st.StartedAt.Add(ttl))
			return false, ax.commit(ctx, core.Checkpoint{Step: &next, Outbox: host.ToThread(ax.run.Thread, upd), Events: []core.RunEvent{
				host.Event(ax.run.ID, core.EventQuestionAnswered, map[string]any{"action_id": core.AskActionID(idx), "expired": true})}}, msg)
		}
		// Requeued without an answer: wait again.
		return true, ax.Checkpoint(ctx, core.Checkpoint{Status: core.RunWaitingInput, Release: true})
	case st.Status == core.StepSucceeded:
		var an Answered
		if err := json.Unmarshal([]byte(st.Output), &an); err != nil {
			return false, fmt.Errorf("answer of %s: %w", core.AskActionID(idx), err)
		}
		reply, err := ask.ParseReply(an.Answer)
		if err != nil {
			return false, fmt.Errorf("stored answer of %s: %w", core.AskActionID(idx), err)
		}
		return false, ax.commit(ctx, core.Checkpoint{}, reply.Result(call, an.By, now))
	case st.Status == core.StepFailed:
		return false, ax.commit(ctx, core.Checkpoint{}, llm.Unanswered(call, ttl, now))
	}
	return ax.result(ctx, call, llm.Outcome{Kind: llm.OutcomeCancelled}, nil)
}

// suspendAsk puts the run in waiting_input with the question in the thread.
func (ax *exec) suspendAsk(ctx context.Context, call llm.Call, idx int, ask llm.Ask) error {
	host := ax.host
	now := ax.l.now()
	var args map[string]any
	_ = json.Unmarshal(mustJSON(ask), &args)
	expires := now.Add(ax.l.opts.ApprovalTTL)
	msg := host.Question(ax.run, ask, idx, expires)
	// While it waits, the step's output names the message that asks, so
	// a chat that renders questions natively finds it (QuestionForMessage).
	st := &core.Step{Index: idx, Tool: llm.AskUserTool, Status: StepWaitingInput, Args: args, StartedAt: &now, Output: msg.ID}
	return ax.Checkpoint(ctx, core.Checkpoint{
		Status: core.RunWaitingInput, Release: true, Step: st,
		Outbox: host.ToThread(ax.run.Thread, msg),
		Events: []core.RunEvent{host.Event(ax.run.ID, core.EventQuestionRequested, map[string]any{
			"action_id": core.AskActionID(idx), "questions": ask.Questions, "tool_call_id": call.ID, "expires_at": expires,
			"session_id": ax.run.Thread.String(), "request_id": core.AskActionID(idx),
		})},
	})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}
