package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/sse"
	"github.com/opsgate/opsgate/core/turnlimit"
)

// A turn's status as the Agent API reports it. finished, error and aborted
// end a turn; queued and running are seen only when reading a turn
// (GET /api/v1/agent/turns/{id}) that is still going.
const (
	TurnFinished = "finished"
	TurnError    = "error"
	TurnAborted  = "aborted"
	TurnQueued   = "queued"
	TurnRunning  = "running"
)

// The Agent API's event names are the run events' (core.Event*, docs/agent-api.md "Events"):
// a turn's stream is its run's, translated. Clients ignore names they do not
// know; more may be added.

// TurnResult is a turn's outcome: the body of POST /api/v1/agent/runs
// without Accept: text/event-stream, and the data of turn.finished.
type TurnResult struct {
	SessionID       string           `json:"sessionId"`
	TurnID          string           `json:"turnId"`
	Status          string           `json:"status"`
	Text            string           `json:"text"`
	Error           *ErrorBody       `json:"error"`
	PendingQuestion *PendingQuestion `json:"pendingQuestion"`
}

// PendingQuestion is the question a turn stopped at: answer it with
// POST /api/v1/agent/answer (the same data as question.requested).
type PendingQuestion struct {
	SessionID string          `json:"sessionId"`
	RequestID string          `json:"requestId"`
	Questions json.RawMessage `json:"questions"`
}

type runBody struct {
	Text         string `json:"text"`
	SessionID    string `json:"sessionId"`
	OldSessionID string `json:"session_id"`
	Agent        string `json:"agent"`
	Model        string `json:"model"`
}

type answerBody struct {
	ids
	Answers json.RawMessage `json:"answers"`
	// Model switches the model for the rest of the turn, as a run's
	// model does for its turn.
	Model string `json:"model"`
}

// postRun starts a turn: in an existing session of the caller's, or a new
// one. It waits its turn in the token's queue (run.queued with the
// position), starts, and follows the turn to its end.
func (ag *agentServer) postRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var b runBody
	if err := decodeBody(r, &b); err != nil {
		ag.s.fail(w, r, err)
		return
	}
	switch {
	case strings.TrimSpace(b.Text) == "":
		ag.s.fail(w, r, invalid("text", "text is required"))
		return
	case len(b.Text) > MaxMessageText:
		e := errf(http.StatusRequestEntityTooLarge, "too_large", "text is %d bytes; the limit is %d", len(b.Text), MaxMessageText)
		e.body.Field = "text"
		ag.s.fail(w, r, e)
		return
	}
	if b.Model != "" {
		if _, ok := ag.models[b.Model]; !ok {
			ag.s.fail(w, r, invalid("model", "unknown model %q; GET /api/v1/agent/models lists them", b.Model))
			return
		}
	}
	var sess *core.AgentSession
	var err error
	if sid := firstOf(b.SessionID, b.OldSessionID); sid != "" {
		if sess, err = ag.ownSession(ctx, sid); err == nil && b.Agent != "" && b.Agent != sess.Agent {
			err = invalid("agent", "session %s runs agent %q; a session's agent is fixed (start a new session for %q)", sess.ID, sess.Agent, b.Agent)
		}
	} else {
		sess, err = ag.newSession(ctx, b.Agent)
	}
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	eventID, err := uuid.NewV7()
	if err != nil {
		ag.s.fail(w, r, fmt.Errorf("api: new turn id: %w", err))
		return
	}
	model := b.Model
	if model == "" {
		model = ag.agents[sess.Agent].Model
	}
	ag.runTurn(w, r, sess, "", model, func(ctx context.Context) (string, error) {
		return ag.o.Engine.AgentTurnStart(ctx, AgentTurn{Session: sess, Actor: actorFrom(ctx), Text: b.Text, Model: b.Model,
			EventID: "api-" + eventID.String()})
	})
}

