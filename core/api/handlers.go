package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/uuid"

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
