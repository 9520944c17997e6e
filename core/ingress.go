package core

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ErrInvalidInput marks a value from outside that opsgate refuses to keep:
// an identifier (an id, a thread key, an event id, an actor id) that is not
// UTF-8, holds a NUL or another control character, or is longer than
// MaxIdentifier; text that is not UTF-8 or holds a NUL. Postgres cannot
// store either (a TEXT column refuses NUL and invalid UTF-8), and SQLite
// would store what no surface can show, so every edge refuses them — 400,
// or 404 for an id in a path, which names nothing that can exist — and the
// stores refuse them too, so nothing is stored.
var ErrInvalidInput = errors.New("invalid input")

// MaxIdentifier is the longest identifier accepted, in bytes: longer than
// any platform's ids, thread keys or an email Message-ID (RFC 5322 lines
// end at 998), short enough that no key bloats an index.
const MaxIdentifier = 1024

// InputError says which field was refused and why; it matches
// ErrInvalidInput.
type InputError struct {
	Field  string
	Reason string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInvalidInput }

// CheckIdentifier refuses an identifier that is not valid UTF-8, holds a
// control character (NUL, newline, DEL, the C1 range) or is longer than
// MaxIdentifier bytes. Empty is allowed: whether a field is required is
// the caller's rule.
func CheckIdentifier(field, s string) error {
	if len(s) > MaxIdentifier {
		return &InputError{Field: field, Reason: fmt.Sprintf("longer than %d bytes", MaxIdentifier)}
	}
	if !utf8.ValidString(s) {
		return &InputError{Field: field, Reason: "not valid UTF-8"}
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return &InputError{Field: field, Reason: fmt.Sprintf("holds the control character %U", r)}
	}
	return nil
}

// CheckText refuses text that is not valid UTF-8 or holds a NUL; other
// control characters (newlines, tabs) are text.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return &InputError{Field: field, Reason: "not valid UTF-8"}
	}
	if strings.IndexByte(s, 0) >= 0 {
		return &InputError{Field: field, Reason: "holds a NUL character"}
	}
	return nil
}

// Check refuses an event whose identifiers or text opsgate cannot keep
// (CheckIdentifier, CheckText): the channel, the event id, the actor, the
// thread, the text, and what a decision or an answer names. Every edge
// checks what it builds, and the engine checks again before anything is
// stored.
func (ev *ChannelEvent) Check() error {
	ids := []struct{ field, v string }{
		{"channel", ev.Channel}, {"event_id", ev.EventID}, {"actor", ev.Actor.ID},
		{"thread.channel", ev.Thread.Channel}, {"thread", ev.Thread.Key},
	}
	if d := ev.Decision; d != nil {
		ids = append(ids, struct{ field, v string }{"approval_id", d.ApprovalID})
	}
	if a := ev.Answer; a != nil {
		ids = append(ids, struct{ field, v string }{"run_id", a.RunID}, struct{ field, v string }{"action_id", a.ActionID})
	}
	for _, f := range ids {
		if err := CheckIdentifier(f.field, f.v); err != nil {
			return err
		}
	}
	texts := []struct{ field, v string }{{"actor.name", ev.Actor.Name}, {"text", ev.Text}}
	if d := ev.Decision; d != nil {
		texts = append(texts, struct{ field, v string }{"reason", d.Reason})
	}
	for _, f := range texts {
		if err := CheckText(f.field, f.v); err != nil {
			return err
		}
	}
	return nil
}

// ErrStoreUnavailable marks a store error that says the store cannot take
// the request now — its disk is full, it is read-only, it cannot be
// reached — rather than that the request was wrong. Every ingress answers
// it with 503 naming the store; a retry later may succeed.
var ErrStoreUnavailable = errors.New("store unavailable")

// StoreUnavailableError is how a store reports ErrStoreUnavailable: which
// store, why in a few words, and the driver's error.
type StoreUnavailableError struct {
	Store  string // "sqlite", "postgres"
	Reason string // "disk full", "read-only", "unreachable", …
	Err    error
}

func (e *StoreUnavailableError) Error() string {
	return "the " + e.Store + " store is unavailable (" + e.Reason + "): " + e.Err.Error()
}

// Unwrap returns the driver's error.
func (e *StoreUnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStoreUnavailable) true.
func (e *StoreUnavailableError) Is(target error) bool { return target == ErrStoreUnavailable }

// IngressStatus is the HTTP status an edge answers when accepting a
// request failed with err: 400 for input opsgate refuses to keep, 503 while
// the store is unavailable, 500 for anything else. The API, the Agent API,
// MCP, the console, webhooks and every platform's receiver map through it,
// so they answer alike.
func IngressStatus(err error) int {
	switch {
	case errors.Is(err, ErrInvalidInput):
		return http.StatusBadRequest
	case errors.Is(err, ErrStoreUnavailable):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// IngressMessage is what an edge may tell the caller about err alongside
// IngressStatus: which field was refused and why, or which store is
// unavailable and why; "" for anything else (an internal error's details
// are logged, never shown).
func IngressMessage(err error) string {
	var ie *InputError
	if errors.As(err, &ie) {
		return ie.Error()
	}
	var su *StoreUnavailableError
	if errors.As(err, &su) {
		return "the " + su.Store + " store is unavailable (" + su.Reason + "); nothing was recorded, retry later"
	}
	return ""
}

// StoreRetryAfter is the Retry-After, in seconds, an edge sends with a 503
// for an unavailable store.
const StoreRetryAfter = "5"

// CheckRequest refuses a request whose path or query holds what opsgate
// will not take: a path segment CheckIdentifier refuses (after
// percent-decoding: "/api/v1/runs/%00"), a query that does not parse, or a
// query key or value CheckText refuses.
func CheckRequest(r *http.Request) error {
	for seg := range strings.SplitSeq(r.URL.Path, "/") {
		if err := CheckIdentifier("path", seg); err != nil {
			return err
		}
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return &InputError{Field: "query", Reason: "does not parse"}
	}
	for k, vs := range q {
		if err := CheckText("query", k); err != nil {
			return err
		}
		for _, v := range vs {
			if err := CheckText("query", v); err != nil {
				return err
			}
		}
	}
	return nil
}

// GuardRequests answers 400 ({"error": {"code": "invalid_input", …}}, the
// API's shape) to a request CheckRequest refuses, before next sees it: one
// guard in front of every route the server has.
func GuardRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := CheckRequest(r); err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusBadRequest)
			b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "invalid_input", "message": err.Error()}})
			_, _ = w.Write(append(b, '\n'))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CheckJSON refuses a JSON document that is not valid UTF-8 or has a
// string (a key or a value) holding a NUL ("\u0000"): the decoder would
// replace the first silently and keep the second, which no store can hold
// as text. A document that does not parse is the caller's to report; only
// the strings read before the error are checked.
func CheckJSON(data []byte) error {
	if !utf8.Valid(data) {
		return &InputError{Field: "body", Reason: "not valid UTF-8"}
	}
	if !bytes.Contains(data, []byte(`\u0000`)) {
		return nil // no escape could spell a NUL (a raw NUL is not valid JSON)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return &InputError{Field: "body", Reason: "a string holds a NUL character"}
		}
	}
}
