package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
)

// Limits of what a client sends.
const (
	MaxBody   = 64 << 10
	MaxText   = api.MaxMessageText
	MaxKey    = 256
	maxID     = 256
	maxReason = 4 << 10
)

// reqError is a refused request: its status and the API's error body.
type reqError struct {
	status int
	body   api.ErrorBody
}

func (e *reqError) Error() string { return e.body.Code + ": " + e.body.Message }

func bad(status int, code, field, format string, args ...any) *reqError {
	return &reqError{status: status, body: api.ErrorBody{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}}
}

// ingressErr is the answer to a request the sink could not take: 400 for
// input opsgate refuses to keep, 503 while the store is unavailable (see
// core.IngressStatus), 500 otherwise.
func ingressErr(err error) *reqError {
	switch status := core.IngressStatus(err); status {
	case http.StatusBadRequest:
		return bad(status, "invalid_input", "", "%s", core.IngressMessage(err))
	case http.StatusServiceUnavailable:
		return bad(status, "store_unavailable", "", "%s", core.IngressMessage(err))
	}
	return bad(http.StatusInternalServerError, "internal", "", "internal error")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeErr(w http.ResponseWriter, e *reqError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="opsgate"`)
	}
	writeJSON(w, e.status, map[string]api.ErrorBody{"error": e.body})
}

type ctxKey struct{}

type caller struct {
	actor core.Actor
	auth  authority.Actor
}

// authenticate checks the bearer token (the API's tokens) and stores its
// actor, for the authority's gate and the handler.
func (a *Adapter) authenticate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			writeErr(w, bad(http.StatusUnauthorized, "unauthorized", "", "missing or invalid bearer token"))
			return
		}
		actor, auth, ok := a.d.Auth.MatchAuthority(strings.TrimSpace(tok))
		if !ok || a.d.Authority.Accepts(authority.SurfaceLocal, auth) != nil {
			writeErr(w, bad(http.StatusUnauthorized, "unauthorized", "", "missing or invalid bearer token"))
			return
		}
		ctx := authority.WithActor(context.WithValue(r.Context(), ctxKey{}, caller{actor: actor, auth: auth}), auth)
		h(w, r.WithContext(ctx))
	}
}

// refused is an authority refusal in the API's error shape.
func refused(ref *authority.Refusal) *reqError {
	return bad(ref.HTTPStatus(), string(ref.Code), "", "%s", ref.Message)
}

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(ctxKey{}).(caller)
	return c
}

// ParseThread reads a thread as a client names it: "local:<key>" or the
// bare key. A key is 1..256 bytes of one line.
func ParseThread(s string) (core.Thread, error) {
	key := strings.TrimPrefix(strings.TrimSpace(s), Channel+":")
	switch {
	case key == "":
		return core.Thread{}, bad(http.StatusUnprocessableEntity, "invalid", "thread", "thread is required (local:<key>)")
	case len(key) > MaxKey:
		return core.Thread{}, bad(http.StatusUnprocessableEntity, "invalid", "thread", "thread is longer than %d bytes", MaxKey)
	case strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return core.Thread{}, bad(http.StatusUnprocessableEntity, "invalid", "thread", "thread must be one line of printable text")
	}
	return core.Thread{Channel: Channel, Key: key}, nil
}

// decode reads one JSON object strictly: 400 for malformed JSON, trailing
// data or an unknown field (a typo must not be ignored), 413 past MaxBody,
// 422 for a value of the wrong type.
func decode(data []byte, v any) error {
	if len(data) > MaxBody {
		return bad(http.StatusRequestEntityTooLarge, "too_large", "", "request body exceeds %d bytes", MaxBody)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return bad(http.StatusBadRequest, "malformed_json", "", "request body is empty; want a JSON object")
	}
	if err := core.CheckJSON(data); err != nil {
		return ingressErr(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute) && ute.Field != "":
			return bad(http.StatusUnprocessableEntity, "invalid", ute.Field, "%s: want %s, got %s", ute.Field, ute.Type, ute.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return bad(http.StatusBadRequest, "unknown_field", "", "%s", strings.TrimPrefix(err.Error(), "json: "))
		}
		return bad(http.StatusBadRequest, "malformed_json", "", "malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return bad(http.StatusBadRequest, "malformed_json", "", "malformed JSON: unexpected data after the object")
	}
	return nil
}

// Message is the body of POST /local/v1/messages.
type Message struct {
	Thread  string `json:"thread"`
	Text    string `json:"text"`
	EventID string `json:"event_id"`
}

// ParseMessage reads and checks a message body.
func ParseMessage(data []byte) (Message, core.Thread, error) {
	var m Message
	if err := decode(data, &m); err != nil {
		return m, core.Thread{}, err
	}
	th, err := ParseThread(m.Thread)
	if err != nil {
		return m, th, err
	}
	switch {
	case strings.TrimSpace(m.Text) == "":
		return m, th, bad(http.StatusUnprocessableEntity, "invalid", "text", "text is required")
	case len(m.Text) > MaxText:
		return m, th, bad(http.StatusRequestEntityTooLarge, "too_large", "text", "text is %d bytes; the limit is %d", len(m.Text), MaxText)
	case len(m.EventID) > maxID:
		return m, th, bad(http.StatusUnprocessableEntity, "invalid", "event_id", "event_id is longer than %d bytes", maxID)
	}
	return m, th, nil
}

// DecisionBody is the body of POST /local/v1/decisions: a card decided in
// place.
type DecisionBody struct {
	Thread     string         `json:"thread"`
	ApprovalID string         `json:"approval_id"`
	Action     string         `json:"action"`
	Args       map[string]any `json:"args"`
	Reason     string         `json:"reason"`
	Scope      string         `json:"scope"`
	EventID    string         `json:"event_id"`
}

// ParseDecision reads and checks a decision body; whether the actor may
// decide, and whether edited args fit the schema, is the engine's call.
func ParseDecision(data []byte) (DecisionBody, core.Thread, error) {
	var d DecisionBody
	if err := decode(data, &d); err != nil {
		return d, core.Thread{}, err
	}
	th, err := ParseThread(d.Thread)
	if err != nil {
		return d, th, err
	}
	switch approvals.Action(d.Action) {
	case approvals.ActionApprove, approvals.ActionReject, core.ActionApproveAll:
		if d.Args != nil {
			return d, th, bad(http.StatusUnprocessableEntity, "invalid", "args", "args are only accepted with action edit")
		}
	case approvals.ActionEdit:
		if d.Args == nil {
			return d, th, bad(http.StatusUnprocessableEntity, "invalid", "args", "action edit needs args: the complete new arguments object")
		}
	default:
		return d, th, bad(http.StatusUnprocessableEntity, "invalid", "action", "action %q: want approve, reject, edit or approve_all", d.Action)
	}
	switch {
	case d.ApprovalID == "" || len(d.ApprovalID) > maxID:
		return d, th, bad(http.StatusUnprocessableEntity, "invalid", "approval_id", "approval_id is required (at most %d bytes)", maxID)
	case d.Scope != "" && !approvals.Scope(d.Scope).Valid():
		return d, th, bad(http.StatusUnprocessableEntity, "invalid", "scope", "unknown scope %q: want call, session or forever", d.Scope)
	case len(d.Reason) > maxReason:
		return d, th, bad(http.StatusUnprocessableEntity, "invalid", "reason", "reason is longer than %d bytes", maxReason)
	case len(d.EventID) > maxID:
		return d, th, bad(http.StatusUnprocessableEntity, "invalid", "event_id", "event_id is longer than %d bytes", maxID)
	}
	return d, th, nil
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, bad(http.StatusRequestEntityTooLarge, "too_large", "", "request body exceeds %d bytes", MaxBody)
	}
	if err != nil {
		return nil, bad(http.StatusBadRequest, "malformed_json", "", "read body: %v", err)
	}
	return data, nil
}

func eventID(given string) string {
	if given != "" {
		return given
	}
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// MessageReceipt is what POST /local/v1/messages answers.
type MessageReceipt struct {
	EventID   string `json:"event_id"`
	Duplicate bool   `json:"duplicate"`
	RunID     string `json:"run_id,omitempty"`
	// Refused: the actor may not start runs here (channels.local.requesters);
	// the thread got a polite reply.
	Refused bool `json:"refused,omitempty"`
}

func (a *Adapter) postMessage(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r)
	if err != nil {
		writeErr(w, err.(*reqError))
		return
	}
	m, th, err := ParseMessage(data)
	if err != nil {
		writeErr(w, err.(*reqError))
		return
	}
	if ref, ok := core.ParseApproveAll(m.Text); ok && ref != "" {
		// The one text command of every text channel (docs/agents.md):
		// decided like POST /local/v1/decisions with action approve_all.
		a.decide(w, r, th, &core.Decision{ApprovalID: ref, Action: core.ActionApproveAll}, eventID(m.EventID))
		return
	}
	ev := core.ChannelEvent{Channel: Channel, EventID: eventID(m.EventID), Actor: callerOf(r).actor, Thread: th, Text: m.Text,
		ReceivedAt: a.d.Now().UTC()}
	rc, err := a.d.Sink.HandleEvent(r.Context(), ev)
	if err != nil {
		a.d.Logger.ErrorContext(r.Context(), "local: handle message", "thread", th.String(), "err", err)
		writeErr(w, ingressErr(err))
		return
	}
	status := http.StatusOK
	if rc.RunID != "" && !rc.Duplicate {
		status = http.StatusCreated
	}
	writeJSON(w, status, MessageReceipt{EventID: ev.EventID, Duplicate: rc.Duplicate, RunID: rc.RunID, Refused: rc.Refused})
}

// DecisionReceipt is what POST /local/v1/decisions answers.
type DecisionReceipt struct {
	EventID    string `json:"event_id"`
	Duplicate  bool   `json:"duplicate"`
	ApprovalID string `json:"approval_id"`
	RunID      string `json:"run_id,omitempty"`
	Status     string `json:"status"`
}

func (a *Adapter) postDecision(w http.ResponseWriter, r *http.Request) {
	data, err := readBody(w, r)
	if err != nil {
		writeErr(w, err.(*reqError))
		return
	}
	b, th, err := ParseDecision(data)
	if err != nil {
		writeErr(w, err.(*reqError))
		return
	}
	d := &core.Decision{ApprovalID: b.ApprovalID, Action: approvals.Action(b.Action), Args: b.Args, Reason: b.Reason, Scope: approvals.Scope(b.Scope)}
	a.decide(w, r, th, d, eventID(b.EventID))
}

// decide records d, made in thread th, as the caller's decision and
// answers the request with its receipt or refusal.
func (a *Adapter) decide(w http.ResponseWriter, r *http.Request, th core.Thread, d *core.Decision, evID string) {
	c := callerOf(r)
	if _, err := a.d.Authority.Approval(r.Context(), c.auth, authority.Decide, d.ApprovalID); authority.HumanRequired(err) {
		// Refused by the engine, so the attempt is audited like any.
		d.Unverified = fmt.Sprintf("local: token %q has no scope decide (agents and tokens without decide never decide)", c.actor.Name)
	}
	ev := core.ChannelEvent{Channel: Channel, EventID: evID, Actor: c.actor, Thread: th, Decision: d, ReceivedAt: a.d.Now().UTC()}
	rc, err := a.d.Sink.HandleEvent(r.Context(), ev)
	if d.Unverified != "" && (err == nil || isRefusalOrNotFound(err)) {
		writeErr(w, bad(http.StatusForbidden, string(core.DecisionHumanRequired), "",
			"this token may not decide approvals: a person decides, with a token that has scope decide"))
		return
	}
	if err != nil {
		if body, status, ok := api.RefusalBody(err); ok {
			writeErr(w, &reqError{status: status, body: body})
			return
		}
		if errors.Is(err, core.ErrNotFound) {
			writeErr(w, bad(http.StatusNotFound, "not_found", "", "approval %q not found", d.ApprovalID))
			return
		}
		a.d.Logger.ErrorContext(r.Context(), "local: handle decision", "approval", d.ApprovalID, "err", err)
		writeErr(w, ingressErr(err))
		return
	}
	writeJSON(w, http.StatusOK, DecisionReceipt{EventID: ev.EventID, Duplicate: rc.Duplicate, ApprovalID: d.ApprovalID, RunID: rc.RunID,
		Status: rc.ApprovalStatus})
}

func isRefusalOrNotFound(err error) bool {
	_, ok := core.Refusal(err)
	return ok || errors.Is(err, core.ErrNotFound)
}
