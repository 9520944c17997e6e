package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// ErrorBody is the error object of every failed response (the "error" of
// the README), also core/mcp's structured refusal, so a client reads the
// same code and fields from either surface. Field, By and At are set when
// they help the caller fix or understand the refusal.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	By      string `json:"by,omitempty"`
	At      string `json:"at,omitempty"`
}

// httpError is an error with the status and body the API answers with.
type httpError struct {
	status int
	body   ErrorBody
}

func (e *httpError) Error() string { return e.body.Code + ": " + e.body.Message }

func errf(status int, code, format string, args ...any) *httpError {
	return &httpError{status: status, body: ErrorBody{Code: code, Message: fmt.Sprintf(format, args...)}}
}

func invalid(field, format string, args ...any) *httpError {
	e := errf(http.StatusUnprocessableEntity, "invalid", format, args...)
	e.body.Field = field
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only JSON-safe values are served; this is a programming error.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]ErrorBody{"error": {Code: code, Message: msg}})
}

// fail answers err: an *httpError as it says, a known domain error by its
// meaning, anything else as 500 (logged, never shown to the caller).
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	he := s.classify(err)
	if he.status >= 500 {
		s.log.ErrorContext(r.Context(), "api: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	switch he.status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="opsgate"`)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", core.StoreRetryAfter)
	}
	writeJSON(w, he.status, map[string]ErrorBody{"error": he.body})
}

func (s *server) classify(err error) *httpError {
	var he *httpError
	var mbe *http.MaxBytesError
	var ref *authority.Refusal
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &ref):
		return errf(ref.HTTPStatus(), string(ref.Code), "%s", ref.Message)
	case errors.As(err, &mbe):
		return errf(http.StatusRequestEntityTooLarge, "too_large", "request body exceeds %d bytes", mbe.Limit)
	}
	if body, status, ok := RefusalBody(err); ok {
		// Over HTTP a lost race also names the winner in the message, for
		// clients that only show the message.
		if body.Code == string(core.DecisionAlreadyDecided) && body.By != "" && !strings.Contains(body.Message, body.By) {
			body.Message += " (decided by " + body.By + ")"
		}
		return &httpError{status: status, body: body}
	}
	switch {
	case errors.Is(err, core.ErrNotFound):
		return errf(http.StatusNotFound, "not_found", "not found")
	case errors.Is(err, core.ErrConflict):
		return errf(http.StatusConflict, "conflict", "the resource changed state; reload it")
	case errors.Is(err, core.ErrInvalidInput):
		e := errf(core.IngressStatus(err), "invalid_input", "%s", core.IngressMessage(err))
		var ie *core.InputError
		if errors.As(err, &ie) {
			e.body.Field = ie.Field
		}
		return e
	case errors.Is(err, core.ErrStoreUnavailable):
		return errf(core.IngressStatus(err), "store_unavailable", "%s", core.IngressMessage(err))
	}
	return errf(http.StatusInternalServerError, "internal", "internal error")
}

// RefusalBody maps a decision refusal anywhere in err's chain (as
// core.Refusal finds it) to its error body and HTTP status
// (core.DecisionCode.HTTPStatus). ok is false for any other error. Shared
// with core/mcp so both surfaces refuse alike.
func RefusalBody(err error) (body ErrorBody, status int, ok bool) {
	de, ok := core.Refusal(err)
	if !ok {
		return ErrorBody{}, 0, false
	}
	body = ErrorBody{Code: string(de.Code), Message: de.Message, Field: de.Field, By: de.By}
	if body.Message == "" {
		body.Message = strings.ReplaceAll(string(de.Code), "_", " ")
	}
	if !de.At.IsZero() {
		body.At = rfc3339(de.At)
	}
	return body, de.Code.HTTPStatus(), true
}

// decodeBody reads one JSON object into v: 400 for malformed JSON, trailing
// data or unknown fields, 413 past the body cap, 422 (with the field) for a
// value of the wrong type.
func decodeBody(r *http.Request, v any) error {
	if r.Body == nil {
		return errf(http.StatusBadRequest, "malformed_json", "request body is empty; want a JSON object")
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("api: read body: %w", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return errf(http.StatusBadRequest, "malformed_json", "request body is empty; want a JSON object")
	}
	if err := core.CheckJSON(data); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
			return errf(http.StatusBadRequest, "malformed_json", "malformed JSON: %v", err)
		case errors.As(err, &ute):
			if ute.Field == "" {
				return errf(http.StatusBadRequest, "malformed_json", "want a JSON object, got %s", ute.Value)
			}
			return invalid(ute.Field, "%s: want %s, got %s", ute.Field, ute.Type, ute.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return errf(http.StatusBadRequest, "unknown_field", "%s", strings.TrimPrefix(err.Error(), "json: "))
		default:
			return errf(http.StatusBadRequest, "malformed_json", "malformed JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return errf(http.StatusBadRequest, "malformed_json", "malformed JSON: unexpected data after the object")
	}
	return nil
}

// Query parameters.

func queryLimit(r *http.Request, def, maxLimit int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, invalid("limit", "limit must be a positive integer, got %q", v)
	}
	return min(n, maxLimit), nil
}

func queryInt64(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid(name, "%s must be a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// rfc3339 renders a time as the API promises: RFC 3339 in UTC (with
// the fractional seconds the store kept, so ordering survives).
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func rfc3339Ptr(t *time.Time) *string {
	if t == nil || t.IsZero() {
		return nil
	}
	s := rfc3339(*t)
	return &s
}
