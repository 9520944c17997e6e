package engine

import (
	"cmp"
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
	"github.com/opsgate/opsgate/core/markdown"
)

// A tool's question to people while it runs (an upstream MCP server's
// elicitation, docs/mcp-servers.md) takes ask_user's path: a question
// step (ask_user, waiting_input) in the run with the question message in
// its thread, the run waiting_input, and the answer through Engine.Answer
// from any surface, judged by the same authority. What differs is that
// the tool call is still in flight on this replica, so the run keeps its
// owner (the heartbeat keeps its lease), an answer puts it back to
// running rather than queued, and the call's own wait — not the sweeper
// — expires the question when its time is up or the call ends.

const (
	// toolQuestionBase is the first step index of tool questions: far
	// above any flow step or agent call, so neither collides with them.
	// Step idx's questions take toolQuestionBase + idx*toolQuestionSlots
	// onwards.
	toolQuestionBase  = 1 << 24
	toolQuestionSlots = 32
)

// toolQuestion reports whether st is a question a running tool asked.
func toolQuestion(st core.Step) bool { return st.Index >= toolQuestionBase }

// peopleAsker is the PeopleAsker of step idx's dispatch in run x.run:
// what it needs of the run is taken now, so it never reads the
// execution's state from the tool's goroutine.
func (x *execution) peopleAsker(idx int) llm.PeopleAsker {
	e, runID := x.e, x.run.ID
	return func(ctx context.Context, intro string, ask llm.Ask) (llm.PeopleAnswer, error) {
		return e.askPeople(ctx, runID, idx, intro, ask)
	}
}

// askPeople puts ask to the people of run runID, whose step idx is in
// flight here, and waits for the answer (see above).
func (e *Engine) askPeople(ctx context.Context, runID string, idx int, intro string, ask llm.Ask) (llm.PeopleAnswer, error) {
	ask, err := llm.ParseAsk(string(mustJSON(ask)))
	if err != nil {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: tool question: %w", err)
	}
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: tool question of %s: %w", runID, err)
	}
	if run.Status != core.RunRunning {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: run %s is %s, not running: it cannot wait for a question", runID, run.Status)
	}
	// Wait only when someone can answer: an Agent API session whose event
	// stream nobody holds declines at once, as its approvals do.
	if att := e.opts.AgentAttendance; run.Thread.Channel == core.AgentSessionChannel && att != nil && !att.Attended(run.Thread) {
		return llm.PeopleAnswer{Why: "nobody holds the app's event stream to answer it"}, nil
	}
	first := toolQuestionBase + idx*toolQuestionSlots
	qidx := first
	for _, st := range run.Steps {
		if st.Index >= first && st.Index < first+toolQuestionSlots {
			qidx = max(qidx, st.Index+1)
		}
	}
	if qidx >= first+toolQuestionSlots {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: step %d of run %s asked %d questions already", idx, runID, toolQuestionSlots)
	}
	now := e.now()
	expires := now.Add(e.opts.ApprovalTTL)
	if dl, ok := ctx.Deadline(); ok && dl.Before(expires) {
		expires = dl
	}
	msg := e.reply(run, toolQuestionText(intro, ask, run, qidx, e.opts.PublicURL, expires))
	var args map[string]any
	_ = json.Unmarshal(mustJSON(ask), &args)
	st := core.Step{Index: qidx, Tool: llm.AskUserTool, Status: StepWaitingInput, Args: args, StartedAt: &now, Output: msg.ID}
	err = e.store.RunCheckpoint(ctx, core.Checkpoint{
		RunID: runID, Owner: e.opts.Owner, Now: now, ExpectStatus: []core.RunStatus{core.RunRunning},
		Status: core.RunWaitingInput, Step: &st, Outbox: e.toThread(run.Thread, msg),
		Events: []core.RunEvent{e.event(runID, core.EventQuestionRequested, map[string]any{
			"action_id": askActionID(qidx), "questions": ask.Questions, "expires_at": expires, "asked_by": intro,
			"session_id": run.Thread.String(), "request_id": askActionID(qidx),
		})},
	})
	if err != nil {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: tool question of %s: %w", runID, err)
	}
	e.log.InfoContext(ctx, "tool question", "run", runID, "step", idx, "action_id", askActionID(qidx), "asked_by", intro)
	got, done, err := e.awaitToolAnswer(ctx, runID, qidx, ask, expires)
	if done || err != nil {
		return got, err
	}
	return e.expireToolQuestion(ctx, run, st, ask, expires)
}

