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
	model := b.Model
	if model == "" {
		model = ag.agents[sess.Agent].Model
	}
	ag.runTurn(w, r, sess, run.ID, model, func(ctx context.Context) (string, error) {
		return run.ID, ag.o.Engine.AgentAnswer(ctx, AgentAnswer{Session: sess, RunID: run.ID, RequestID: requestID, Actor: actorFrom(ctx),
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
	var em *sseEmitter
	if acceptsEventStream(r) {
		if em, err = newSSEEmitter(w); err != nil {
			ag.s.fail(w, r, err)
			return
		}
	}
	queued := func(pos int) {
		d := map[string]any{"position": pos, "sessionId": sess.ID}
		if turnID != "" {
			d["turnId"] = turnID
		}
		_ = em.send(core.EventRunQueued, d)
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
	if !em.isStarted() {
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
func (ag *agentServer) finish(w http.ResponseWriter, r *http.Request, em *sseEmitter, res *TurnResult) {
	if em != nil {
		em.send(core.EventTurnFinished, res)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// failTurn answers an error from starting or continuing a turn: as an HTTP
// error while nothing was streamed, else as turn.finished with status error.
func (ag *agentServer) failTurn(w http.ResponseWriter, r *http.Request, em *sseEmitter, sess *core.AgentSession, turnID string, err error) {
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
	if em == nil || !em.started {
		ag.s.fail(w, r, err)
		return
	}
	he := ag.s.classify(err)
	if he.status >= 500 {
		ag.s.log.ErrorContext(r.Context(), "api: agent turn failed", "turn", turnID, "err", err)
	}
	body := he.body
	em.send(core.EventTurnFinished, &TurnResult{SessionID: sess.ID, TurnID: turnID, Status: TurnError, Error: &body})
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

// maxTurnEventPages bounds one read of a turn's events (100 000 events).
const maxTurnEventPages = 1000

// turnState accumulates what a turn's events say about its result.
type turnState struct {
	model string
	// turnStarted is set once turn.started went out: a stream says it
	// once, before any text.delta, however often the engine resumed the
	// run (each claim records one).
	turnStarted bool
	texts       []string
	question    *PendingQuestion
	errBody     *ErrorBody
	finished    bool
	// calls are the tool call ids of the model's turn not yet started,
	// by tool, in order, for a tool.started that names the tool only.
	calls map[string][]string
	// started are the calls tool.started was sent for: their end is the
	// engine's tool.finished; a call that never started (denied, refused)
	// ends with its result message instead.
	started map[string]bool
}

// startTurn sends turn.started unless the stream already said it; model
// is the engine's, else the one the request named.
func (st *turnState) startTurn(em *sseEmitter, model string) error {
	if st.turnStarted {
		return nil
	}
	st.turnStarted = true
	return em.send(core.EventTurnStarted, map[string]string{"model": firstOf(model, st.model)})
}

// follow streams turnID's events after `after` (to em when not nil) until
// the turn ends or stops at a question, and returns its result.
func (ag *agentServer) follow(ctx context.Context, em *sseEmitter, sess *core.AgentSession, turnID, model string, after int64, deltas <-chan agent.Delta) (*TurnResult, error) {
	wake, cancel := ag.s.subscribeRun(turnID)
	defer cancel()
	poll := time.NewTicker(ag.s.o.PollInterval)
	defer poll.Stop()
	ping := time.NewTicker(ag.s.o.PingInterval)
	defer ping.Stop()
	st := turnState{model: model}
	for {
		// Status first: a final status commits with its last events, so
		// the read that follows holds them all.
		run, err := ag.s.o.Store.RunGet(ctx, turnID)
		if err != nil {
			return nil, fmt.Errorf("api: turn %s: %w", turnID, err)
		}
		if err := ag.readEvents(ctx, em, sess, turnID, &after, &st); err != nil {
			return nil, err
		}
		stopped := run.Status.Final() || (st.question != nil && run.Status == core.RunWaitingInput)
		if stopped || st.finished || st.question != nil {
			if !stopped {
				// turn.finished and a question commit with the status
				// they lead to; re-read it.
				if run, err = ag.s.o.Store.RunGet(ctx, turnID); err != nil {
					return nil, fmt.Errorf("api: turn %s: %w", turnID, err)
				}
			}
			if run.Status.Final() || run.Status == core.RunWaitingInput {
				return resultOf(sess, run, &st), nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case d, ok := <-deltas:
			if !ok {
				deltas = nil
				continue
			}
			data := map[string]any{"text": d.Text}
			if d.Restart {
				data["restart"] = true // the text streamed so far is void
			}
			// The model streams before its turn's stored turn.started
			// reaches this replica's read: say it first.
			if err := st.startTurn(em, ""); err != nil {
				return nil, err
			}
			if err := em.send(core.EventTextDelta, data); err != nil {
				return nil, err
			}
			continue
		case <-wake:
		case <-poll.C:
		case <-ping.C:
			if err := em.ping(); err != nil {
				return nil, err
			}
		}
	}
}

// readEvents sends every stored event of turnID after *after, translated
// to the Agent API's shapes, and folds them into st.
func (ag *agentServer) readEvents(ctx context.Context, em *sseEmitter, sess *core.AgentSession, turnID string, after *int64, st *turnState) error {
	for range maxTurnEventPages {
		evs, err := ag.s.o.Store.RunEventList(ctx, turnID, *after, eventPage)
		if err != nil {
			return fmt.Errorf("api: turn %s events: %w", turnID, err)
		}
		for _, ev := range evs {
			if ev.Seq <= *after {
				continue
			}
			*after = ev.Seq
			if err := ag.translate(ctx, em, sess, ev, st); err != nil {
				return err
			}
		}
		if len(evs) < eventPage {
			return nil
		}
	}
	return nil
}

// eventData is the union of the keys the engine's stored events carry
// (either spelling), read leniently: a missing key is empty.
type eventData struct {
	Model       string          `json:"model"`
	Text        string          `json:"text"`
	Tool        string          `json:"tool"`
	ToolName    string          `json:"toolName"`
	ToolCallID  string          `json:"tool_call_id"`
	ToolCallID2 string          `json:"toolCallId"`
	OK          *bool           `json:"ok"`
	ApprovalID  string          `json:"approval_id"`
	Args        map[string]any  `json:"args"`
	Reason      *string         `json:"reason"`
	ActionID    string          `json:"action_id"`
	RequestID   string          `json:"requestId"`
	Questions   json.RawMessage `json:"questions"`
	Status      string          `json:"status"`
	ErrorCode   string          `json:"error_code"`
	Error       string          `json:"error"`
	Action      string          `json:"action"`
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// translate maps one stored run event to the Agent API's events (if any)
// and sends them. Stored events this API has no name for are not
// forwarded.
func (ag *agentServer) translate(ctx context.Context, em *sseEmitter, sess *core.AgentSession, ev core.RunEvent, st *turnState) error {
	if ev.Type == core.EventAgentMessage {
		return ag.translateMessage(em, ev, st)
	}
	var d eventData
	if len(ev.Data) > 0 {
		_ = json.Unmarshal(ev.Data, &d) // lenient: an odd shape sends empty fields
	}
	switch ev.Type {
	case core.EventTurnStarted:
		return st.startTurn(em, d.Model)
	case core.EventTextDelta:
		if err := st.startTurn(em, ""); err != nil {
			return err
		}
		return em.send(core.EventTextDelta, map[string]string{"text": d.Text})
	case core.EventMessageCommitted:
		// The run's closing message repeats the model's last text; send
		// only what is new (an error message, a flow's reply).
		if d.Text == "" || (len(st.texts) > 0 && st.texts[len(st.texts)-1] == d.Text) {
			return nil
		}
		st.texts = append(st.texts, d.Text)
		return em.send(core.EventMessageCommitted, map[string]string{"text": d.Text})
	case core.EventToolStarted:
		tool := firstOf(d.ToolName, d.Tool)
		id := firstOf(d.ToolCallID2, d.ToolCallID)
		if q := st.calls[tool]; id == "" && len(q) > 0 {
			id = q[0]
		}
		if q := st.calls[tool]; len(q) > 0 && q[0] == id {
			st.calls[tool] = q[1:]
		}
		if st.started == nil {
			st.started = map[string]bool{}
		}
		st.started[id] = true
		return em.send(core.EventToolStarted, map[string]string{"toolName": tool, "toolCallId": id})
	case core.EventToolFinished:
		// Agent runs report a call's end with its result message (below),
		// which every outcome has; the dispatch record is forwarded only
		// when it says which call it was.
		id := firstOf(d.ToolCallID2, d.ToolCallID)
		if id == "" {
			return nil
		}
		return em.send(core.EventToolFinished, map[string]any{"toolCallId": id, "ok": d.OK != nil && *d.OK})
	case core.EventPermissionRequested:
		return ag.permission(ctx, em, sess, d)
	case core.EventPermissionDecided:
		return em.send(core.EventPermissionDecided, map[string]string{"sessionId": sess.ID, "requestId": d.ApprovalID, "status": firstOf(d.Status, d.Action)})
	case core.EventQuestionRequested:
		qs := d.Questions
		if len(qs) == 0 {
			qs = json.RawMessage("[]")
		}
		st.question = &PendingQuestion{SessionID: sess.ID, RequestID: firstOf(d.RequestID, d.ActionID), Questions: qs}
		return em.send(core.EventQuestionRequested, st.question)
	case core.EventTurnFinished:
		st.finished = true
		if d.ErrorCode != "" || d.Error != "" {
			st.errBody = &ErrorBody{Code: d.ErrorCode, Message: d.Error}
		}
	}
	return nil
}

// translateMessage reads one stored conversation message: the model's
// calls are remembered for tool.started, and the result of a call that
// never started (denied, refused, nobody could approve) is its
// tool.finished. The model's text arrives as message.committed.
func (ag *agentServer) translateMessage(em *sseEmitter, ev core.RunEvent, st *turnState) error {
	var m agent.Message
	if err := json.Unmarshal(ev.Data, &m); err != nil {
		return nil // unreadable: the engine logs it; nothing to show
	}
	switch m.Role {
	case agent.RoleAssistant:
		for _, c := range m.Calls {
			if st.calls == nil {
				st.calls = map[string][]string{}
			}
			st.calls[c.Tool] = append(st.calls[c.Tool], c.ID)
		}
	case agent.RoleTool:
		if st.started[m.CallID] || m.Tool == agent.AskUserTool {
			return nil
		}
		if q := st.calls[m.Tool]; len(q) > 0 && q[0] == m.CallID {
			st.calls[m.Tool] = q[1:]
		}
		return em.send(core.EventToolFinished, map[string]any{"toolCallId": m.CallID, "ok": !m.IsError})
	}
	return nil
}

// permission sends permission.requested for one approval, from the event's
// own fields when it has them, else from the stored approval.
func (ag *agentServer) permission(ctx context.Context, em *sseEmitter, sess *core.AgentSession, d eventData) error {
	if d.ApprovalID == "" {
		return nil
	}
	tool, input, reason := d.Tool, d.Args, ""
	if d.Reason != nil {
		reason = *d.Reason
	}
	if tool == "" || input == nil || d.Reason == nil {
		a, err := ag.s.o.Store.ApprovalGet(ctx, d.ApprovalID)
		if err != nil {
			return fmt.Errorf("api: permission %s: %w", d.ApprovalID, err)
		}
		tool, input = firstOf(tool, a.Tool), a.ProposedArgs
		if d.Reason == nil {
			reason = a.Reason
		}
	}
	if input == nil {
		input = map[string]any{}
	}
	return em.send(core.EventPermissionRequested, map[string]any{"sessionId": sess.ID, "requestId": d.ApprovalID, "toolName": tool,
		"reason": reason, "toolInput": input})
}

// turnResult computes the result of run (a turn of sess) from its status
// and its events after `after`.
func (ag *agentServer) turnResult(ctx context.Context, sess *core.AgentSession, run *core.Run, after int64) (*TurnResult, error) {
	var st turnState
	if err := ag.readEvents(ctx, nil, sess, run.ID, &after, &st); err != nil {
		return nil, err
	}
	return resultOf(sess, run, &st), nil
}

// outcomeUnknownCodes are run error codes that mean a tool may have run
// without its outcome being recorded.
var outcomeUnknownCodes = map[string]bool{"interrupted": true, "RUN_INTERRUPTED": true, "outcome_unknown": true, CodeOutcomeUnknown: true}

// resultOf maps a run's status and its events to the Agent API's result.
func resultOf(sess *core.AgentSession, run *core.Run, st *turnState) *TurnResult {
	res := &TurnResult{SessionID: sess.ID, TurnID: run.ID, Text: strings.Join(st.texts, "\n\n")}
	switch run.Status {
	case core.RunQueued:
		res.Status = TurnQueued
	case core.RunRunning, core.RunWaitingApproval:
		res.Status = TurnRunning
	case core.RunWaitingInput:
		res.Status = TurnFinished
		res.PendingQuestion = st.question
	case core.RunSucceeded:
		res.Status = TurnFinished
	case core.RunCancelled:
		res.Status = TurnAborted
		res.Error = &ErrorBody{Code: "cancelled", Message: firstOf(run.ErrorMessage, "the turn was cancelled")}
	case core.RunInterrupted:
		res.Status = TurnError
		res.Error = outcomeUnknown(run)
	default: // failed, rejected
		res.Status = TurnError
		code, msg := run.ErrorCode, run.ErrorMessage
		if st.errBody != nil {
			code, msg = firstOf(code, st.errBody.Code), firstOf(msg, st.errBody.Message)
		}
		if outcomeUnknownCodes[code] {
			res.Error = outcomeUnknown(run)
			break
		}
		res.Error = &ErrorBody{Code: firstOf(code, "failed"), Message: firstOf(msg, "the turn failed")}
	}
	return res
}

func outcomeUnknown(run *core.Run) *ErrorBody {
	msg := "the turn was interrupted while a tool may have been running; its outcome is unknown. " +
		"Read the session (GET /api/v1/agent/sessions/{id}) before sending the turn again."
	if run.ErrorMessage != "" {
		msg = run.ErrorMessage + ": " + msg
	}
	return &ErrorBody{Code: CodeOutcomeUnknown, Message: msg}
}
