package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/agentrun"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/markdown"
)

// ask_user (docs/agents.md): the model's questions to people. The loop
// (core/agentrun) puts the run in waiting_input with its step
// waiting_input (the ask as the step's args) and a question message in the
// thread. An answer — from the console, the API, MCP, or a reply in the
// thread — is validated against the ask here and written in ONE guarded
// checkpoint (the run must still be waiting_input: the first answer wins)
// that requeues the run with the step succeeded and the answer as its
// output (agentrun.Answered); the resumed turn gives it to the model. A
// question nobody answers within approvals.ttl expires the same way, and
// the model is told.

// Who may answer a question (Options.QuestionAnswerers; core/authority
// judges it).
const (
	// AnswerRequesterOrApprovers (default): the run's requester, or anyone
	// in an approvers group.
	AnswerRequesterOrApprovers = authority.AnswerRequesterOrApprovers
	// AnswerRequester: the run's requester only.
	AnswerRequester = authority.AnswerRequester
)

// askActionID names the question of step idx: the action_id of
// POST /api/v1/runs/{id}/answer (core.AskActionID).
func askActionID(idx int) string { return core.AskActionID(idx) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte("null")
	}
	return b
}

// PendingQuestion is the unanswered ask of a run waiting_input.
type PendingQuestion struct {
	ActionID  string
	RunID     string
	Ask       llm.Ask
	ExpiresAt time.Time
}

// PendingQuestions lists a run's unanswered question (at most one: a run
// waits on one ask at a time).
func (e *Engine) PendingQuestions(ctx context.Context, runID string) ([]PendingQuestion, error) {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("engine: questions of %s: %w", runID, err)
	}
	var out []PendingQuestion
	if run.Status != core.RunWaitingInput {
		return out, nil
	}
	for _, st := range run.Steps {
		if st.Status != StepWaitingInput {
			continue
		}
		ask, err := llm.ParseAsk(string(mustJSON(st.Args)))
		if err != nil {
			continue
		}
		q := PendingQuestion{ActionID: askActionID(st.Index), RunID: runID, Ask: ask}
		if st.StartedAt != nil {
			q.ExpiresAt = st.StartedAt.Add(e.opts.ApprovalTTL)
		}
		out = append(out, q)
	}
	return out, nil
}

// QuestionCards is PendingQuestions in the core's shape, for surfaces that
// list what a run waits for (the API's pending_actions).
func (e *Engine) QuestionCards(ctx context.Context, runID string) ([]core.QuestionCard, error) {
	ps, err := e.PendingQuestions(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]core.QuestionCard, 0, len(ps))
	for _, p := range ps {
		out = append(out, questionCard(p))
	}
	return out, nil
}

// questionCard renders one pending question as a core.QuestionCard.
func questionCard(p PendingQuestion) core.QuestionCard {
	q := core.QuestionCard{RunID: p.RunID, ActionID: p.ActionID, ExpiresAt: p.ExpiresAt}
	for _, it := range p.Ask.Questions {
		q.Questions = append(q.Questions, core.QuestionItem{ID: it.ID, Kind: string(it.Kind), Text: it.Text, Choices: it.Choices, Optional: it.Optional})
	}
	return q
}

// Answer answers the question actionID of a run waiting_input with raw —
// the question array [{"questionId","isSkipped","answer"}] or, for one
// confirm question, {"isConfirmed","feedback"} — and requeues the run; the
// model receives the answer. Refusals are *core.DecisionError: not_found
// (no such question), already_decided (answered, expired or the run moved
// on), not_approver (actor may not answer), bad_request (not JSON),
// invalid_args (does not answer the questions).
func (e *Engine) Answer(ctx context.Context, actor core.Actor, channel, runID, actionID string, raw json.RawMessage) error {
	return e.AnswerSwitching(ctx, actor, channel, runID, actionID, raw, "")
}