// awaitToolAnswer waits until question qidx of runID is answered or
// closed (done), or until expires or ctx ends (not done).
func (e *Engine) awaitToolAnswer(ctx context.Context, runID string, qidx int, ask llm.Ask, expires time.Time) (llm.PeopleAnswer, bool, error) {
	wake, unsubscribe := e.store.Subscribe(core.TopicEvents)
	defer unsubscribe()
	poll := time.NewTicker(e.opts.PollInterval)
	defer poll.Stop()
	deadline := time.NewTimer(max(0, expires.Sub(e.now())))
	defer deadline.Stop()
	for {
		got, done, err := e.toolAnswer(ctx, runID, qidx, ask)
		if done || err != nil || !e.now().Before(expires) {
			return got, done, err
		}
		select {
		case <-ctx.Done():
			return llm.PeopleAnswer{}, false, nil
		case <-deadline.C:
			return llm.PeopleAnswer{}, false, nil
		case <-wake:
		case <-poll.C:
		}
	}
}

// toolAnswer reads what became of question qidx: answered, closed, or
// still waiting (not done).
func (e *Engine) toolAnswer(ctx context.Context, runID string, qidx int, ask llm.Ask) (llm.PeopleAnswer, bool, error) {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		if ctx.Err() != nil {
			return llm.PeopleAnswer{}, false, nil
		}
		return llm.PeopleAnswer{}, false, fmt.Errorf("engine: tool question of %s: %w", runID, err)
	}
	i := slices.IndexFunc(run.Steps, func(s core.Step) bool { return s.Index == qidx })
	switch {
	case i >= 0 && run.Steps[i].Status == core.StepSucceeded:
		var an agentrun.Answered
		if err := json.Unmarshal([]byte(run.Steps[i].Output), &an); err != nil {
			return llm.PeopleAnswer{}, true, fmt.Errorf("engine: answer of %s: %w", askActionID(qidx), err)
		}
		reply, err := ask.ParseReply(an.Answer)
		if err != nil {
			return llm.PeopleAnswer{}, true, fmt.Errorf("engine: stored answer of %s: %w", askActionID(qidx), err)
		}
		return llm.PeopleAnswer{Answered: true, Reply: reply, By: an.By}, true, nil
	case i >= 0 && run.Steps[i].Status == core.StepFailed:
		return llm.PeopleAnswer{Why: cmp.Or(run.Steps[i].Error, "the question closed unanswered")}, true, nil
	case run.Status.Final():
		return llm.PeopleAnswer{Cancelled: true, Why: "the run is " + string(run.Status)}, true, nil
	}
	return llm.PeopleAnswer{}, false, nil
}

