package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/turnlimit"
)

// The Agent API (docs/agent-api.md): apps holding a
// token with scope session.run drive agent sessions. A session is a thread
// "agentapi:<session id>" owned by the token that created it; a turn is one
// agent run in that thread (turnId = run id). What the API needs of the
// engine is AgentEngine; everything an app sees is built from the run, its
// stored events and its approvals, so any replica serves any stream.

// Agent API limits (config.DefaultAgentConcurrency and friends mirror them).
const (
	DefaultAgentConcurrency = 4
	MaxAgentConcurrency     = 32
	AgentQueueFactor        = 4
	// CodeOutcomeUnknown is a turn's error code when it may have run a tool
	// whose outcome is unknown (a crash mid-dispatch): read the session
	// before retrying, never retry blindly.
	CodeOutcomeUnknown = "AGENT_OUTCOME_UNKNOWN"
)

// AgentEngine is what the Agent API needs of the engine beyond Engine
// (Decide for reply, Cancel for cancel). Declared here, where it is used;
// cmd/opsgate adapts *engine.Engine to it.
type AgentEngine interface {
	// AgentTurnStart commits t as a queued agent run in the session's
	// thread, requested by t.Actor, and returns the run's id: the turn id.
	AgentTurnStart(ctx context.Context, t AgentTurn) (runID string, err error)
	// AgentAnswer answers the pending question a.RequestID of run a.RunID
	// (as POST /api/v1/runs/{id}/answer): agent.ErrMalformedAnswer,
	// agent.ErrInvalidAnswer, core.ErrNotFound, core.ErrConflict when the
	// run waits for no such question. A Model switches the rest of the
	// turn to that model.
	AgentAnswer(ctx context.Context, a AgentAnswer) error
	// AgentRelease denies every pending approval of run runID as one
	// nobody can answer (the stream holding it closed, or a shutdown); the
	// model is told and continues. Nothing pending is no error.
	AgentRelease(ctx context.Context, runID, why string) error
}

// ErrAgentUnsupported is what an AgentEngine answers for a part of the
// Agent API the engine does not offer yet (HTTP 501 not_implemented).
var ErrAgentUnsupported = errors.New("not supported by this engine yet")

// AgentTurn is one turn to start.
type AgentTurn struct {
	Session *core.AgentSession
	Actor   core.Actor
	Text    string
	// Model is "" (the agent's) or a models[] name for this turn only.
	Model string
	// EventID identifies this request (a fresh id per call: creating a
	// turn is not idempotent).
	EventID string
}

// AgentAnswer is an answer to the question a turn stopped at.
type AgentAnswer struct {
	Session   *core.AgentSession
	RunID     string
	RequestID string
	Actor     core.Actor
	Answers   json.RawMessage
	// Model is "" (keep the turn's) or a models[] name for the rest of it.
	Model string
}

// AgentInfo is one configured agent, as GET /api/v1/agent/agents lists it.
// Settings is the agent's configuration as JSON, copied into each session
// created for it.
type AgentInfo struct {
	Name     string          `json:"name"`
	Model    string          `json:"model"`
	Default  bool            `json:"default"`
	Tools    []string        `json:"tools"`
	Settings json.RawMessage `json:"-"`
}

// ModelInfo is one configured model, as GET /api/v1/agent/models lists it.
type ModelInfo struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// AgentOptions configures the Agent API.
type AgentOptions struct {
	Engine   AgentEngine
	Sessions core.AgentSessionStore
	Agents   []AgentInfo
	Models   []ModelInfo
	// Attendance is shared with the engine's gate, which asks it whether
	// anyone can answer an approval; New makes one when nil.
	Attendance *Attendance
	// PublicURL is the console's origin (server.public_url): a session's
	// consoleUrl is a page under it.
	PublicURL string
}

type agentServer struct {
	s          *server
	o          AgentOptions
	attendance *Attendance
	limits     turnlimit.Set
	agents     map[string]AgentInfo
	defAgent   string
	models     map[string]ModelInfo
}

