package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/fakellm"
)

// scriptedModel is the harness agent's model. It answers by the turn's
// first words: "ask …" asks one question with ask_user, "deploy …" calls
// deploy (which waits for an approval), "fail …" fails the model call;
// anything else, and every turn after a tool result, is a plain answer.
func scriptedModel() *fakellm.Model {
	return &fakellm.Model{Respond: func(req *llm.Request) (*llm.Response, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleTool {
			return &llm.Response{Text: "done: " + firstLine(last.Text)}, nil
		}
		text := ""
		for _, m := range req.Messages {
			if m.Role == llm.RoleUser {
				text = m.Text
			}
		}
		switch {
		case strings.Contains(text, "ask "):
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call-ask", Name: llm.AskUserTool,
				Arguments: `{"questions":[{"id":"env","kind":"choice","text":"Which environment?","choices":["staging","prod"]}]}`}}}, nil
		case strings.Contains(text, "deploy "):
			return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call-deploy", Name: "deploy",
				Arguments: `{"service":"api","version":"2.0","reason":"the user asked for it"}`}}}, nil
		case strings.Contains(text, "fail "):
			return nil, &llm.Error{Kind: llm.ErrRequest, Message: "scripted failure"}
		}
		return &llm.Response{Text: "hello"}, nil
	}}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// bothQuestions serves the fake questions tests put on flow runs and the
// engine's own (ask_user of agent runs), as cmd/opsgate wires the latter.
type bothQuestions struct {
	fake *fakeQuestions
	eng  *engine.Engine
}

func (b bothQuestions) PendingQuestions(ctx context.Context, runID string) ([]Question, error) {
	out, _ := b.fake.PendingQuestions(ctx, runID)
	ps, err := b.eng.PendingQuestions(ctx, runID)
	if errors.Is(err, core.ErrNotFound) {
		return out, nil // a run rendered without being stored (TestEveryStatusShapeMatchesSchemas)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		raw, err := json.Marshal(p.Ask)
		if err != nil {
			return nil, err
		}
		out = append(out, Question{ID: p.ActionID, RunID: p.RunID, Questions: raw, ExpiresAt: p.ExpiresAt})
	}
	return out, nil
}

func (b bothQuestions) Answer(ctx context.Context, actor core.Actor, channel, runID, actionID string, answer json.RawMessage) error {
	if strings.HasPrefix(actionID, "ask-") {
		return b.eng.Answer(ctx, actor, channel, runID, actionID, answer)
	}
	return b.fake.Answer(ctx, actor, channel, runID, actionID, answer)
}

// agentRun starts a turn of the harness agent for actor in a thread of
// its own and waits until the run has one of statuses.
func agentRun(t testing.TB, actor, text string, statuses ...core.RunStatus) *core.Run {
	t.Helper()
	rc, err := theEnv.eng.StartAgentTurn(context.Background(), engine.AgentTurn{
		Thread: core.Thread{Channel: core.ConsoleChannel, Key: "agent-" + randomID()[:12]}, Actor: core.Actor{ID: actor}, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return waitRun(t, rc.RunID, statuses...)
}
