package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/shortid"
)

const approvalsPerPage = 50

// cards renders approvals as cards, reading each run once for the executed
// arguments.
func (s *server) cards(ctx context.Context, as []*approvals.Approval) ([]*cardView, error) {
	runs := map[string]*core.Run{}
	out := make([]*cardView, 0, len(as))
	for _, a := range as {
		run, ok := runs[a.RunID]
		if !ok && a.RunID != "" && (a.Status == approvals.StatusApproved || a.Status == approvals.StatusEdited) {
			var err error
			run, err = s.o.Store.RunGet(ctx, a.RunID)
			if err != nil && !errors.Is(err, core.ErrNotFound) {
				return nil, fmt.Errorf("web: run %s: %w", a.RunID, err)
			}
			runs[a.RunID] = run
		}
		v := newCardView(a, run)
		if a.Status == approvals.StatusPending {
			s.grantOffers(v, a)
		}
		out = append(out, v)
	}
	// The pending calls one agent turn suspended together (same run, same
	// creation time) are one batch: each card offers "Approve all".
	type batchKey struct {
		run string
		at  int64
	}
	pending := map[batchKey]int{}
	for _, a := range as {
		if a.Status == approvals.StatusPending {
			pending[batchKey{a.RunID, a.CreatedAt.UnixMicro()}]++
		}
	}
	for i, a := range as {
		if n := pending[batchKey{a.RunID, a.CreatedAt.UnixMicro()}]; n > 1 && a.Status == approvals.StatusPending {
			out[i].BatchPending = n
		}
	}
	return out, nil
}

// decidedRow is one line of the decided approvals table.
type decidedRow struct {
	ID, Tool, Status, Requester, Thread, RunID, Args string
	DecidedBy, Via, DecidedAt, CreatedAt             string
}

// approvalsPage shows the pending queue as cards (to decide), or decided
// approvals as a compact table with ?status=decided (or one final status),
// filtered by tool (in the store) and by who decided, through which
// channel, and requester (on the page of results).
func (s *server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	status := q.Get("status")
	if status == "" || approvals.Status(status) == approvals.StatusPending {
		list, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{Status: approvals.StatusPending, Limit: approvalsPerPage})
		if err == nil {
			list, err = s.auth.Viewer(infoFrom(ctx).auth).Approvals(ctx, list)
		}
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: list approvals: %w", err))
			return
		}
		cards, err := s.cards(ctx, list)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		s.render(w, r, http.StatusOK, "approvals", map[string]any{"Title": "Approvals", "Status": "pending", "Cards": cards,
			"Done": q.Get("done")})
		return
	}
	p := approvals.ApprovalListParams{Limit: 100, Cursor: q.Get("cursor"), Tool: strings.TrimSpace(q.Get("tool"))}
	switch st := approvals.Status(status); {
	case status == "decided":
		p.Decided = true
	case st.Valid():
		p.Status = st
	default:
		s.plainError(w, http.StatusBadRequest, "Unknown approval status.")
		return
	}
	list, next, err := s.o.Store.ApprovalList(ctx, p)
	if err != nil {
		if p.Cursor != "" {
			s.plainError(w, http.StatusBadRequest, "That page link is no longer valid; start from the first page.")
			return
		}
		s.fail(w, r, fmt.Errorf("web: list approvals: %w", err))
		return
	}
	if list, err = s.auth.Viewer(infoFrom(ctx).auth).Approvals(ctx, list); err != nil {
		s.fail(w, r, fmt.Errorf("web: list approvals: %w", err))
		return
	}
	actor, via, who := strings.TrimSpace(q.Get("actor")), strings.TrimSpace(q.Get("channel")), strings.TrimSpace(q.Get("requester"))
	var rows []decidedRow
	for _, a := range list {
		row := decidedRow{ID: a.ID, Tool: a.Tool, Status: string(a.Status), Requester: a.Requester, Thread: a.Thread,
			RunID: a.RunID, DecidedAt: tsPtr(a.DecidedAt), CreatedAt: ts(a.CreatedAt)}
		args := a.ApprovedArgs
		if args == nil {
			args = a.ProposedArgs
		}
		row.Args = compactArgs(args)
		var by, chans []string
		matchActor, matchVia := actor == "", via == ""
		for _, d := range a.Decisions {
			if d.Superseded {
				continue
			}
			by, chans = appendNew(by, d.Actor), appendNew(chans, d.Channel)
			matchActor = matchActor || d.Actor == actor
			matchVia = matchVia || d.Channel == via
		}
		if !matchActor || !matchVia || (who != "" && a.Requester != who) {
			continue
		}
		row.DecidedBy, row.Via = strings.Join(by, ", "), strings.Join(chans, ", ")
		rows = append(rows, row)
	}
	nextURL := ""
	if next != "" {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("cursor", next)
		nextURL = "/approvals?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, "approvals", map[string]any{"Title": "Decided approvals", "Status": status, "Rows": rows,
		"Tool": p.Tool, "ActorQ": actor, "Via": via, "Requester": who, "Next": nextURL, "Done": q.Get("done"),
		"Statuses": decidedStatuses()})
}