// AnswerSwitching is Answer that also switches the rest of the run to the
// configured agent switchTo (the same agent on another model, as an Agent
// API answer with a model asks); "" keeps the run's agent.
func (e *Engine) AnswerSwitching(ctx context.Context, actor core.Actor, channel, runID, actionID string, raw json.RawMessage, switchTo string) error {
	if switchTo != "" && !e.loop.Has(switchTo) {
		return &core.DecisionError{Code: core.DecisionBadRequest, Message: fmt.Sprintf("no agent %q to switch to", switchTo)}
	}
	run, err := e.store.RunGet(ctx, runID)
	if errors.Is(err, core.ErrNotFound) {
		return &core.DecisionError{Code: core.DecisionNotFound, Message: "no run " + runID, Question: true}
	}
	if err != nil {
		return fmt.Errorf("engine: answer %s: %w", runID, err)
	}
	i := slices.IndexFunc(run.Steps, func(s core.Step) bool { return askActionID(s.Index) == actionID && s.Tool == llm.AskUserTool })
	if i < 0 {
		return &core.DecisionError{Code: core.DecisionNotFound, Message: fmt.Sprintf("run %s has no question %q", runID, actionID), Question: true}
	}
	st := run.Steps[i]
	if run.Status != core.RunWaitingInput || st.Status != StepWaitingInput {
		return closedQuestion(st)
	}
	now := e.now()
	if toolQuestion(st) && e.askerGone(run, now) {
		return &core.DecisionError{Code: core.DecisionExpired, Message: whyAskerGone + "; the question closes unanswered", Question: true}
	}
	if st.StartedAt != nil && !now.Before(st.StartedAt.Add(e.opts.ApprovalTTL)) {
		return &core.DecisionError{Code: core.DecisionExpired, Message: "this question expired", At: st.StartedAt.Add(e.opts.ApprovalTTL), Question: true}
	}
	if why := e.mayAnswer(run, actor.ID); why != "" {
		return &core.DecisionError{Code: core.DecisionNotApprover, Message: why, Question: true}
	}
	ask, err := llm.ParseAsk(string(mustJSON(st.Args)))
	if err != nil {
		return fmt.Errorf("engine: answer %s: stored ask: %w", runID, err)
	}
	reply, err := ask.ParseReply(raw)
	switch {
	case errors.Is(err, llm.ErrMalformedAnswer):
		return &core.DecisionError{Code: core.DecisionBadRequest, Message: err.Error(), Question: true}
	case err != nil:
		return &core.DecisionError{Code: core.DecisionInvalidArgs, Message: strings.TrimPrefix(err.Error(), llm.ErrInvalidAnswer.Error()+": "), Question: true}
	}
	next := st
	next.Status, next.FinishedAt = core.StepSucceeded, &now
	next.Output = string(mustJSON(agentrun.Answered{By: actor.ID, Answer: reply.JSON(), Agent: switchTo}))
	// The question's message shows the answer (its buttons gone).
	upd := e.questionUpdate(run, st.Output, answeredText(asker(run, st), ask, reply, actor.ID, now))
	resume := core.RunQueued
	if toolQuestion(st) {
		resume = core.RunRunning // its tool call waits in flight (upstreamquestion.go)
	}
	err = e.store.RunCheckpoint(ctx, core.Checkpoint{
		RunID: runID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: resume, Step: &next,
		Outbox: e.toThread(run.Thread, upd),
		Events: e.withMirrors(run, []core.RunEvent{e.event(runID, core.EventQuestionAnswered, map[string]any{
			"action_id": actionID, "by": actor.ID, "channel": channel, "answer": json.RawMessage(reply.JSON())})}),
	})
	if errors.Is(err, core.ErrConflict) {
		if cur, gerr := e.store.RunGet(ctx, runID); gerr == nil {
			if j := slices.IndexFunc(cur.Steps, func(s core.Step) bool { return s.Index == st.Index }); j >= 0 {
				return closedQuestion(cur.Steps[j])
			}
		}
		return &core.DecisionError{Code: core.DecisionAlreadyDecided, Message: "this question was answered meanwhile", Question: true}
	}
	if err != nil {
		return fmt.Errorf("engine: answer %s: %w", runID, err)
	}
	return nil
}