// answer answers the question a turn stopped at and follows the continued
// turn like postRun does.
func (ag *agentServer) answer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var b answerBody
	if err := decodeBody(r, &b); err != nil {
		ag.s.fail(w, r, err)
		return
	}
	sess, err := ag.ownSession(ctx, b.session())
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	requestID := b.request()
	switch {
	case requestID == "" || len(requestID) > maxIDLen:
		ag.s.fail(w, r, invalid("requestId", "requestId is required"))
		return
	case len(b.Answers) == 0 || string(b.Answers) == "null":
		ag.s.fail(w, r, invalid("answers", "answers is required: [{\"questionId\",\"isSkipped\",\"answer\"}]"))
		return
	}
	if b.Model != "" {
		if _, ok := ag.models[b.Model]; !ok {
			ag.s.fail(w, r, invalid("model", "unknown model %q; GET /api/v1/agent/models lists them", b.Model))
			return
		}
	}
	runs, _, err := ag.s.o.Store.RunList(ctx, core.RunListParams{Thread: sess.Thread.String(), Status: core.RunWaitingInput, Limit: 1})
	if err != nil {
		ag.s.fail(w, r, fmt.Errorf("api: answer: %w", err))
		return
	}
	if len(runs) == 0 {
		ag.s.fail(w, r, errf(http.StatusConflict, "no_pending_question", "session %s has no question waiting for an answer", sess.ID))
		return
	}
	run := runs[0]
	// A sub-agent's question: the answer goes to the sub-agent's turn and
	// the stream follows the root session's turn that waits on it.
	follow, followID := sess, run.ID
	if _, sub := core.SubSessionRoot(sess.Thread); sub {
		if b.Model != "" {
			ag.s.fail(w, r, invalid("model", "a sub-agent keeps its own model: answer its question without one"))
			return
		}
		if follow, followID, err = ag.rootTurn(ctx, sess); err != nil {
			ag.s.fail(w, r, err)
			return
		}
	}
	model := b.Model
	if model == "" {
		model = ag.agents[follow.Agent].Model
	}
	ag.runTurn(w, r, follow, followID, model, func(ctx context.Context) (string, error) {
		return followID, ag.o.Engine.AgentAnswer(ctx, AgentAnswer{Session: sess, RunID: run.ID, RequestID: requestID, Actor: actorFrom(ctx),
			Answers: b.Answers, Model: b.Model})
	})
}

// runTurn takes a place in the token's queue for sess, waits for a slot,
// calls begin (which starts a turn, or continues turnID, in the engine and
// returns its id) and follows the turn until it ends or stops at a
// question, streaming or not as the caller asked. model is what
// turn.started names.
func (ag *agentServer) runTurn(w http.ResponseWriter, r *http.Request, sess *core.AgentSession, turnID, model string, begin func(context.Context) (string, error)) {
	ctx := r.Context()
	tok := tokenFrom(ctx)
	lim := ag.limits.For(tok.actor.Name, tok.agentConcurrency, tok.agentConcurrency*AgentQueueFactor)
	ticket, err := lim.Enter(sess.ID)
	switch {
	case errors.Is(err, turnlimit.ErrQueueFull):
		w.Header().Set("Retry-After", "1")
		ag.s.fail(w, r, errf(http.StatusTooManyRequests, "queue_full",
			"this token runs %d turns and queues %d already; retry after a turn ends", tok.agentConcurrency, tok.agentConcurrency*AgentQueueFactor))
		return
	case errors.Is(err, turnlimit.ErrSessionBusy):
		ag.s.fail(w, r, errf(http.StatusConflict, "session_busy", "session %s has a turn queued or running; one turn per session at a time", sess.ID))
		return
	case err != nil:
		ag.s.fail(w, r, err)
		return
	}
	// The slot is freed before the last word goes out: a client that
	// sends the session's next turn the moment it reads turn.finished
	// must not find the session still busy.
	released := false
	free := func() {
		if !released {
			released = true
			ticket.Release()
		}
	}
	defer free()
	var em *sse.Stream
	if acceptsEventStream(r) {
		if em, err = newStream(w); err != nil {
			ag.s.fail(w, r, err)
			return
		}
	}
	queued := func(pos int) {
		d := map[string]any{"position": pos, "sessionId": sess.ID}
		if turnID != "" {
			d["turnId"] = turnID
		}
		_ = em.Send(core.EventRunQueued, d)
	}
	if pos := ticket.Position(); pos > 0 {
		queued(pos)
		// A caller that leaves while queued started nothing: its turn
		// never reaches the engine.
		if err := ticket.Wait(ctx, queued); err != nil {
			return
		}
	}
	// Mark the session attended before the turn starts, so its first
	// approval already waits; a non-streaming caller sees no
	// permission.requested and cannot answer, so its approvals are denied
	// at once.
	release := func() bool { return false }
	if em != nil {
		release = ag.attendance.Hold(ctx, sess.ID)
	}
	after := int64(0)
	if turnID != "" {
		if after, err = ag.lastSeq(ctx, turnID); err != nil {
			release()
			free()
			ag.failTurn(w, r, em, sess, turnID, err)
			return
		}
	}
	id, err := begin(ctx)
	if err != nil {
		release()
		free()
		ag.failTurn(w, r, em, sess, turnID, err)
		return
	}
	turnID = id
	var deltas <-chan agent.Delta
	if ds, ok := ag.o.Engine.(DeltaSource); ok && em != nil {
		ch, cancel := ds.Deltas(turnID)
		defer cancel()
		deltas = ch
	}
	if !em.Started() {
		queued(0) // admitted at once: position 0, sent once the turn exists
	}
	res, err := ag.follow(ctx, em, sess, turnID, model, after, deltas)
	if err != nil {
		last := release()
		// The turn goes on in the engine; its slot stays taken until it
		// ends, so a client cannot exceed its concurrency by hanging up.
		released = true
		go ag.drain(sess, turnID, ticket, last)
		if ctx.Err() == nil {
			ag.s.log.WarnContext(ctx, "api: agent turn", "turn", turnID, "err", err)
			if em == nil {
				ag.s.fail(w, r, err)
			}
		}
		return
	}
	release()
	free()
	ag.finish(w, r, em, res)
}

