package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/shortid"
)

var runStatuses = []core.RunStatus{core.RunQueued, core.RunRunning, core.RunWaitingApproval, core.RunWaitingInput,
	core.RunSucceeded, core.RunFailed, core.RunRejected, core.RunCancelled, core.RunInterrupted}

type runRow struct {
	ID, Flow, Thread, Requester, Status, Reason, CreatedAt, UpdatedAt string
	// Short is the id as shown: unique among the page's runs.
	Short string
}

// runsPage lists runs newest first, filtered (in the store) by status,
// thread, channel, flow and requester.
func (s *server) runsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := core.RunListParams{Limit: 50, Cursor: q.Get("cursor")}
	if st := q.Get("status"); st != "" {
		ok := false
		for _, k := range runStatuses {
			ok = ok || string(k) == st
		}
		if !ok {
			s.plainError(w, http.StatusBadRequest, "Unknown run status.")
			return
		}
		p.Status = core.RunStatus(st)
	}
	if t := strings.TrimSpace(q.Get("thread")); t != "" {
		th, err := core.ParseThread(t)
		if err != nil {
			s.plainError(w, http.StatusBadRequest, "A thread is written <channel>:<key>, e.g. console:ops.")
			return
		}
		p.Thread = th.String()
	}
	flow, who, ch := strings.TrimSpace(q.Get("flow")), strings.TrimSpace(q.Get("requester")), strings.TrimSpace(q.Get("channel"))
	p.Flow, p.Requester, p.Channel = flow, who, ch
	actor := infoFrom(r.Context()).auth
	if p.Requester == "" {
		p.Requester = s.auth.RunFilter(actor)
	}
	runs, next, err := s.o.Store.RunList(r.Context(), p)
	if err != nil {
		if p.Cursor != "" {
			s.plainError(w, http.StatusBadRequest, "That page link is no longer valid; start from the first page.")
			return
		}
		s.fail(w, r, fmt.Errorf("web: list runs: %w", err))
		return
	}
	if runs, err = s.auth.Viewer(actor).Runs(r.Context(), runs); err != nil {
		s.fail(w, r, fmt.Errorf("web: list runs: %w", err))
		return
	}
	var rows []runRow
	for _, run := range runs {
		rows = append(rows, runRow{ID: run.ID, Flow: run.Flow, Thread: run.Thread.String(), Requester: run.Requester,
			Status: string(run.Status), Reason: run.Reason, CreatedAt: ts(run.CreatedAt), UpdatedAt: ts(run.UpdatedAt)})
	}
	ids := make([]string, len(rows))
	for i := range rows {
		ids[i] = rows[i].ID
	}
	short := pageShortIDs(ids...)
	for i := range rows {
		rows[i].Short = short[rows[i].ID]
	}
	nextURL := ""
	if next != "" {
		v := url.Values{}
		for k, vs := range q {
			v[k] = vs
		}
		v.Set("cursor", next)
		nextURL = "/runs?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, "runs", map[string]any{"Title": "Runs", "Runs": rows, "Statuses": runStatuses,
		"Status": q.Get("status"), "Thread": q.Get("thread"), "Flow": flow, "Requester": who, "Channel": ch, "Next": nextURL})
}

// runPage is one run's timeline: its steps with folded output, the
// approval of each guarded step (proposed, approved and executed
// arguments, who decided), every run event, and the final status.
func (s *server) runPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	run, err := s.auth.Run(ctx, infoFrom(ctx).auth, authority.SeeRun, r.PathValue("id"))
	if errors.Is(err, core.ErrNotFound) && s.shortRedirect(w, r, shortid.KindRun, r.PathValue("id")) {
		return
	}
	if err != nil {
		s.refused(w, r, err)
		return
	}
	var evs []core.RunEvent
	after := int64(0)
	for range 20 { // at most 2000 events on one page
		page, err := s.o.Store.RunEventList(ctx, run.ID, after, 100)
		if err != nil {
			s.fail(w, r, fmt.Errorf("web: events of run %s: %w", run.ID, err))
			return
		}
		evs = append(evs, page...)
		if len(page) < 100 {
			break
		}
		after = page[len(page)-1].Seq
	}
	as, _, err := s.o.Store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: run.ID, Limit: 200})
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: approvals of run %s: %w", run.ID, err))
		return
	}
	cards := map[string]*cardView{}
	for _, a := range as {
		cards[a.ID] = newCardView(a, run)
	}
	v := newRunView(run, evs, cards, s.o.Now())
	s.render(w, r, http.StatusOK, "run", map[string]any{"Title": "Run " + run.Flow, "Run": v, "Done": r.URL.Query().Get("done")})
}

func (s *server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	info := infoFrom(r.Context())
	if _, err := s.auth.Run(r.Context(), info.auth, authority.Cancel, id); err != nil {
		s.refused(w, r, err)
		return
	}
	_, err := s.o.Engine.Cancel(r.Context(), id, info.actor)
	switch {
	case errors.Is(err, core.ErrConflict):
		s.plainError(w, http.StatusConflict, "That run has already ended.")
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("web: cancel run %s: %w", id, err))
		return
	}
	http.Redirect(w, r, "/runs/"+url.PathEscape(id)+"?done=cancelled", http.StatusSeeOther)
}