func newAgentServer(s *server, o AgentOptions) (*agentServer, error) {
	if o.Engine == nil || o.Sessions == nil {
		return nil, errors.New("api: AgentOptions needs Engine and Sessions")
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	ag := &agentServer{s: s, o: o, attendance: o.Attendance, agents: map[string]AgentInfo{}, models: map[string]ModelInfo{}}
	if ag.attendance == nil {
		ag.attendance = NewAttendance()
	}
	for _, a := range o.Agents {
		ag.agents[a.Name] = a
		if a.Default || len(o.Agents) == 1 {
			ag.defAgent = a.Name
		}
	}
	for _, m := range o.Models {
		ag.models[m.Name] = m
	}
	return ag, nil
}

// agentRoutes registers the Agent API. The surface takes only tokens with
// scope session.run (authority.Accepts); each route then names its action.
func (s *server) agentRoutes() {
	ag := s.agent
	route := func(pattern string, h http.HandlerFunc, act authority.Action) {
		s.mux.HandleFunc(authority.Route{Surface: authority.SurfaceAgentAPI, Entry: pattern, Action: act}, func(w http.ResponseWriter, r *http.Request) {
			if err := s.auth.Accepts(authority.SurfaceAgentAPI, authFrom(r.Context())); err != nil {
				s.fail(w, r, err)
				return
			}
			h(w, r)
		})
	}
	if ag == nil {
		s.mux.HandleFunc(authority.Route{Surface: authority.SurfaceAgentAPI, Entry: "/api/v1/agent/", Action: authority.Self},
			func(w http.ResponseWriter, r *http.Request) {
				writeError(w, http.StatusNotFound, "agent_api_off", "the Agent API is not enabled on this server (no agents configured)")
			})
		return
	}
	route("POST /api/v1/agent/sessions", ag.createSession, authority.UseSession)
	route("GET /api/v1/agent/sessions", ag.listSessions, authority.UseSession)
	route("GET /api/v1/agent/sessions/{id}", ag.getSession, authority.SeeSession)
	route("POST /api/v1/agent/runs", ag.postRun, authority.UseSession)
	route("GET /api/v1/agent/turns/{id}", ag.getTurn, authority.SeeSession)
	route("POST /api/v1/agent/turns/{id}/cancel", ag.cancelTurn, authority.Cancel)
	route("POST /api/v1/agent/reply", ag.reply, authority.Decide)
	route("POST /api/v1/agent/answer", ag.answer, authority.UseSession)
	route("GET /api/v1/agent/models", ag.listModels, authority.Catalog)
	route("GET /api/v1/agent/agents", ag.listAgents, authority.Catalog)
}

// SessionView is a session as the Agent API shows it (the design's
// camelCase names, docs/agent-api.md). ConsoleURL is where a
// person continues it in the web console: the page of its newest turn
// (the conversation, its question as a form, its approvals), or the list
// of its turns before it has one.
type SessionView struct {
	SessionID  string        `json:"sessionId"`
	Agent      string        `json:"agent"`
	CreatedAt  string        `json:"createdAt"`
	ConsoleURL string        `json:"consoleUrl"`
	Turns      []*TurnResult `json:"turns,omitempty"`
}

func (ag *agentServer) newSessionView(a *core.AgentSession) *SessionView {
	return &SessionView{SessionID: a.ID, Agent: a.Agent, CreatedAt: rfc3339(a.CreatedAt),
		ConsoleURL: ag.o.PublicURL + "/runs?thread=" + url.QueryEscape(a.Thread.String())}
}

// agentList is a page of the Agent API (camelCase, unlike REST v1's lists).
type agentList[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor"`
}

type sessionBody struct {
	Agent string `json:"agent"`
}

func (ag *agentServer) createSession(w http.ResponseWriter, r *http.Request) {
	var b sessionBody
	if err := decodeBody(r, &b); err != nil {
		ag.s.fail(w, r, err)
		return
	}
	sess, err := ag.newSession(r.Context(), b.Agent)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/agent/sessions/"+sess.ID)
	writeJSON(w, http.StatusCreated, ag.newSessionView(sess))
}

// newSession creates a session of agent (the default one when "") owned by
// the request's token.
func (ag *agentServer) newSession(ctx context.Context, agentName string) (*core.AgentSession, error) {
	if agentName == "" {
		agentName = ag.defAgent
		if agentName == "" {
			return nil, invalid("agent", "agent is required: this server has no default agent (GET /api/v1/agent/agents lists them)")
		}
	}
	info, ok := ag.agents[agentName]
	if !ok {
		return nil, invalid("agent", "unknown agent %q; GET /api/v1/agent/agents lists them", agentName)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("api: new session id: %w", err)
	}
	tok := tokenFrom(ctx)
	sess := &core.AgentSession{ID: id.String(), Token: tok.actor.Name, Actor: tok.actor.ID, Agent: info.Name,
		Settings: info.Settings, Thread: core.Thread{Channel: core.AgentSessionChannel, Key: id.String()},
		CreatedAt: ag.s.o.Now().UTC()}
	if err := ag.o.Sessions.AgentSessionCreate(ctx, sess); err != nil {
		return nil, fmt.Errorf("api: create session: %w", err)
	}
	return sess, nil
}

// ownSession returns the session if the request's token owns it
// (authority.UseSession); any other token's session is 404, so ids of
// other apps' sessions cannot be probed.
func (ag *agentServer) ownSession(ctx context.Context, id string) (*core.AgentSession, error) {
	return ag.session(ctx, authority.UseSession, id)
}

// session loads session id for act (UseSession or SeeSession).
func (ag *agentServer) session(ctx context.Context, act authority.Action, id string) (*core.AgentSession, error) {
	if id == "" {
		return nil, invalid("sessionId", "sessionId is required")
	}
	if len(id) > maxIDLen {
		return nil, invalid("sessionId", "sessionId is longer than %d bytes", maxIDLen)
	}
	if sub, ok := core.SubSessionRoot(core.Thread{Channel: core.AgentSessionChannel, Key: id}); ok {
		return ag.subSession(ctx, act, id, sub)
	}
	return ag.s.auth.Session(ctx, authFrom(ctx), act, id)
}

func (ag *agentServer) listSessions(w http.ResponseWriter, r *http.Request) {
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	cursor := r.URL.Query().Get("cursor")
	p := core.AgentSessionListParams{Token: tokenFrom(r.Context()).actor.Name, Limit: limit, Cursor: cursor}
	items, next, err := listPage(r.Context(), "sessions", cursor, ag.o.Sessions.AgentSessionList, p,
		core.AgentSessionListParams{Token: p.Token, Limit: 1})
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, agentList[*SessionView]{Items: viewsOf(items, ag.newSessionView), NextCursor: next})
}

