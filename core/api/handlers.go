package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// List limits: a default that suits a terminal, a cap that bounds one
// response.
const (
	defaultLimit  = 50
	maxLimit      = 200
	maxAuditLimit = 1000
	maxIDLen      = 256
	maxReasonLen  = 4 << 10
)

func isNotFound(err error) bool {
	return errors.Is(err, core.ErrNotFound)
}

type messageBody struct {
	Thread  string `json:"thread"`
	Text    string `json:"text"`
	EventID string `json:"event_id"`
}

type messageResponse struct {
	EventID   string   `json:"event_id"`
	Duplicate bool     `json:"duplicate"`
	Run       *RunView `json:"run"`
}

// postMessage turns the body into a console ChannelEvent, handled exactly
// like a chat message. A client that retries with the same event_id gets
// the first delivery's run back (200) instead of a second run.
func (s *server) postMessage(w http.ResponseWriter, r *http.Request) {
	var b messageBody
	if err := decodeBody(r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	key := strings.TrimPrefix(strings.TrimSpace(b.Thread), core.ConsoleChannel+":")
	switch {
	case key == "":
		s.fail(w, r, invalid("thread", "thread is required"))
		return
	case len(key) > maxIDLen:
		s.fail(w, r, invalid("thread", "thread is longer than %d bytes", maxIDLen))
		return
	case strings.TrimSpace(b.Text) == "":
		s.fail(w, r, invalid("text", "text is required"))
		return
	case len(b.Text) > MaxMessageText:
		e := errf(http.StatusRequestEntityTooLarge, "too_large", "text is %d bytes; the limit is %d", len(b.Text), MaxMessageText)
		e.body.Field = "text"
		s.fail(w, r, e)
		return
	case len(b.EventID) > maxIDLen:
		s.fail(w, r, invalid("event_id", "event_id is longer than %d bytes", maxIDLen))
		return
	}
	if b.EventID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			s.fail(w, r, fmt.Errorf("api: new event id: %w", err))
			return
		}
		b.EventID = id.String()
	}
	ev := core.ChannelEvent{
		Channel:    core.ConsoleChannel,
		EventID:    b.EventID,
		Actor:      actorFrom(r.Context()),
		Thread:     core.Thread{Channel: core.ConsoleChannel, Key: key},
		Text:       b.Text,
		ReceivedAt: s.o.Now().UTC(),
	}
	rc, err := s.o.Engine.HandleEvent(r.Context(), ev)
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: handle message: %w", err))
		return
	}
	resp := messageResponse{EventID: b.EventID, Duplicate: rc.Duplicate}
	switch {
	case rc.Run != nil:
		resp.Run = NewRunView(rc.Run) // as committed: no read on the ingest path
	case rc.RunID != "":
		run, err := s.o.Store.RunGet(r.Context(), rc.RunID)
		if err != nil {
			s.fail(w, r, fmt.Errorf("api: get run %s: %w", rc.RunID, err))
			return
		}
		resp.Run = NewRunView(run)
	}
	status := http.StatusOK
	if rc.RunID != "" && !rc.Duplicate {
		status = http.StatusCreated
		w.Header().Set("Location", "/api/v1/runs/"+rc.RunID)
	}
	writeJSON(w, status, resp)
}

