package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/authority"
)

// Asks over MCP. A waiting run lists its pending actions. interact shows a
// question to the user as a form when the client can (elicitation: on
// 2026-07-28 an input_required result the client retries with the
// answers, whose requestState this server signs; on older versions the
// SDK sends elicitation/create in the session), else returns the action
// for the client to show; answer_ask submits an answer given otherwise.
// A declined or cancelled form keeps the wait. An approval is never
// answerable here: human_confirmation_required, with its card's link.

// stateTTL bounds how long a form may stay open before its answer is
// refused (the client asks again).
const stateTTL = 30 * time.Minute

// elicitKey is the id of the one input request interact makes.
const elicitKey = "answer"

// requestState is what an input_required result carries to its retry,
// signed so a client cannot change it.
type requestState struct {
	V        int    `json:"v"`
	Run      string `json:"run"`
	Action   string `json:"action"`
	Actor    string `json:"actor"`
	Endpoint string `json:"ep"`
	Exp      int64  `json:"exp"`
}

func (s *Server) signState(st requestState) string {
	b, _ := json.Marshal(st)
	m := hmac.New(sha256.New, s.stateK)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

var errBadState = errors.New("the requestState is not one this server issued for this call")

// openState verifies a requestState: the MAC, then the fields.
func (s *Server) openState(raw string, now time.Time) (requestState, error) {
	body, mac, ok := strings.Cut(raw, ".")
	if !ok || len(raw) > 4096 {
		return requestState{}, errBadState
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	sum, err2 := base64.RawURLEncoding.DecodeString(mac)
	if err1 != nil || err2 != nil {
		return requestState{}, errBadState
	}
	m := hmac.New(sha256.New, s.stateK)
	m.Write(b)
	if !hmac.Equal(m.Sum(nil), sum) {
		return requestState{}, errBadState
	}
	var st requestState
	if json.Unmarshal(b, &st) != nil || st.V != 1 {
		return requestState{}, errBadState
	}
	if now.Unix() > st.Exp {
		return requestState{}, errors.New("the form was open too long; call interact again")
	}
	return st, nil
}

// findAction returns the run and its pending action actionID. An approval
// (pending or not) is refused: only people decide approvals.
func (s *Server) findAction(ctx context.Context, x *call) (*runView, *actionView, *toolErr) {
	r, te := s.visibleRun(ctx, x, x.str("runId"))
	if te != nil {
		return nil, nil, te
	}
	v, err := s.runView(ctx, x.c, r)
	if err != nil {
		return nil, nil, s.internalError("action", err)
	}
	id := x.str("actionId")
	for i := range v.PendingActions {
		if a := &v.PendingActions[i]; a.ID == id {
			if a.Kind == "approval" {
				return v, nil, humanRequired(a.Link)
			}
			return v, a, nil
		}
	}
	if a, err := s.o.Store.ApprovalGet(ctx, id); err == nil && a.RunID == r.ID {
		return v, nil, humanRequired(s.link("approvals", a.ID))
	}
	return v, nil, errf("not_found", "run %s has no pending action %q (see its pending_actions)", r.ID, id)
}

func humanRequired(link string) *toolErr {
	return &toolErr{Code: string(core.DecisionHumanRequired), Link: link,
		Message: "this is an approval of a tool call: a person decides it in chat or the web console (" + link + "); an agent never does"}
}

type interaction struct {
	Mode    string      `json:"mode"`
	Outcome string      `json:"outcome"`
	Action  *actionView `json:"action,omitempty"`
}

type interactOut struct {
	Run         *runView    `json:"run"`
	Interaction interaction `json:"interaction"`
}

func (s *Server) interact(ctx context.Context, x *call) (any, *toolErr) {
	p := x.req.Params
	retry := p.RequestState != "" || p.InputResponses != nil
	var st requestState
	if retry {
		var err error
		if st, err = s.openState(p.RequestState, s.o.Now()); err != nil {
			return nil, errf("invalid_request_state", "%v", err)
		}
		if st.Actor != x.c.actor.ID || st.Run != x.str("runId") || st.Action != x.str("actionId") || st.Endpoint != x.ep.path {
			return nil, errf("invalid_request_state", "%v", errBadState)
		}
	}
	v, a, te := s.findAction(ctx, x)
	if te != nil {
		if v != nil && te.Code == string(core.DecisionHumanRequired) {
			return s.offerApproval(ctx, x, v, te, retry)
		}
		return nil, te
	}
	if a.Kind != "question" {
		return interactOut{Run: v, Interaction: interaction{Mode: "none", Outcome: "unsupported", Action: a}}, nil
	}
	// Only someone who may answer is shown a form or asked to answer.
	if _, te := s.authorizedRun(ctx, x, authority.Answer, x.str("runId")); te != nil {
		return nil, te
	}
	ask, err := askOf(a)
	if err != nil {
		return nil, s.internalError("interact", err)
	}
	if retry {
		res, ok := p.InputResponses[elicitKey].(*sdk.ElicitResult)
		if !ok {
			return nil, errf("invalid_input", "the retry carries no %q input response", elicitKey)
		}
		if res.Action != "accept" {
			// The user closed the form: the question keeps waiting.
			outcome := res.Action
			if outcome != "decline" {
				outcome = "cancel"
			}
			return interactOut{Run: v, Interaction: interaction{Mode: "elicitation", Outcome: outcome, Action: a}}, nil
		}
		answer, err := formAnswer(ask, res.Content)
		if err != nil {
			return nil, errf("invalid_answer", "%v", err)
		}
		run, te := s.submit(ctx, x, a, ask, answer)
		if te != nil {
			return nil, te
		}
		return interactOut{Run: run, Interaction: interaction{Mode: "elicitation", Outcome: "accept"}}, nil
	}
	if !canElicit(x.req) {
		return interactOut{Run: v, Interaction: interaction{Mode: "none", Outcome: "unsupported", Action: a}}, nil
	}
	state := s.signState(requestState{V: 1, Run: v.ID, Action: a.ID, Actor: x.c.actor.ID, Endpoint: x.ep.path,
		Exp: s.o.Now().Add(stateTTL).Unix()})
	x.raw = &sdk.CallToolResult{
		InputRequests: sdk.InputRequestMap{elicitKey: &sdk.ElicitParams{Mode: "form", Message: formMessage(v, ask),
			RequestedSchema: formSchema(ask)}},
		RequestState: state,
	}
	return nil, nil
}

// offerApproval answers interact on an approval. An agent never decides
// one; but when the person behind the token could (the authority judges
// their standing now) and the client opens links (URL elicitation), the
// approval's console page is offered to them: they sign in there and
// decide as themselves. The retry only says whether they opened it.
// Anyone else gets human_confirmation_required with the card's link.
func (s *Server) offerApproval(ctx context.Context, x *call, v *runView, refused *toolErr, retry bool) (any, *toolErr) {
	id := x.str("actionId")
	if retry {
		res, _ := x.req.Params.InputResponses[elicitKey].(*sdk.ElicitResult)
		outcome := "cancel"
		if res != nil && (res.Action == "accept" || res.Action == "decline") {
			outcome = res.Action
		}
		if r, err := s.o.Store.RunGet(ctx, v.ID); err == nil {
			if fresh, err := s.runView(ctx, x.c, r); err == nil {
				v = fresh
			}
		}
		return interactOut{Run: v, Interaction: interaction{Mode: "url", Outcome: outcome}}, nil
	}
	a, err := s.o.Store.ApprovalGet(ctx, id)
	if err != nil || a.Status != approvals.StatusPending || !canElicitURL(x.req) || !s.eligibleApprover(ctx, x.c, id) {
		return interactOut{Run: v, Interaction: interaction{Mode: "none", Outcome: "unsupported"}}, refused
	}
	state := s.signState(requestState{V: 1, Run: v.ID, Action: id, Actor: x.c.actor.ID, Endpoint: x.ep.path,
		Exp: s.o.Now().Add(stateTTL).Unix()})
	x.raw = &sdk.CallToolResult{InputRequests: sdk.InputRequestMap{elicitKey: approvalElicit(a, refused.Link)}, RequestState: state}
	return nil, nil
}

// clientCaps are the capabilities the client declared: in the request's
// _meta on 2026-07-28, else at initialize.
func clientCaps(req *sdk.CallToolRequest) *sdk.ClientCapabilities {
	if req == nil {
		return nil
	}
	if req.Params != nil {
		if cc := req.ClientCapabilities(); cc != nil {
			return cc
		}
	}
	if req.Session == nil {
		return nil
	}
	if ip := req.Session.InitializeParams(); ip != nil {
		return ip.Capabilities
	}
	return nil
}

// canElicit reports whether the client said it shows forms.
func canElicit(req *sdk.CallToolRequest) bool {
	cc := clientCaps(req)
	if cc == nil || cc.Elicitation == nil {
		return false
	}
	e := cc.Elicitation
	return e.Form != nil || e.URL == nil
}

// canElicitURL reports whether the client said it opens links (URL mode).
func canElicitURL(req *sdk.CallToolRequest) bool {
	cc := clientCaps(req)
	return cc != nil && cc.Elicitation != nil && cc.Elicitation.URL != nil
}

func askOf(a *actionView) (agent.Ask, error) {
	raw := a.ask.q.Questions
	if len(raw) > 0 && raw[0] == '[' {
		raw = json.RawMessage(`{"questions":` + string(raw) + `}`)
	}
	return agent.ParseAsk(string(raw))
}

func formMessage(v *runView, ask agent.Ask) string {
	if len(ask.Questions) == 1 {
		return fmt.Sprintf("opsgate run %s (%s) asks: %s", v.ID, v.Flow, ask.Questions[0].Text)
	}
	return fmt.Sprintf("opsgate run %s (%s) asks %d questions.", v.ID, v.Flow, len(ask.Questions))
}

// formSchema is the form of an ask: one flat field per question, as
// elicitation allows.
func formSchema(ask agent.Ask) js {
	props := js{}
	var req []any
	for _, q := range ask.Questions {
		var f js
		switch q.Kind {
		case agent.QuestionConfirm:
			f = js{"type": "boolean", "title": q.Text}
		case agent.QuestionChoice:
			f = enum("", q.Choices...)
			delete(f, "description")
			f["title"] = q.Text
		default:
			f = js{"type": "string", "title": q.Text, "maxLength": agent.MaxAnswerText}
		}
		props[q.ID] = f
		if !q.Optional {
			req = append(req, q.ID)
		}
	}
	s := js{"type": "object", "properties": props}
	if len(req) > 0 {
		s["required"] = req
	}
	return s
}

// formAnswer turns a submitted form into the question array.
func formAnswer(ask agent.Ask, content map[string]any) (json.RawMessage, error) {
	out := make([]map[string]any, 0, len(ask.Questions))
	for _, q := range ask.Questions {
		v, ok := content[q.ID]
		if !ok || v == nil || v == "" {
			if q.Optional {
				out = append(out, map[string]any{"questionId": q.ID, "isSkipped": true})
				continue
			}
			return nil, fmt.Errorf("question %q has no answer", q.ID)
		}
		out = append(out, map[string]any{"questionId": q.ID, "isSkipped": false, "answer": v})
	}
	return json.Marshal(out)
}

// submit validates answer against the ask and hands it to the engine.
func (s *Server) submit(ctx context.Context, x *call, a *actionView, ask agent.Ask, answer json.RawMessage) (*runView, *toolErr) {
	// Who may answer is judged before what they answer.
	if _, te := s.authorizedRun(ctx, x, authority.Answer, x.str("runId")); te != nil {
		return nil, te
	}
	if _, err := ask.ParseReply(answer); err != nil {
		code := "invalid_answer"
		if errors.Is(err, agent.ErrMalformedAnswer) {
			code = "malformed_answer"
		}
		return nil, errf(code, "%v", err)
	}
	if err := s.o.Questions.Answer(ctx, x.c.actor, Channel, x.str("runId"), a.ID, answer); err != nil {
		var de *core.DecisionError
		if errors.As(err, &de) {
			return nil, errf(string(de.Code), "%s", de.Message)
		}
		switch {
		case errors.Is(err, agent.ErrMalformedAnswer):
			return nil, errf("malformed_answer", "%v", err)
		case errors.Is(err, agent.ErrInvalidAnswer):
			return nil, errf("invalid_answer", "%v", err)
		case errors.Is(err, core.ErrNotFound):
			return nil, errf("not_found", "the question is no longer pending")
		case errors.Is(err, core.ErrForbidden):
			return nil, errf("not_allowed", "this token's actor may not answer this question")
		}
		return nil, s.internalError("answer", err)
	}
	r, err := s.o.Store.RunGet(ctx, x.str("runId"))
	if err != nil {
		return nil, s.internalError("answer", err)
	}
	v, err := s.runView(ctx, x.c, r)
	if err != nil {
		return nil, s.internalError("answer", err)
	}
	return v, nil
}

func (s *Server) answerAsk(ctx context.Context, x *call) (any, *toolErr) {
	v, a, te := s.findAction(ctx, x)
	if te != nil {
		return nil, te
	}
	if a.Kind != "question" {
		return nil, errf("not_a_question", "action %s is an %s, not a question: %s", a.ID, a.Kind, "claim it with claim_agent_call")
	}
	ask, err := askOf(a)
	if err != nil {
		return nil, s.internalError("answer_ask", err)
	}
	run, te := s.submit(ctx, x, a, ask, x.args["answer"])
	if te != nil {
		return nil, te
	}
	_ = v
	return runOut{Run: run}, nil
}