// getSession is a session with its turns, oldest first: what a client
// reads before re-sending a turn whose answer it lost.
func (ag *agentServer) getSession(w http.ResponseWriter, r *http.Request) {
	sess, err := ag.session(r.Context(), authority.SeeSession, r.PathValue("id"))
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	runs, err := ag.sessionRuns(r.Context(), sess)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	v := ag.newSessionView(sess)
	v.Turns = []*TurnResult{}
	if len(runs) > 0 {
		v.ConsoleURL = ag.o.PublicURL + "/runs/" + runs[len(runs)-1].ID
	}
	for _, run := range runs {
		res, err := ag.turnResult(r.Context(), sess, run, 0)
		if err != nil {
			ag.s.fail(w, r, err)
			return
		}
		v.Turns = append(v.Turns, res)
	}
	writeJSON(w, http.StatusOK, v)
}

// maxSessionTurns bounds the turns GET /api/v1/agent/sessions/{id} shows
// (the newest).
const maxSessionTurns = 200

// sessionRuns returns the session's runs oldest first (the newest
// maxSessionTurns).
func (ag *agentServer) sessionRuns(ctx context.Context, sess *core.AgentSession) ([]*core.Run, error) {
	runs, _, err := ag.s.o.Store.RunList(ctx, core.RunListParams{Thread: sess.Thread.String(), Limit: maxSessionTurns})
	if err != nil {
		return nil, fmt.Errorf("api: session %s runs: %w", sess.ID, err)
	}
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].CreatedAt.Before(runs[j].CreatedAt) })
	return runs, nil
}