// mayAnswer says why actor may not answer run's question, or "": the
// authority's standing of an identity (the surface a token came through
// judged the token first).
func (e *Engine) mayAnswer(run *core.Run, actor string) string {
	if err := e.auth.AnswerStanding(run, actor); err != nil {
		if r, ok := authority.RefusalOf(err); ok {
			return r.Message
		}
		return err.Error()
	}
	return ""
}

// sweepQuestions requeues the runs (of those waiting for input) whose
// question expired, so the model is told (the resumed turn sees the
// expiry).
func (e *Engine) sweepQuestions(ctx context.Context, runs []*core.Run) error {
	now := e.now()
	for _, r := range runs {
		// A tool's question (a flow's too) closes once its asker is gone
		// or it expired; an agent's ask_user question once it expired.
		gone := e.askerGone(r, now)
		if !gone && now.Before(r.UpdatedAt.Add(e.opts.ApprovalTTL)) {
			continue // the run waited less than the ttl: its question has too
		}
		_, agentRun := core.AgentOf(r.Flow)
		full, err := e.store.RunGet(ctx, r.ID) // lists carry no steps
		if err != nil {
			return fmt.Errorf("engine: expire question of %s: %w", r.ID, err)
		}
		for _, st := range full.Steps {
			expired := st.StartedAt != nil && !now.Before(st.StartedAt.Add(e.opts.ApprovalTTL))
			if st.Status == StepWaitingInput && (expired || gone) && (agentRun || toolQuestion(st)) {
				c := core.Checkpoint{RunID: r.ID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunQueued}
				if toolQuestion(st) {
					c = e.lapsedToolQuestion(full, st, now, gone)
				} else if !expired {
					continue
				}
				err := e.store.RunCheckpoint(ctx, c)
				if err != nil && !errors.Is(err, core.ErrConflict) {
					return fmt.Errorf("engine: expire question of %s: %w", r.ID, err)
				}
			}
		}
	}
	return nil
}

// answerFromThread treats a message in a thread whose agent run waits for
// input as the answer, when its sender may answer: one line per question
// ("skip" skips an optional one). It reports whether it did.
func (e *Engine) answerFromThread(ctx context.Context, ev core.ChannelEvent) (core.Receipt, bool, error) {
	runs, _, err := e.store.RunList(ctx, core.RunListParams{Thread: ev.Thread.String(), Status: core.RunWaitingInput, Limit: 1})
	if err != nil || len(runs) == 0 {
		return core.Receipt{}, false, err
	}
	run := e.waitingChild(ctx, runs[0])
	if _, ok := core.AgentOf(run.Flow); !ok || e.mayAnswer(run, ev.Actor.ID) != "" {
		return core.Receipt{}, false, nil
	}
	qs, err := e.PendingQuestions(ctx, run.ID)
	if err != nil || len(qs) == 0 {
		return core.Receipt{}, false, err
	}
	q := qs[0]
	answers := replyAnswers(q.Ask, ev.Text)
	// The message is recorded (deduplicated) first, starting nothing; the
	// answer then goes through Answer like any other.
	res, err := e.store.InboxRecord(ctx, core.InboxRecordParams{Event: ev})
	if err != nil {
		return core.Receipt{}, true, fmt.Errorf("engine: record answer %s/%s: %w", ev.Channel, ev.EventID, err)
	}
	rc := core.Receipt{Duplicate: res.Duplicate, RunID: run.ID}
	if res.Duplicate {
		return rc, true, nil
	}
	if err := e.Answer(ctx, ev.Actor, ev.Channel, run.ID, q.ActionID, mustJSON(answers)); err != nil {
		var de *core.DecisionError
		if errors.As(err, &de) {
			// Tell the thread what was wrong; the question still waits.
			_, rerr := e.store.InboxRecord(ctx, core.InboxRecordParams{Event: core.ChannelEvent{
				Channel: ev.Channel, EventID: ev.EventID + "/refused", Actor: ev.Actor, Thread: ev.Thread, ReceivedAt: ev.ReceivedAt,
			}, Replies: []core.OutboxMessage{{ID: e.opts.NewID(), Thread: ev.Thread, Kind: core.KindReply, RunID: run.ID, CreatedAt: e.now(),
				Text: markdown.Escape(core.RefusalText(de)) + " The question still waits."}}})
			return rc, true, rerr
		}
		return rc, true, err
	}
	return rc, true, nil
}