func (s *server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := core.RunListParams{Status: core.RunStatus(q.Get("status")), Cursor: q.Get("cursor")}
	if p.Status != "" && !p.Status.Valid() {
		s.fail(w, r, invalid("status", "unknown run status %q", p.Status))
		return
	}
	if t := q.Get("thread"); t != "" {
		th, err := core.ParseThread(t)
		if err != nil {
			s.fail(w, r, invalid("thread", "thread must be <channel>:<key>, got %q", t))
			return
		}
		p.Thread = th.String()
	}
	prefix, err := idPrefix(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.IDPrefix = prefix
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Limit = limit
	actor := authFrom(r.Context())
	p.Requester = s.auth.RunFilter(actor)
	runs, next, err := listPage(r.Context(), "runs", p.Cursor, s.o.Store.RunList, p, core.RunListParams{Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A page holds the runs the token may see; one may be shorter than
	// limit (follow next_cursor).
	if runs, err = s.auth.Viewer(actor).Runs(r.Context(), runs); err != nil {
		s.fail(w, r, fmt.Errorf("api: list runs: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, listView[*RunView]{Items: viewsOf(runs, NewRunView), NextCursor: next})
}

// listMessages is a thread's history, newest first: what people sent
// (direction "in") and what opsgate queued for them (replies and cards,
// direction "out", with their delivery status). thread is required.
func (s *server) listMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	th, err := core.ParseThread(q.Get("thread"))
	if err != nil {
		s.fail(w, r, invalid("thread", "thread is required as <channel>:<key>, got %q", q.Get("thread")))
		return
	}
	if err := s.auth.Thread(r.Context(), authFrom(r.Context()), th); err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := core.ThreadMessagesParams{Thread: th, Before: q.Get("cursor"), Limit: limit}
	msgs, next, err := listPage(r.Context(), "messages", p.Before, s.o.Store.ThreadMessages, p,
		core.ThreadMessagesParams{Thread: th, Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := listView[core.ThreadMessage]{Items: msgs, NextCursor: next}
	if out.Items == nil {
		out.Items = []core.ThreadMessage{}
	}
	writeJSON(w, http.StatusOK, out)
}

// listPage reads one page of a list through the store's list method. A
// failure is reported as "api: list <what>", or as a bad cursor (422) when
// the same list without the caller's cursor (probe, one item) works.
func listPage[P, T any](ctx context.Context, what, cursor string,
	list func(context.Context, P) ([]T, string, error), p, probe P) ([]T, string, error) {
	items, next, err := list(ctx, p)
	if err != nil {
		return nil, "", cursorErr(cursor, fmt.Errorf("api: list %s: %w", what, err), func() error {
			_, _, err := list(ctx, probe)
			return err
		})
	}
	return items, next, nil
}

// viewsOf renders a page of store records as their API views; an empty
// page is an empty JSON array, never null.
func viewsOf[T, V any](items []T, view func(T) V) []V {
	out := make([]V, 0, len(items))
	for _, it := range items {
		out = append(out, view(it))
	}
	return out
}

// cursorErr decides what a list failure with a caller-supplied cursor
// means. Cursors are opaque, so a forged or stale one is bad input (422),
// not an outage; the store does not say which it was, so probe the same
// list without the cursor: if that works, the cursor was to blame.
func cursorErr(cursor string, err error, probe func() error) error {
	if cursor == "" || isNotFound(err) {
		return err
	}
	if probe() != nil {
		return err
	}
	return invalid("cursor", "cursor is not valid (use next_cursor from a previous page)")
}

func (s *server) getRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	run, err := s.auth.Run(r.Context(), authFrom(r.Context()), authority.SeeRun, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := NewRunView(run)
	if run.Kind() == core.RunKindAgent {
		u, err := s.agentUsage(r.Context(), id, v)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		v.Usage = u
	}
	if ql, ok := s.o.Engine.(QuestionLister); ok && run.Status == core.RunWaitingInput {
		qs, err := ql.QuestionCards(r.Context(), id)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, q := range qs {
			v.PendingActions = append(v.PendingActions, PendingActionView{ID: q.ActionID, Kind: "question",
				Questions: q.Questions, ExpiresAt: rfc3339(q.ExpiresAt)})
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// answerRun answers a run's pending question: {"action_id","answer"} with
// answer the question array or a confirmation (docs/agents.md, "ask_user");
// 200 with the run; 400 malformed, 422 not an answer, 403 may not answer,
// 404 no such question, 409 answered already, 410 expired.
func (s *server) answerRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b struct {
		ActionID string          `json:"action_id"`
		Answer   json.RawMessage `json:"answer"`
	}
	if err := decodeBody(r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.ActionID == "" || len(b.Answer) == 0 {
		s.fail(w, r, errf(http.StatusUnprocessableEntity, "invalid", "action_id and answer are required"))
		return
	}
	qa, ok := s.o.Engine.(Answerer)
	if !ok {
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "this server takes no answers"))
		return
	}
	if _, err := s.auth.Run(r.Context(), authFrom(r.Context()), authority.Answer, id); err != nil {
		s.fail(w, r, err)
		return
	}
	ch, err := requestChannel(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := qa.Answer(r.Context(), actorFrom(r.Context()), ch, id, b.ActionID, b.Answer); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.o.Store.RunGet(r.Context(), id)
	if err != nil {
		s.fail(w, r, notFound(err, "run", id))
		return
	}
	writeJSON(w, http.StatusOK, NewRunView(run))
}

// agentUsage sums the token usage of an agent run's model turns, which
// are stored with its conversation (agent.message events), and gives v's
// steps the model's arguments and reason (the run's k-th call is step k).
func (s *server) agentUsage(ctx context.Context, runID string, v *RunView) (*UsageView, error) {
	u := &UsageView{}
	var after int64
	k := 0
	for range 1000 {
		evs, err := s.o.Store.RunEventList(ctx, runID, after, 500)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			after = e.Seq
			if e.Type != core.EventAgentMessage {
				continue
			}
			var m struct {
				Role  string `json:"role"`
				Calls []struct {
					Args   map[string]any `json:"args"`
					Reason string         `json:"reason"`
				} `json:"calls"`
				Usage *struct {
					In  int64 `json:"input_tokens"`
					Out int64 `json:"output_tokens"`
				} `json:"usage"`
			}
			if json.Unmarshal(e.Data, &m) == nil && m.Role == "assistant" {
				for _, c := range m.Calls {
					for i := range v.Steps {
						if v.Steps[i].Index == k {
							v.Steps[i].ProposedArgs, v.Steps[i].Reason = c.Args, c.Reason
						}
					}
					k++
				}
				u.ModelCalls++
				if m.Usage != nil {
					u.InputTokens += m.Usage.In
					u.OutputTokens += m.Usage.Out
				}
			}
		}
		if len(evs) < 500 {
			break
		}
	}
	return u, nil
}

// notFound rewords a not-found error to name what was missing.
func notFound(err error, what, id string) error {
	if isNotFound(err) {
		return errf(http.StatusNotFound, "not_found", "%s %q not found", what, id)
	}
	return fmt.Errorf("api: get %s %s: %w", what, id, err)
}

// cancelRun stops a run: the authority says who may (its requester, its
// eligible approvers, admin); a run the token may not see is 404.
func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.auth.Run(r.Context(), authFrom(r.Context()), authority.Cancel, id); err != nil {
		s.fail(w, r, err)
		return
	}
	run, err := s.o.Engine.Cancel(r.Context(), id, actorFrom(r.Context()))
	switch {
	case isNotFound(err):
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "run %q not found", id))
		return
	case errors.Is(err, core.ErrConflict):
		msg := fmt.Sprintf("run %q is already final", id)
		if cur, gerr := s.o.Store.RunGet(r.Context(), id); gerr == nil {
			msg = fmt.Sprintf("run %q already ended: %s", id, cur.Status)
		}
		s.fail(w, r, errf(http.StatusConflict, "already_final", "%s", msg))
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("api: cancel run %s: %w", id, err))
		return
	}
	writeJSON(w, http.StatusOK, NewRunView(run))
}

var approvalStatuses = map[approvals.Status]bool{
	approvals.StatusPending: true, approvals.StatusApproved: true, approvals.StatusRejected: true,
	approvals.StatusEdited: true, approvals.StatusExpired: true,
}

func (s *server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var err error
	p := approvals.ApprovalListParams{Status: approvals.Status(q.Get("status")), RunID: q.Get("run_id"), Cursor: q.Get("cursor")}
	if p.Status != "" && !approvalStatuses[p.Status] {
		s.fail(w, r, invalid("status", "unknown approval status %q", p.Status))
		return
	}
	if p.IDPrefix, err = idPrefix(q); err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Limit = limit
	as, next, err := listPage(r.Context(), "approvals", p.Cursor, s.o.Store.ApprovalList, p, approvals.ApprovalListParams{Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if as, err = s.auth.Viewer(authFrom(r.Context())).Approvals(r.Context(), as); err != nil {
		s.fail(w, r, fmt.Errorf("api: list approvals: %w", err))
		return
	}
	views, err := s.approvalViews(r.Context(), as)
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: list approvals: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, listView[*ApprovalView]{Items: views, NextCursor: next})
}

func (s *server) getApproval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	a, err := s.auth.Approval(r.Context(), authFrom(r.Context()), authority.SeeApproval, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	views, err := s.approvalViews(r.Context(), []*approvals.Approval{a})
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: approval %s: %w", a.ID, err))
		return
	}
	v := views[0]
	if ts, ok := s.o.Engine.(ToolSchemas); ok && a.Status == approvals.StatusPending {
		// A tool that is gone (an upstream server down) only costs the
		// form its hints; the server still validates the edit.
		if doc, err := ts.ToolInputSchema(r.Context(), a.Tool); err == nil {
			v.InputSchema = doc
		} else {
			s.log.DebugContext(r.Context(), "api: no input schema for approval", "approval", a.ID, "tool", a.Tool, "err", err)
		}
	}
	if g, ok := s.o.Engine.(GrantOfferer); ok {
		v.GrantOffers = NewGrantOfferViews(g.GrantOffers(a), s.o.Now().UTC())
	}
	writeJSON(w, http.StatusOK, v)
}

// meView is who a token acts as (GET /api/v1/me), so a client can say
// whose queue it shows and offer only what the token may do.
type meView struct {
	Actor  string   `json:"actor"`
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
}

func (s *server) me(w http.ResponseWriter, r *http.Request) {
	a := actorFrom(r.Context())
	v := meView{Actor: a.ID, Name: a.Name, Scopes: []string{}}
	for _, sc := range scopesFrom(r.Context()) {
		v.Scopes = append(v.Scopes, string(sc))
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *server) writeApproval(w http.ResponseWriter, r *http.Request, a *approvals.Approval) {
	views, err := s.approvalViews(r.Context(), []*approvals.Approval{a})
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: approval %s: %w", a.ID, err))
		return
	}
	writeJSON(w, http.StatusOK, views[0])
}

type decisionBody struct {
	Action string         `json:"action"`
	Args   map[string]any `json:"args"`
	Reason string         `json:"reason"`
	Scope  string         `json:"scope"`
	// Pattern, with scope forever, saves per-argument globs instead of
	// the exact arguments.
	Pattern map[string]string `json:"pattern"`
	// For bounds a session or forever grant: a duration like "2h".
	For string `json:"for"`
}

// validate checks the shape of a decision; whether the actor may make it,
// and whether edited args fit the tool's schema, is the engine's call.
func (b *decisionBody) validate() error {
	switch approvals.Action(b.Action) {
	case approvals.ActionApprove, approvals.ActionReject:
		if b.Args != nil {
			return invalid("args", "args are only accepted with action %q", approvals.ActionEdit)
		}
	case approvals.ActionEdit:
		if b.Args == nil {
			return invalid("args", "action %q needs args: the complete new arguments object", approvals.ActionEdit)
		}
	case "":
		return invalid("action", "action is required: approve, reject or edit")
	default:
		return invalid("action", "unknown action %q: want approve, reject or edit", b.Action)
	}
	if s := approvals.Scope(b.Scope); s != "" && !s.Valid() {
		return invalid("scope", "unknown scope %q: want call, task, session or forever", b.Scope)
	}
	if b.For != "" {
		if _, err := ParseFor(b.For); err != nil {
			return invalid("for", "%v", err)
		}
		if sc := approvals.Scope(b.Scope); sc != approvals.ScopeSession && sc != approvals.ScopeForever {
			return invalid("for", "for bounds a grant: it goes with scope session or forever")
		}
		if approvals.Action(b.Action) == approvals.ActionReject {
			return invalid("for", "a reject saves no grant")
		}
	}
	if b.Pattern != nil && approvals.Scope(b.Scope) != approvals.ScopeForever {
		return invalid("pattern", "pattern is only accepted with scope %q", approvals.ScopeForever)
	}
	if b.Pattern != nil && approvals.Action(b.Action) == approvals.ActionReject {
		return invalid("pattern", "a reject saves no grant")
	}
	if len(b.Reason) > maxReasonLen {
		return invalid("reason", "reason is longer than %d bytes", maxReasonLen)
	}
	return nil
}

// decide applies the caller's decision through the engine, which judges it
// by compare-and-set: a loser gets 409 naming the winner.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b decisionBody
	if err := decodeBody(r, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := b.validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	ch, err := requestChannel(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	forDur, _ := ParseFor(b.For) // validated above
	d := core.Decision{ApprovalID: id, Action: approvals.Action(b.Action), Args: b.Args, Reason: b.Reason, Scope: approvals.Scope(b.Scope),
		Pattern: b.Pattern, For: forDur}
	actor := actorFrom(r.Context())
	if s.refuseUndecided(w, r, ch, d) {
		return
	}
	a, err := s.o.Engine.Decide(r.Context(), actor, ch, d)
	if err != nil {
		if _, refused := core.Refusal(err); refused {
			s.fail(w, r, err)
			return
		}
		s.fail(w, r, notFound(err, "approval", id))
		return
	}
	if a == nil {
		// An engine that reports success without the approval: read it.
		if a, err = s.o.Store.ApprovalGet(r.Context(), id); err != nil {
			s.fail(w, r, notFound(err, "approval", id))
			return
		}
	}
	s.writeApproval(w, r, a)
}

// refuseUndecided answers a decision by a token that may decide nothing
// at all (an agent, no scope decide: authority's human_confirmation_required)
// and reports whether it did; ch is the channel the attempt is recorded
// with (requestChannel). The attempt still goes through the engine,
// marked unverified, so it is audited like every other refused decision.
func (s *server) refuseUndecided(w http.ResponseWriter, r *http.Request, ch string, d core.Decision) bool {
	ctx := r.Context()
	if _, err := s.auth.Approval(ctx, authFrom(ctx), authority.Decide, d.ApprovalID); !authority.HumanRequired(err) {
		return false
	}
	actor := actorFrom(ctx)
	d.Unverified = fmt.Sprintf("api: token %q has no scope decide (agents and tokens without decide never decide)", actor.Name)
	if _, err := s.o.Engine.Decide(ctx, actor, ch, d); err != nil && !isRefusal(err) && !isNotFound(err) {
		s.fail(w, r, fmt.Errorf("api: decide %s: %w", d.ApprovalID, err))
		return true
	}
	s.fail(w, r, errf(http.StatusForbidden, string(core.DecisionHumanRequired),
		"this token may not decide approvals: a person decides, with a token that has scope decide"))
	return true
}

// isRefusal reports whether err is a decision refusal.
func isRefusal(err error) bool {
	_, _, ok := RefusalBody(err)
	return ok
}

// listGrants lists session and forever grants, newest first: the active
// ones, or every one with ?status=all (revoked and expired included).
func (s *server) listGrants(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := approvals.GrantListParams{Tool: q.Get("tool"), Cursor: q.Get("cursor")}
	switch q.Get("status") {
	case "", "active":
		p.ActiveAt = s.o.Now().UTC()
	case "all":
	default:
		s.fail(w, r, invalid("status", "unknown grant status %q: want active or all", q.Get("status")))
		return
	}
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Limit = limit
	gs, next, err := listPage(r.Context(), "grants", p.Cursor, s.o.Store.GrantList, p, approvals.GrantListParams{Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.o.Now().UTC()
	writeJSON(w, http.StatusOK, listView[*GrantView]{Items: viewsOf(gs, func(g *approvals.Grant) *GrantView { return NewGrantView(g, now) }),
		NextCursor: next})
}

// revokeGrant revokes one grant: 200 with it, 404 unknown, 409 revoked
// already (the body names by whom).
func (s *server) revokeGrant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	g, err := s.o.Engine.RevokeGrant(r.Context(), id, actorFrom(r.Context()))
	switch {
	case errors.Is(err, approvals.ErrGrantRevoked):
		msg := fmt.Sprintf("grant %q was already revoked", id)
		if g != nil && g.RevokedAt != nil {
			msg += fmt.Sprintf(" by %s at %s", g.RevokedBy, rfc3339(*g.RevokedAt))
		}
		s.fail(w, r, errf(http.StatusConflict, "already_revoked", "%s", msg))
		return
	case isNotFound(err):
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "grant %q not found", id))
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("api: revoke grant %s: %w", id, err))
		return
	}
	writeJSON(w, http.StatusOK, NewGrantView(g, s.o.Now().UTC()))
}

func (s *server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := queryInt64(r, "after")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c := q.Get("cursor"); c != "" {
		// The audit cursor is the last sequence number seen, so "after"
		// and "cursor" mean the same; a cursor wins.
		if after, err = queryInt64(r, "cursor"); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	limit, err := queryLimit(r, 100, maxAuditLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := approvals.AuditListParams{After: after, Limit: limit, Actor: q.Get("actor"), Tool: q.Get("tool"),
		RunID: q.Get("run_id"), ApprovalID: q.Get("approval_id"), Kind: q.Get("kind")}
	switch q.Get("order") {
	case "", "oldest":
	case "newest":
		// Newest first (the CLI's audit list, the TUI's history): the
		// cursor is then the entry to go back from.
		p.Newest, p.Before, p.After = true, after, 0
	default:
		s.fail(w, r, invalid("order", "order must be oldest or newest, got %q", q.Get("order")))
		return
	}
	entries, err := s.o.Store.AuditList(r.Context(), p)
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: list audit: %w", err))
		return
	}
	out := listView[auditView]{Items: viewsOf(entries, newAuditView)}
	if len(entries) == limit {
		out.NextCursor = fmt.Sprint(entries[len(entries)-1].Seq)
	}
	writeJSON(w, http.StatusOK, out)
}

// verifyResponse is the chain's state: ok and the first entry that does
// not link, plus the head (newest seq and its hash). An intact chain whose
// head moved back since an operator last recorded it lost its newest
// entries, which the chain alone cannot show.
type verifyResponse struct {
	OK          bool   `json:"ok"`
	FirstBadSeq int64  `json:"first_bad_seq"`
	Problem     string `json:"problem,omitempty"`
	HeadSeq     int64  `json:"head_seq"`
	HeadHash    string `json:"head_hash"`
	// LegacyUntil is the last entry sealed before the chain had a key.
	LegacyUntil int64 `json:"legacy_until"`
}

func (s *server) verifyAudit(w http.ResponseWriter, r *http.Request) {
	rep, err := s.o.Store.AuditVerifyReport(r.Context())
	if err != nil {
		s.fail(w, r, fmt.Errorf("api: verify audit: %w", err))
		return
	}
	writeJSON(w, http.StatusOK, verifyResponse{OK: rep.Intact(), FirstBadSeq: rep.BadSeq, Problem: rep.Problem(),
		HeadSeq: rep.HeadSeq, HeadHash: rep.HeadHash, LegacyUntil: rep.LegacyUntil})
}

func (s *server) listDeliveries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := core.OutboxListParams{Status: core.DeliveryStatus(q.Get("status")), Cursor: q.Get("cursor")}
	if p.Status != "" && !p.Status.Valid() {
		s.fail(w, r, invalid("status", "unknown delivery status %q: want dead, pending or sent", p.Status))
		return
	}
	limit, err := queryLimit(r, defaultLimit, maxLimit)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p.Limit = limit
	ds, next, err := listPage(r.Context(), "deliveries", p.Cursor, s.o.Store.OutboxList, p, core.OutboxListParams{Limit: 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, listView[deliveryView]{Items: viewsOf(ds, newDeliveryView), NextCursor: next})
}

func (s *server) requeueDelivery(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.o.Store.OutboxRequeue(r.Context(), id, s.o.Now().UTC())
	switch {
	case isNotFound(err):
		s.fail(w, r, errf(http.StatusNotFound, "not_found", "delivery %q not found", id))
		return
	case errors.Is(err, core.ErrConflict):
		s.fail(w, r, errf(http.StatusConflict, "not_dead", "delivery %q is not dead; only dead deliveries can be requeued", id))
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("api: requeue delivery %s: %w", id, err))
		return
	}
	s.log.InfoContext(r.Context(), "api: delivery requeued", "id", id, "actor", actorFrom(r.Context()).ID)
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": string(core.DeliveryPending)})
}

// maxIDPrefix is the longest id_prefix accepted: a whole UUID.
const maxIDPrefix = 36

// idPrefix reads the optional id_prefix filter of the run and approval
// lists: the start of an id (letters, digits, '-'), as the CLI sends it to
// resolve a short id the way git and docker do. The list answers every
// match; the caller decides whether one is unambiguous.
func idPrefix(q url.Values) (string, error) {
	p := q.Get("id_prefix")
	if len(p) > maxIDPrefix {
		return "", invalid("id_prefix", "id_prefix is longer than an id (%d characters)", maxIDPrefix)
	}
	for _, c := range p {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return "", invalid("id_prefix", "id_prefix may hold only letters, digits and '-', got %q", p)
		}
	}
	return p, nil
}