func (ag *agentServer) listModels(w http.ResponseWriter, r *http.Request) {
	items := make([]ModelInfo, 0, len(ag.o.Models))
	items = append(items, ag.o.Models...)
	writeJSON(w, http.StatusOK, agentList[ModelInfo]{Items: items})
}

func (ag *agentServer) listAgents(w http.ResponseWriter, r *http.Request) {
	items := make([]AgentInfo, 0, len(ag.o.Agents))
	for _, a := range ag.o.Agents {
		a.Default = a.Name == ag.defAgent
		if a.Tools == nil {
			a.Tools = []string{}
		}
		items = append(items, a)
	}
	writeJSON(w, http.StatusOK, agentList[AgentInfo]{Items: items})
}

// turn returns the run turnID and its session when the request's token
// may act on it: act is SeeSession (the session's owner, or admin) or
// Cancel (the authority's cancel rule). Anything else is 404.
func (ag *agentServer) turn(ctx context.Context, act authority.Action, turnID string) (*core.Run, *core.AgentSession, error) {
	hidden := errf(http.StatusNotFound, "not_found", "turn %q not found", turnID)
	if turnID == "" || len(turnID) > maxIDLen {
		return nil, nil, hidden
	}
	run, err := ag.s.o.Store.RunGet(ctx, turnID)
	if err != nil {
		return nil, nil, notFound(err, "turn", turnID)
	}
	if run.Thread.Channel != core.AgentSessionChannel {
		return nil, nil, hidden
	}
	var sess *core.AgentSession
	if act == authority.Cancel {
		// Whoever may cancel the run (its app, an eligible approver, an
		// admin) sees its result.
		if _, err = ag.s.auth.Run(ctx, authFrom(ctx), authority.Cancel, turnID); err == nil {
			sess, err = ag.o.Sessions.AgentSessionGet(ctx, run.Thread.Key)
		}
	} else {
		sess, err = ag.session(ctx, act, run.Thread.Key)
	}
	if ref, ok := authority.RefusalOf(err); (ok && ref.Code == authority.CodeNotFound) || errors.Is(err, core.ErrNotFound) {
		return nil, nil, hidden
	}
	if err != nil {
		return nil, nil, err
	}
	return run, sess, nil
}

