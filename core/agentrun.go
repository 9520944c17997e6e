package core

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Agent runs (issue 12, CONTRACT.md "Agents"): a run whose flow column is
// AgentFlow(name) is one turn of an agent's session. The session is the
// run's thread; its conversation is stored as EventAgentMessage run events,
// appended in the same checkpoint transaction as the state change they
// belong to, so the history and the run can never disagree.

// AgentFlowPrefix marks an agent run's flow value. config check refuses flow
// names with this prefix, so the two never collide.
const AgentFlowPrefix = "agent:"

// Run kinds, as the API names them.
const (
	RunKindFlow  = "flow"
	RunKindAgent = "agent"
)

// AgentFlow is the flow value of a run of the agent named name.
func AgentFlow(name string) string { return AgentFlowPrefix + name }

// AgentOf returns the agent of an agent run's flow value.
func AgentOf(flow string) (name string, ok bool) {
	return strings.CutPrefix(flow, AgentFlowPrefix)
}

// Kind is the run's kind: RunKindAgent or RunKindFlow.
func (r *Run) Kind() string {
	if _, ok := AgentOf(r.Flow); ok {
		return RunKindAgent
	}
	return RunKindFlow
}

// The run event types of agent runs (beside the flow ones).
const (
	// EventAgentMessage carries one stored conversation message (the JSON
	// of agent.Message): the session's history is these events.
	EventAgentMessage = "agent.message"
	// EventTextDelta is streamed model text; never stored, served from
	// the replica running the turn.
	EventTextDelta = "text.delta"
	// EventQuestionRequested says an ask_user question waits for an answer.
	EventQuestionRequested = "question.requested"
	// EventQuestionAnswered says it was answered (or expired).
	EventQuestionAnswered = "question.answered"
)

// AgentRecord is one stored conversation message of a session.
type AgentRecord struct {
	Seq   int64
	RunID string
	// Message is the agent.Message JSON.
	Message json.RawMessage
	At      time.Time
}

// AgentHistoryStore reads a session's conversation back. Both stores
// implement it.
type AgentHistoryStore interface {
	// AgentHistory returns the newest limit (≤ 0: all, bounded by the
	// store) EventAgentMessage records of the runs of thread, oldest first.
	AgentHistory(ctx context.Context, thread Thread, limit int) ([]AgentRecord, error)
}

// AnswerEvent is a click on a question message's button, or a form's
// submission, for the single question ActionID of run RunID: the choice
// (its index among the choices; for a confirm 0 is yes, 1 is no), a skip
// of an optional question, or a free text (a platform's form).
type AnswerEvent struct {
	RunID    string `json:"run_id"`
	ActionID string `json:"action_id"`
	Choice   int    `json:"choice"`
	// Skip skips the optional question (Choice is ignored).
	Skip bool `json:"skip,omitempty"`
	// Text, when set, is the answer as typed (Choice is ignored).
	Text string `json:"text,omitempty"`
}

// QuestionCard is an agent's pending question as a chat renders it
// natively: a platform that can (QuestionRenderer) shows buttons for a
// single choice or confirm question; every other case is answered by a
// reply in the thread, which the message's text explains.
type QuestionCard struct {
	RunID     string         `json:"run_id"`
	ActionID  string         `json:"action_id"`
	Questions []QuestionItem `json:"questions"`
	ExpiresAt time.Time      `json:"expires_at"`
}

// QuestionItem is one question of a QuestionCard.
type QuestionItem struct {
	ID       string   `json:"id"`
	Kind     string   `json:"kind"` // text | choice | confirm
	Text     string   `json:"text"`
	Choices  []string `json:"choices,omitempty"`
	Optional bool     `json:"optional,omitempty"`
}

// Buttons are the answers a single choice or confirm question takes by a
// click, in Choice order; nil when the card is answered by a reply.
func (q *QuestionCard) Buttons() []string {
	if q == nil || len(q.Questions) != 1 {
		return nil
	}
	switch it := q.Questions[0]; it.Kind {
	case "choice":
		return it.Choices
	case "confirm":
		return []string{"Yes", "No"}
	}
	return nil
}

// AskActionID is the action id of the question an agent asked at step
// idx ("ask-3"), as the API, MCP and a question's buttons name it.
func AskActionID(idx int) string { return "ask-" + strconv.Itoa(idx) }

// AskStep is the step of the question AskActionID named; ok is false for
// any other id.
func AskStep(actionID string) (idx int, ok bool) {
	n, found := strings.CutPrefix(actionID, "ask-")
	i, err := strconv.Atoi(n)
	if !found || err != nil || i < 0 || strconv.Itoa(i) != n {
		return 0, false
	}
	return i, true
}

// Skippable reports whether the card's single question may be skipped
// (a platform shows a Skip button).
func (q *QuestionCard) Skippable() bool {
	return q != nil && len(q.Questions) == 1 && q.Questions[0].Optional
}

// FreeText reports whether the card is one question answered in words (a
// platform with forms opens one; others take a reply).
func (q *QuestionCard) FreeText() bool {
	return q != nil && len(q.Questions) == 1 && q.Questions[0].Kind == "text"
}

// QuestionSource finds the pending question an outbox message carries
// (the engine implements it): nil, nil when the message is no pending
// question (any more).
type QuestionSource interface {
	QuestionForMessage(ctx context.Context, runID, messageID string) (*QuestionCard, error)
}

// QuestionRenderer is an adapter that renders Outbound.Question natively.
type QuestionRenderer interface {
	RendersQuestions() bool
}