// expireToolQuestion closes question st unanswered and puts the run back
// to running, in one guarded checkpoint: an answer that came first wins.
func (e *Engine) expireToolQuestion(ctx context.Context, run *core.Run, st core.Step, ask llm.Ask, expires time.Time) (llm.PeopleAnswer, error) {
	// The call may have ended (ctx done); the question still closes.
	cctx := context.WithoutCancel(ctx)
	now := e.now()
	why := whyQuestionExpired
	if now.Before(expires) {
		why = "the tool call ended before anyone answered"
	}
	next := st
	next.Status, next.Error, next.FinishedAt = core.StepFailed, why, &now
	err := e.store.RunCheckpoint(cctx, core.Checkpoint{
		RunID: run.ID, Owner: e.opts.Owner, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunRunning,
		Step: &next, Outbox: e.toThread(run.Thread, e.questionUpdate(run, st.Output, expiredText(asker(run, st), ask, now))),
		Events: []core.RunEvent{e.event(run.ID, core.EventQuestionAnswered, map[string]any{"action_id": askActionID(st.Index), "expired": true})},
	})
	if errors.Is(err, core.ErrConflict) {
		// Answered (or the run ended) meanwhile.
		got, done, gerr := e.toolAnswer(cctx, run.ID, st.Index, ask)
		if gerr != nil || done {
			return got, gerr
		}
	}
	if err != nil {
		return llm.PeopleAnswer{}, fmt.Errorf("engine: expire tool question of %s: %w", run.ID, err)
	}
	return llm.PeopleAnswer{Why: why}, nil
}

// toolQuestionText is the question message: who asks (intro) in place of
// "the agent", then the questions as ask_user's read.
func toolQuestionText(intro string, ask llm.Ask, run *core.Run, idx int, publicURL string, expires time.Time) string {
	body := questionText(ask, run, idx, publicURL, expires)
	if _, rest, ok := strings.Cut(body, "\n"); ok {
		body = rest
	}
	return "❓ " + markdown.Escape(core.OneLine(intro)) + "\n" + body
}

// askerGone reports whether run r waits on a tool's question whose call
// is gone: a run waiting_input keeps an owner only while a tool call of it
// waits in flight for an answer, and that owner's heartbeat renews its
// lease; a lapsed lease means the replica died (as for a running run a
// replica takes over), and the call's connection to its server with it,
// so no answer can ever reach the call. This replica is alive: a run it
// owns is never one whose asker is gone.
func (e *Engine) askerGone(r *core.Run, now time.Time) bool {
	return r.Status == core.RunWaitingInput && r.Owner != "" && r.Owner != e.opts.Owner && !r.LeaseUntil.IsZero() && now.After(r.LeaseUntil)
}

// Why a tool question closed unanswered, as its step's error says.
const (
	whyQuestionExpired = "question expired"
	whyAskerGone       = "the tool call that asked is gone: the replica running it stopped"
)

// lapsedToolQuestion is the sweeper's checkpoint for tool question st of
// run, past its expiry or whose asker is gone (askerGone): a live call's
// wait ends its question first, so only a question whose replica died gets
// here. The question closes unanswered (its message says why) and the run
// goes back to running, where the lease its owner no longer renews lets a
// live replica recover the step like any call cut by a crash: an
// idempotent tool is called again with the same key, any other is
// interrupted — its outcome unknown (docs/mcp-servers.md).
func (e *Engine) lapsedToolQuestion(run *core.Run, st core.Step, now time.Time, gone bool) core.Checkpoint {
	why := whyQuestionExpired
	if gone {
		why = whyAskerGone
	}
	next := st
	next.Status, next.Error, next.FinishedAt = core.StepFailed, why, &now
	c := core.Checkpoint{RunID: run.ID, Now: now, ExpectStatus: []core.RunStatus{core.RunWaitingInput}, Status: core.RunRunning, Step: &next,
		Events: []core.RunEvent{e.event(run.ID, core.EventQuestionAnswered, map[string]any{"action_id": askActionID(st.Index), "expired": !gone, "why": why})}}
	if ask, err := llm.ParseAsk(string(mustJSON(st.Args))); err == nil && st.Output != "" {
		text := expiredText(asker(run, st), ask, now)
		if gone {
			text = askedText(asker(run, st), ask) + "⚠️ Closed at " + now.UTC().Format("2006-01-02 15:04 UTC") +
				" with no answer: the replica running the tool call that asked stopped, so no answer can reach it."
		}
		c.Outbox = e.toThread(run.Thread, e.questionUpdate(run, st.Output, text))
	}
	return c
}