func (ag *agentServer) getTurn(w http.ResponseWriter, r *http.Request) {
	run, sess, err := ag.turn(r.Context(), authority.SeeSession, r.PathValue("id"))
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	res, err := ag.turnResult(r.Context(), sess, run, 0)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// cancelTurn ends a started turn aborted in the engine: pending approvals
// and questions are withdrawn and results that arrive later are refused. A
// turn still waiting in the token's queue has no id yet; its caller ends
// it by closing the request.
func (ag *agentServer) cancelTurn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	run, sess, err := ag.turn(ctx, authority.Cancel, id)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	if run.Status.Final() {
		ag.s.fail(w, r, errf(http.StatusConflict, "turn_finished", "turn %s already ended (%s)", id, run.Status))
		return
	}
	if _, err := ag.s.o.Engine.Cancel(ctx, id, actorFrom(ctx)); err != nil {
		if errors.Is(err, core.ErrConflict) {
			ag.s.fail(w, r, errf(http.StatusConflict, "turn_finished", "turn %s already ended", id))
			return
		}
		ag.s.fail(w, r, fmt.Errorf("api: cancel turn %s: %w", id, err))
		return
	}
	run, err = ag.s.o.Store.RunGet(ctx, id)
	if err != nil {
		ag.s.fail(w, r, fmt.Errorf("api: cancel turn %s: %w", id, err))
		return
	}
	res, err := ag.turnResult(ctx, sess, run, 0)
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

type replyBody struct {
	ids
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

// ids are the session and request a body names, in the design's names;
// the snake_case spellings of earlier releases are still read (README,
// upgrade notes), never written.
type ids struct {
	SessionID    string `json:"sessionId"`
	RequestID    string `json:"requestId"`
	OldSessionID string `json:"session_id"`
	OldRequestID string `json:"request_id"`
}

// session and request are the ids, whichever spelling carried them.
func (b ids) session() string { return firstOf(b.SessionID, b.OldSessionID) }
func (b ids) request() string { return firstOf(b.RequestID, b.OldRequestID) }

// ReplyView is what a reply answers with: the approval's status after it.
type ReplyView struct {
	SessionID string `json:"sessionId"`
	RequestID string `json:"requestId"`
	Decision  string `json:"decision"`
	Status    string `json:"status"`
}

// reply decides a permission.requested approval as the token's actor:
// allowOnce approves this call only, deny rejects it. It is an ordinary
// decision, so it passes every check a decision passes anywhere (scope
// decide, an eligible person, not the requester, never an agent); an app
// can never write an "always allow" rule.
func (ag *agentServer) reply(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	var b replyBody
	if err := decodeBody(r, &b); err != nil {
		ag.s.fail(w, r, err)
		return
	}
	var action string
	switch b.Decision {
	case "allowOnce":
		action = "approve"
	case "deny":
		action = "reject"
	case "":
		ag.s.fail(w, r, invalid("decision", "decision is required: allowOnce or deny"))
		return
	default:
		ag.s.fail(w, r, invalid("decision", "decision %q: want allowOnce or deny (an app never grants more than one call)", b.Decision))
		return
	}
	if len(b.Reason) > maxReasonLen {
		ag.s.fail(w, r, invalid("reason", "reason is longer than %d bytes", maxReasonLen))
		return
	}
	sess, err := ag.ownSession(ctx, b.session())
	if err != nil {
		ag.s.fail(w, r, err)
		return
	}
	requestID := b.request()
	if requestID == "" || len(requestID) > maxIDLen {
		ag.s.fail(w, r, invalid("requestId", "requestId is required"))
		return
	}
	d := core.Decision{ApprovalID: requestID, Action: approvals.Action(action), Reason: b.Reason, Scope: approvals.ScopeCall}
	actor := actorFrom(ctx)
	// A token that may decide nothing is told so whatever it names.
	if ag.s.refuseUndecided(w, r, DecisionChannel, d) {
		return
	}
	a, err := ag.s.o.Store.ApprovalGet(ctx, requestID)
	var run *core.Run
	if err == nil {
		if run, err = ag.s.o.Store.RunGet(ctx, a.RunID); err == nil && run.Thread != sess.Thread {
			err = core.ErrNotFound
		}
	}
	if err != nil {
		ag.s.fail(w, r, notFound(err, "request", requestID))
		return
	}
	if run.Status.Final() && a.Status == approvals.StatusPending {
		// The engine withdraws a final run's approvals; until it has, a
		// late reply is refused here all the same.
		ag.s.fail(w, r, errf(http.StatusConflict, "turn_finished", "turn %s already ended (%s); its requests are withdrawn", run.ID, run.Status))
		return
	}
	got, err := ag.s.o.Engine.Decide(ctx, actor, DecisionChannel, d)
	if err != nil {
		if _, refused := core.Refusal(err); refused {
			ag.s.fail(w, r, err)
			return
		}
		ag.s.fail(w, r, notFound(err, "request", requestID))
		return
	}
	status := ""
	if got != nil {
		status = string(got.Status)
	}
	writeJSON(w, http.StatusOK, ReplyView{SessionID: sess.ID, RequestID: a.ID, Decision: b.Decision, Status: status})
}

// acceptsEventStream reports whether the caller asked for Server-Sent
// Events.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}
