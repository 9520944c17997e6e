package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/sse"
)

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
func (st *turnState) startTurn(em *sse.Stream, model string) error {
	if st.turnStarted {
		return nil
	}
	st.turnStarted = true
	return em.Send(core.EventTurnStarted, map[string]string{"model": firstOf(model, st.model)})
}

// follow streams turnID's events after `after` (to em when not nil) until
// the turn ends or stops at a question, and returns its result.
func (ag *agentServer) follow(ctx context.Context, em *sse.Stream, sess *core.AgentSession, turnID, model string, after int64, deltas <-chan agent.Delta) (*TurnResult, error) {
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
			if err := em.Send(core.EventTextDelta, data); err != nil {
				return nil, err
			}
			continue
		case <-wake:
		case <-poll.C:
		case <-ping.C:
			if err := em.Ping(); err != nil {
				return nil, err
			}
		}
	}
}

// readEvents sends every stored event of turnID after *after, translated
// to the Agent API's shapes, and folds them into st.
func (ag *agentServer) readEvents(ctx context.Context, em *sse.Stream, sess *core.AgentSession, turnID string, after *int64, st *turnState) error {
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
	// SessionID names a sub-agent's session on the events its ancestors'
	// streams show (the child's approvals and questions).
	SessionID string `json:"sessionId"`
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
func (ag *agentServer) translate(ctx context.Context, em *sse.Stream, sess *core.AgentSession, ev core.RunEvent, st *turnState) error {
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
		return em.Send(core.EventTextDelta, map[string]string{"text": d.Text})
	case core.EventMessageCommitted:
		// The run's closing message repeats the model's last text; send
		// only what is new (an error message, a flow's reply).
		if d.Text == "" || (len(st.texts) > 0 && st.texts[len(st.texts)-1] == d.Text) {
			return nil
		}
		st.texts = append(st.texts, d.Text)
		return em.Send(core.EventMessageCommitted, map[string]string{"text": d.Text})
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
		return em.Send(core.EventToolStarted, map[string]string{"toolName": tool, "toolCallId": id})
	case core.EventToolFinished:
		// Agent runs report a call's end with its result message (below),
		// which every outcome has; the dispatch record is forwarded only
		// when it says which call it was.
		id := firstOf(d.ToolCallID2, d.ToolCallID)
		if id == "" {
			return nil
		}
		return em.Send(core.EventToolFinished, map[string]any{"toolCallId": id, "ok": d.OK != nil && *d.OK})
	case core.EventPermissionRequested:
		return ag.permission(ctx, em, sess, d)
	case core.EventPermissionDecided:
		return em.Send(core.EventPermissionDecided, map[string]string{"sessionId": firstOf(d.SessionID, sess.ID), "requestId": d.ApprovalID, "status": firstOf(d.Status, d.Action)})
	case core.EventQuestionRequested:
		qs := d.Questions
		if len(qs) == 0 {
			qs = json.RawMessage("[]")
		}
		st.question = &PendingQuestion{SessionID: firstOf(d.SessionID, sess.ID), RequestID: firstOf(d.RequestID, d.ActionID), Questions: qs}
		return em.Send(core.EventQuestionRequested, st.question)
	case core.EventQuestionAnswered:
		// A question answered is no longer pending (the turn may go on
		// to wait on a sub-agent, or ask another).
		if q := st.question; q != nil && q.RequestID == d.ActionID && q.SessionID == firstOf(d.SessionID, sess.ID) {
			st.question = nil
		}
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
func (ag *agentServer) translateMessage(em *sse.Stream, ev core.RunEvent, st *turnState) error {
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
		return em.Send(core.EventToolFinished, map[string]any{"toolCallId": m.CallID, "ok": !m.IsError})
	}
	return nil
}

// permission sends permission.requested for one approval, from the event's
// own fields when it has them, else from the stored approval.
func (ag *agentServer) permission(ctx context.Context, em *sse.Stream, sess *core.AgentSession, d eventData) error {
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
	return em.Send(core.EventPermissionRequested, map[string]any{"sessionId": firstOf(d.SessionID, sess.ID), "requestId": d.ApprovalID, "toolName": tool,
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
		if st.question == nil {
			res.Status = TurnRunning // waiting on a sub-agent's turn
		}
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