// auditPage lists the decision log newest first, filtered by actor, tool,
// kind and run, with the chain's verification state.
func (s *server) auditPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := approvals.AuditListParams{Limit: 100, Actor: strings.TrimSpace(q.Get("actor")), Tool: strings.TrimSpace(q.Get("tool")),
		RunID: strings.TrimSpace(q.Get("run")), Kind: strings.TrimSpace(q.Get("kind")), Newest: true}
	if b := q.Get("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 {
			s.plainError(w, http.StatusBadRequest, "before must be an audit sequence number.")
			return
		}
		p.Before = n
	}
	entries, err := s.o.Store.AuditList(r.Context(), p)
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: list audit: %w", err))
		return
	}
	bad, verr := s.o.Store.AuditVerify(r.Context())
	verify := "intact"
	switch {
	case verr != nil:
		s.log.ErrorContext(r.Context(), "web: audit verify", "err", verr)
		verify = "unknown"
	case bad != 0:
		verify = "broken"
	}
	rows := s.auditRows(r.Context(), entries)
	nextURL := ""
	if len(entries) == p.Limit {
		v := url.Values{"actor": {p.Actor}, "tool": {p.Tool}, "run": {p.RunID}, "kind": {p.Kind},
			"before": {strconv.FormatInt(entries[len(entries)-1].Seq, 10)}}
		nextURL = "/audit?" + v.Encode()
	}
	s.render(w, r, http.StatusOK, "audit", map[string]any{"Title": "Audit", "Entries": rows, "Verify": verify, "BadSeq": bad,
		"ActorQ": p.Actor, "Tool": p.Tool, "Run": p.RunID, "Kind": p.Kind, "Next": nextURL,
		"Kinds": auditFilterKinds, "Export": auditExportQuery(p)})
}

// auditFilterKinds are the kinds the audit page offers as a filter.
var auditFilterKinds = kindStrings(approvals.AuditApprovalRequested, approvals.AuditApprovalDecided,
	approvals.AuditApprovalRefused, approvals.AuditApprovalExpired, approvals.AuditGrantApplied,
	approvals.AuditPolicyDenied, approvals.AuditRunCancelled, approvals.AuditRunInterrupted, approvals.AuditRunRedispatched)

func kindStrings(kinds ...approvals.AuditKind) []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = string(k)
	}
	return out
}

// deliveriesPage lists dead-lettered messages (or another status) with a
// re-queue button on each dead one.
func (s *server) deliveriesPage(w http.ResponseWriter, r *http.Request) {
	st := core.DeliveryStatus(r.URL.Query().Get("status"))
	switch st {
	case "":
		st = core.DeliveryDead
	case core.DeliveryDead, core.DeliveryPending, core.DeliverySent:
	default:
		s.plainError(w, http.StatusBadRequest, "Unknown delivery status.")
		return
	}
	ds, next, err := s.o.Store.OutboxList(r.Context(), core.OutboxListParams{Status: st, Limit: 100, Cursor: r.URL.Query().Get("cursor")})
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: list deliveries: %w", err))
		return
	}
	type row struct {
		ID, Thread, Kind, Text, ApprovalID, RunID, Status, LastError, CreatedAt string
		Attempts                                                                int
		Dead                                                                    bool
	}
	rows := make([]row, 0, len(ds))
	for _, d := range ds {
		rows = append(rows, row{ID: d.ID, Thread: d.Thread.String(), Kind: string(d.Kind), Text: d.Text, ApprovalID: d.ApprovalID,
			RunID: d.RunID, Status: string(d.Status), LastError: d.LastError, CreatedAt: ts(d.CreatedAt), Attempts: d.Attempts,
			Dead: d.Status == core.DeliveryDead})
	}
	nextURL := ""
	if next != "" {
		nextURL = "/deliveries?" + url.Values{"status": {string(st)}, "cursor": {next}}.Encode()
	}
	s.render(w, r, http.StatusOK, "deliveries", map[string]any{"Title": "Deliveries", "Rows": rows, "Status": string(st),
		"Next": nextURL, "Done": r.URL.Query().Get("done")})
}

func (s *server) requeue(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	err := s.o.Store.OutboxRequeue(r.Context(), id, s.o.Now().UTC())
	switch {
	case errors.Is(err, core.ErrConflict):
		s.plainError(w, http.StatusConflict, "That delivery is not dead; only dead deliveries can be re-queued.")
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("web: requeue %s: %w", id, err))
		return
	}
	s.log.InfoContext(r.Context(), "web: delivery requeued", "id", id, "actor", infoFrom(r.Context()).actor.ID)
	http.Redirect(w, r, "/deliveries?done="+url.QueryEscape(id), http.StatusSeeOther)
}

// grantsPage lists the session and forever grants: the active ones, or
// every one with ?status=all.
func (s *server) grantsPage(w http.ResponseWriter, r *http.Request) {
	status := r.URL.Query().Get("status")
	p := approvals.GrantListParams{Limit: 200}
	switch status {
	case "", "active":
		status = "active"
		p.ActiveAt = s.o.Now().UTC()
	case "all":
	default:
		s.plainError(w, http.StatusBadRequest, "Unknown grant status.")
		return
	}
	gs, _, err := s.o.Store.GrantList(r.Context(), p)
	if err != nil {
		s.fail(w, r, fmt.Errorf("web: list grants: %w", err))
		return
	}
	now := s.o.Now().UTC()
	rows := make([]grantRow, 0, len(gs))
	for _, g := range gs {
		rows = append(rows, newGrantRow(g, now))
	}
	s.render(w, r, http.StatusOK, "grants", map[string]any{"Title": "Grants", "Rows": rows, "Status": status,
		"Done": r.URL.Query().Get("done")})
}

// revokeGrant revokes one grant through the engine (audited).
func (s *server) revokeGrant(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	_, err := s.o.Engine.RevokeGrant(r.Context(), id, infoFrom(r.Context()).actor)
	switch {
	case errors.Is(err, approvals.ErrGrantRevoked):
		s.plainError(w, http.StatusConflict, "That grant was already revoked.")
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("web: revoke grant %s: %w", id, err))
		return
	}
	http.Redirect(w, r, "/grants?done="+url.QueryEscape(id), http.StatusSeeOther)
}