// finish answers the turn's result: turn.finished on a stream, else the
// result itself.
func (ag *agentServer) finish(w http.ResponseWriter, r *http.Request, em *sse.Stream, res *TurnResult) {
	if em != nil {
		em.Send(core.EventTurnFinished, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// failTurn answers an error from starting or continuing a turn: as an HTTP
// error while nothing was streamed, else as turn.finished with status error.
func (ag *agentServer) failTurn(w http.ResponseWriter, r *http.Request, em *sse.Stream, sess *core.AgentSession, turnID string, err error) {
	switch {
	case errors.Is(err, agent.ErrMalformedAnswer):
		err = errf(http.StatusBadRequest, "malformed_answer", "%v", err)
	case errors.Is(err, agent.ErrInvalidAnswer):
		err = invalid("answers", "%v", err)
	case errors.Is(err, core.ErrConflict):
		err = errf(http.StatusConflict, "no_pending_question", "that question is not waiting for an answer")
	case errors.Is(err, ErrAgentUnsupported):
		err = errf(http.StatusNotImplemented, "not_implemented", "%v", err)
	}
	if em == nil || !em.Started() {
		ag.s.fail(w, r, err)
		return
	}
	he := ag.s.classify(err)
	if he.status >= 500 {
		ag.s.log.ErrorContext(r.Context(), "api: agent turn failed", "turn", turnID, "err", err)
	}
	body := he.body
	em.Send(core.EventTurnFinished, &TurnResult{SessionID: sess.ID, TurnID: turnID, Status: TurnError, Error: &body})
}

// drain waits, detached from the caller who left, for the turn to end,
// then frees its slot. When the caller was the last one attending on this
// replica, an approval the turn waits for is released as a denial once no
// replica holds the session's stream any more (another replica's hold is
// released when its stream closes, or lapses when that replica died).
func (ag *agentServer) drain(sess *core.AgentSession, turnID string, ticket *turnlimit.Ticket, lastAttendant bool) {
	defer ticket.Release()
	ctx := context.Background()
	poll := time.NewTicker(ag.s.o.PollInterval)
	defer poll.Stop()
	wake, cancel := ag.s.subscribeRun(turnID)
	defer cancel()
	for {
		run, err := ag.s.o.Store.RunGet(ctx, turnID)
		if err != nil {
			if !isNotFound(err) {
				ag.s.log.Warn("api: agent turn drain", "turn", turnID, "err", err)
			}
			return
		}
		if run.Status.Final() || run.Status == core.RunWaitingInput {
			return
		}
		if lastAttendant && run.Status == core.RunWaitingApproval && ag.unattended(ctx, sess) {
			if err := ag.o.Engine.AgentRelease(ctx, turnID, "the app's event stream closed while the approval waited"); err != nil {
				ag.s.log.Warn("api: release approvals", "turn", turnID, "err", err)
			}
			lastAttendant = false
		}
		select {
		case <-wake:
		case <-poll.C:
		}
	}
}

// unattended reports whether no replica holds sess's event stream any
// more, so its waiting approvals can be released. A store that cannot say
// leaves them waiting: the next poll asks again.
func (ag *agentServer) unattended(ctx context.Context, sess *core.AgentSession) bool {
	ctx, cancel := context.WithTimeout(ctx, attendanceTimeout)
	defer cancel()
	held, err := ag.attendance.attended(ctx, sess.Thread.Key)
	if err != nil {
		ag.s.log.Warn("api: agent attendance", "session", sess.ID, "err", err)
		return false
	}
	return !held
}

// lastSeq is the newest stored event of run (0 when none or no run yet):
// a continued turn is followed from there.
func (ag *agentServer) lastSeq(ctx context.Context, runID string) (int64, error) {
	var after int64
	for range maxTurnEventPages {
		evs, err := ag.s.o.Store.RunEventList(ctx, runID, after, eventPage)
		if err != nil {
			return 0, fmt.Errorf("api: turn %s events: %w", runID, err)
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].Seq
		}
		if len(evs) < eventPage {
			break
		}
	}
	return after, nil
}
