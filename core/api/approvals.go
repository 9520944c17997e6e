package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

func (s *server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var err error
	p := approvals.ApprovalListParams{Status: approvals.Status(q.Get("status")), RunID: q.Get("run_id"), Cursor: q.Get("cursor")}
	if p.Status != "" && !p.Status.Valid() {
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