var _ core.QuestionSource = (*Engine)(nil)

// QuestionForMessage implements core.QuestionSource: the question the
// outbox message messageID asks, while run runID still waits for it.
func (e *Engine) QuestionForMessage(ctx context.Context, runID, messageID string) (*core.QuestionCard, error) {
	if !e.loop.Any() {
		return nil, nil
	}
	run, err := e.store.RunGet(ctx, runID)
	if errors.Is(err, core.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if run.Status != core.RunWaitingInput {
		return nil, nil
	}
	for _, st := range run.Steps {
		if st.Status != StepWaitingInput || st.Output != messageID {
			continue
		}
		ask, err := llm.ParseAsk(string(mustJSON(st.Args)))
		if err != nil {
			return nil, nil
		}
		p := PendingQuestion{ActionID: askActionID(st.Index), RunID: runID, Ask: ask}
		if st.StartedAt != nil {
			p.ExpiresAt = st.StartedAt.Add(e.opts.ApprovalTTL)
		}
		q := questionCard(p)
		return &q, nil
	}
	return nil, nil
}

// handleAnswerEvent records a question button's click (deduplicated) and
// answers with the clicked choice. Refusals are *core.DecisionError.
func (e *Engine) handleAnswerEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	an := ev.Answer
	res, err := e.store.InboxRecord(ctx, core.InboxRecordParams{Event: ev})
	if err != nil {
		return core.Receipt{}, fmt.Errorf("engine: record answer %s/%s: %w", ev.Channel, ev.EventID, err)
	}
	rc := core.Receipt{Duplicate: res.Duplicate, RunID: an.RunID}
	if res.Duplicate {
		return rc, nil
	}
	qs, err := e.PendingQuestions(ctx, an.RunID)
	if err != nil {
		return rc, &core.DecisionError{Code: core.DecisionNotFound, Message: "no such question", Question: true}
	}
	i := slices.IndexFunc(qs, func(q PendingQuestion) bool { return q.ActionID == an.ActionID })
	if i < 0 {
		// Answered, expired or moved on: Answer names what happened.
		return rc, e.Answer(ctx, ev.Actor, ev.Channel, an.RunID, an.ActionID, mustJSON([]llm.Answer{}))
	}
	ask := qs[i].Ask
	if len(ask.Questions) != 1 {
		return rc, &core.DecisionError{Code: core.DecisionBadRequest, Message: "this question is answered by a reply in the thread", Question: true}
	}
	q := ask.Questions[0]
	a := llm.Answer{QuestionID: q.ID}
	switch {
	case an.Skip:
		a.IsSkipped = true // Answer refuses it for a question that may not be skipped
	case an.Text != "":
		a.Answer = an.Text
	case q.Kind == llm.QuestionChoice && an.Choice >= 0 && an.Choice < len(q.Choices):
		a.Answer = q.Choices[an.Choice]
	case q.Kind == llm.QuestionConfirm && (an.Choice == 0 || an.Choice == 1):
		a.Answer = []string{"yes", "no"}[an.Choice]
	default:
		return rc, &core.DecisionError{Code: core.DecisionBadRequest, Message: "not one of the question's answers", Question: true}
	}
	return rc, e.Answer(ctx, ev.Actor, ev.Channel, an.RunID, an.ActionID, mustJSON([]llm.Answer{a}))
}