// decidedStatuses are the decided page's status filter: any decided, or
// one final status.
func decidedStatuses() []string {
	out := []string{"decided"}
	for _, st := range approvals.Statuses {
		if st.Final() {
			out = append(out, string(st))
		}
	}
	return out
}

// compactArgs is a one-line view of arguments for a table cell.
func compactArgs(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	s := jsonText(m)
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:117], "") + "…"
	}
	return s
}

func appendNew(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// approvalPage is where card links in chat messages and emails land. It
// shows the card and its buttons; nothing is decided until the person
// clicks one (a GET never changes state).
func (s *server) approvalPage(w http.ResponseWriter, r *http.Request) {
	a, err := s.auth.Approval(r.Context(), infoFrom(r.Context()).auth, authority.SeeApproval, r.PathValue("id"))
	if errors.Is(err, core.ErrNotFound) && s.shortRedirect(w, r, shortid.KindApproval, r.PathValue("id")) {
		return
	}
	if err != nil {
		s.refused(w, r, err)
		return
	}
	cards, err := s.cards(r.Context(), []*approvals.Approval{a})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.renderApproval(w, r, http.StatusOK, cards[0], r.URL.Query().Get("done"))
}

func (s *server) renderApproval(w http.ResponseWriter, r *http.Request, status int, c *cardView, done string) {
	s.render(w, r, status, "approval", map[string]any{"Title": "Approval " + c.Tool, "Card": c, "Done": done,
		"Here": "/approvals/" + url.PathEscape(c.ID)})
}

// decide applies Approve, Reject (with feedback) or Edit through the
// engine. A refusal re-renders the card with the engine's message, next to
// the offending argument when the validator named one.
func (s *server) decide(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	info := infoFrom(ctx)
	id := r.PathValue("id")
	back := localPath(r.PostFormValue("return"), "/approvals/"+url.PathEscape(id))
	action := r.PostFormValue("action")
	d := core.Decision{ApprovalID: id, Action: approvals.Action(action), Reason: strings.TrimSpace(r.PostFormValue("reason")), Scope: approvals.Scope(r.PostFormValue("scope"))}
	var formErr *core.DecisionError
	switch d.Action {
	case approvals.ActionApprove, approvals.ActionReject, core.ActionApproveAll:
	case approvals.ActionEdit:
		args, err := parseEditArgs(r.PostForm)
		if err != nil {
			formErr = err
		}
		d.Args = args
	default:
		formErr = &core.DecisionError{Code: core.DecisionBadRequest, Message: "unknown action: choose approve, reject or edit"}
	}
	if d.Scope != "" && !d.Scope.Valid() {
		formErr = &core.DecisionError{Code: core.DecisionBadRequest, Message: "unknown scope: choose call, task, session or forever"}
	}
	if f := strings.TrimSpace(r.PostFormValue("for")); f != "" {
		var err error
		if d.For, err = api.ParseFor(f); err != nil {
			formErr = &core.DecisionError{Code: core.DecisionBadRequest, Message: err.Error()}
		}
	}
	if _, err := s.auth.Approval(ctx, info.auth, authority.Decide, id); authority.HumanRequired(err) {
		// Through the engine all the same, so the attempt is audited.
		d.Unverified = fmt.Sprintf("console: token %q has no scope decide (agents and tokens without decide never decide)", info.actor.Name)
		_, _ = s.o.Engine.Decide(ctx, info.actor, Channel, d)
		formErr = &core.DecisionError{Code: core.DecisionHumanRequired,
			Message: "You signed in with a token that may not decide approvals; a person decides, with a token that has scope decide."}
	}
	var err error
	if formErr == nil {
		_, err = s.o.Engine.Decide(ctx, info.actor, Channel, d)
	} else {
		err = formErr
	}
	if err == nil {
		s.log.InfoContext(ctx, "web: decision", "approval", id, "action", action, "actor", info.actor.ID)
		redirectDone(w, r, back, action)
		return
	}
	var de *core.DecisionError
	if !errors.As(err, &de) {
		s.fail(w, r, fmt.Errorf("web: decide %s: %w", id, err))
		return
	}
	c, ok := s.refusedCard(w, r, id, de, action, d.Reason)
	if !ok {
		return
	}
	if c.Error == "" {
		c.Error = strings.ReplaceAll(string(de.Code), "_", " ")
	}
	if action == string(approvals.ActionEdit) {
		// Show what the person typed, with the message next to its field.
		c.EditOpen = true
		c.Proposed = editedFields(r.PostForm, c.Proposed)
		for i := range c.Proposed {
			if de.Field != "" && (c.Proposed[i].Key == de.Field || strings.HasPrefix(de.Field, c.Proposed[i].Key+".")) {
				c.Proposed[i].Error = de.Message
			}
		}
	}
	s.renderApproval(w, r, de.Code.HTTPStatus(), c, "")
}

// redirectDone sends the browser back (a local path) with done=action,
// after a decision or hand-over went through.
func redirectDone(w http.ResponseWriter, r *http.Request, back, action string) {
	sep := "?"
	if strings.Contains(back, "?") {
		sep = "&"
	}
	http.Redirect(w, r, back+sep+"done="+url.QueryEscape(action), http.StatusSeeOther)
}

// refusedCard is approval id's card to show again after a refusal de of
// action (a decision or a hand-over), with the message and what the
// person typed as reason; false when loading it failed and the error page
// is already written.
func (s *server) refusedCard(w http.ResponseWriter, r *http.Request, id string, de *core.DecisionError, action, reason string) (*cardView, bool) {
	a, err := s.o.Store.ApprovalGet(r.Context(), id)
	if err != nil {
		s.refused(w, r, err)
		return nil, false
	}
	cards, err := s.cards(r.Context(), []*approvals.Approval{a})
	if err != nil {
		s.fail(w, r, err)
		return nil, false
	}
	c := cards[0]
	c.Error, c.Action, c.FormReason = de.Message, action, reason
	return c, true
}

// parseEditArgs reads the args editor: one "arg:<key>" field per argument,
// JSON-typed when "argjson:<key>" is set (numbers, booleans, objects), plus
// an optional new argument ("newkey", "newvalue"). A malformed JSON value
// is reported against its field, like a schema error.
func parseEditArgs(form url.Values) (map[string]any, *core.DecisionError) {
	args := map[string]any{}
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, ok := strings.CutPrefix(k, "arg:")
		if !ok || name == "" {
			continue
		}
		v := form.Get(k)
		if form.Get("argjson:"+name) == "" {
			args[name] = v
			continue
		}
		var x any
		if err := json.Unmarshal([]byte(v), &x); err != nil {
			return nil, &core.DecisionError{Code: core.DecisionInvalidArgs, Field: name,
				Message: fmt.Sprintf("invalid arguments: %s: not valid JSON: %v", name, err)}
		}
		args[name] = x
	}
	if nk := strings.TrimSpace(form.Get("newkey")); nk != "" {
		args[nk] = form.Get("newvalue")
	}
	return args, nil
}

// editedFields returns the editor's fields with the submitted values, so a
// refused edit keeps what the person typed.
func editedFields(form url.Values, fields []argField) []argField {
	out := make([]argField, len(fields))
	copy(out, fields)
	for i := range out {
		if v, ok := form["arg:"+out[i].Key]; ok && len(v) > 0 {
			out[i].Value = v[0]
		}
	}
	return out
}
