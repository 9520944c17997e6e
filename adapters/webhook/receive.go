package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"text/template"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
)

// SignatureHeader is the request header of the documented POST
// /hooks/{name}: "sha256=<hex HMAC-SHA256(secret, raw body)>". Nothing
// outside the signed body changes what a request does, so a captured
// request replayed with other headers is still the same event.
const SignatureHeader = "X-Opsgate-Signature"

// handleTimeout bounds recording one request. It is detached from the
// request, so a sender hanging up cannot cut a commit in half.
const handleTimeout = 30 * time.Second

// Adapter is the webhook channel: inbound requests from systems that sign
// their bodies, and a Platform whose replies stay in the outbox for the API
// and console to read (there is no platform to answer).
type Adapter struct {
	hooks   map[string]*hook
	maxBody int64
	sink    core.Sink
	log     *slog.Logger
	now     func() time.Time
	// decoy is the key an unknown hook's signature is checked against, so
	// an unknown name costs the same work as a known one with a bad
	// signature and names cannot be probed by timing.
	decoy []byte
	mux   *http.ServeMux
	// platform is the delivery.Platform: its methods (Channel, Send,
	// Format, Pacing, Buckets) are the Adapter's.
	*platform
}

// New validates cfg and returns the adapter.
func New(cfg Config, deps Deps) (*Adapter, error) {
	if deps.Sink == nil {
		return nil, fmt.Errorf("%w: Deps.Sink is required", ErrConfig)
	}
	hooks, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	a := &Adapter{hooks: hooks, maxBody: cfg.MaxBodyBytes, sink: deps.Sink, log: deps.Logger, now: deps.Now,
		decoy: make([]byte, 32), mux: http.NewServeMux(), platform: newPlatform()}
	if a.maxBody <= 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if _, err := rand.Read(a.decoy); err != nil {
		return nil, fmt.Errorf("webhook: decoy key: %w", err)
	}
	a.mux.HandleFunc("POST "+PathPrefix+"{name}", a.serve)
	return a, nil
}

// Routes implements core.HTTPReceiver: Handler under PathPrefix.
func (a *Adapter) Routes() map[string]http.Handler {
	return map[string]http.Handler{PathPrefix: a.Handler()}
}

// Handler serves POST /hooks/{name} (mount at PathPrefix without
// stripping it). The answer is 202 {"event_id","run_id","duplicate"} once
// the request is durably recorded; 401 for an unknown hook or a missing or
// wrong signature (the same body for both, so hook names cannot be probed);
// 413 over the body cap; 400 for malformed JSON or what opsgate cannot keep
// (core.CheckJSON); 422 when the body is well formed but yields no usable
// command; 503 while the store refuses writes and 500 when recording failed
// otherwise (the sender should retry). Nothing is recorded for any refusal.
func (a *Adapter) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, pattern := a.mux.Handler(r); pattern == "" {
			// Answer the mux's own 404/405 in this surface's JSON shape.
			rec := &statusRecorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			if rec.status == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", http.MethodPost)
				writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "use POST")
				return
			}
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint")
			return
		}
		a.mux.ServeHTTP(w, r)
	})
}

// response is the 202 body.
type response struct {
	EventID   string `json:"event_id"`
	RunID     string `json:"run_id"`
	Duplicate bool   `json:"duplicate"`
}

func (a *Adapter) serve(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	// Read the whole body before looking at the name, so every refusal
	// takes the same path whether or not the hook exists.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body exceeds %d bytes", a.maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", "cannot read body")
		return
	}
	h := a.hooks[name]
	key := a.decoy
	if h != nil {
		key = h.secret
	}
	ok := verify(key, body, r.Header.Get(SignatureHeader))
	if h == nil || !ok {
		a.log.WarnContext(r.Context(), "webhook: refused unsigned or unknown hook request", "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "unauthorized", "unknown hook or bad signature")
		return
	}
	ev, err := a.normalize(h, body)
	if err != nil {
		var re *requestError
		if errors.As(err, &re) {
			writeError(w, re.status, re.code, re.msg)
			return
		}
		writeError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), handleTimeout)
	defer cancel()
	rc, err := a.sink.HandleEvent(ctx, ev)
	if err != nil {
		a.log.ErrorContext(ctx, "webhook: record event", "hook", h.name, "event_id", ev.EventID, "err", err)
		switch status := core.IngressStatus(err); status {
		case http.StatusBadRequest:
			writeError(w, status, "invalid_input", core.IngressMessage(err))
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", core.StoreRetryAfter)
			writeError(w, status, "store_unavailable", core.IngressMessage(err))
		default:
			writeError(w, http.StatusInternalServerError, "internal", "could not record the request; retry")
		}
		return
	}
	writeJSON(w, http.StatusAccepted, response{EventID: ev.EventID, RunID: rc.RunID, Duplicate: rc.Duplicate})
}

// verify checks header = "sha256=<hex HMAC-SHA256(key, body)>" in constant
// time. The MAC is always computed, so a malformed header costs as much as
// a wrong one.
func verify(key, body []byte, header string) bool {
	mac := hmac.New(sha256.New, key)
	mac.Write(body)
	want := mac.Sum(nil)
	hexSig, found := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
	got, err := hex.DecodeString(hexSig)
	if !found || err != nil {
		got = nil
	}
	return hmac.Equal(want, got)
}

// Sign returns the X-Opsgate-Signature value for body: senders written in
// Go (and tests) sign with it.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// requestError is a refusal of a verified request, with its HTTP status.
type requestError struct {
	status    int
	code, msg string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{status: http.StatusBadRequest, code: "bad_request", msg: fmt.Sprintf(format, args...)}
}

func invalid(format string, args ...any) error {
	return &requestError{status: http.StatusUnprocessableEntity, code: "invalid", msg: fmt.Sprintf(format, args...)}
}

// normalize turns a verified body into the event the engine records.
func (a *Adapter) normalize(h *hook, body []byte) (core.ChannelEvent, error) {
	if err := core.CheckJSON(body); err != nil {
		return core.ChannelEvent{}, &requestError{status: http.StatusBadRequest, code: "invalid_input", msg: err.Error()}
	}
	doc, err := decodeObject(body)
	if err != nil {
		return core.ChannelEvent{}, err
	}
	text, err := requestText(h, doc)
	if err != nil {
		return core.ChannelEvent{}, err
	}
	thread := h.name
	if h.thread != nil {
		if thread, err = render(h.thread, doc); err != nil {
			return core.ChannelEvent{}, invalid("thread template: %v", err)
		}
		thread = strings.TrimSpace(thread)
		if err := checkThread(thread); err != nil {
			return core.ChannelEvent{}, err
		}
	}
	id, err := eventID(body, doc)
	if err != nil {
		return core.ChannelEvent{}, err
	}
	return core.ChannelEvent{
		Channel:    Channel,
		EventID:    h.name + "/" + id,
		Actor:      core.Actor{ID: Channel + ":" + h.name, Name: h.name},
		Thread:     core.Thread{Channel: Channel, Key: h.name + "/" + thread},
		Text:       text,
		Raw:        json.RawMessage(body),
		ReceivedAt: a.now().UTC(),
	}, nil
}

// decodeObject parses body as one JSON object. Numbers stay json.Number,
// so a template prints "1234567" rather than "1.234567e+06".
func decodeObject(body []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("malformed JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("malformed JSON: data after the object")
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("body must be a JSON object")
	}
	return doc, nil
}

// requestText is the command line: the rendered Text template, or the
// body's "text" field.
func requestText(h *hook, doc map[string]any) (string, error) {
	var text string
	if h.text != nil {
		var err error
		if text, err = render(h.text, doc); err != nil {
			return "", invalid("text template: %v", err)
		}
	} else {
		s, ok := doc["text"].(string)
		if !ok {
			return "", invalid(`body needs a string "text" field (or configure a text template for this hook)`)
		}
		text = s
	}
	text = strings.TrimSpace(text)
	switch {
	case text == "":
		return "", invalid("text is empty")
	case len(text) > MaxText:
		return "", invalid("text is %d bytes; the limit is %d", len(text), MaxText)
	case !utf8.ValidString(text):
		return "", invalid("text is not valid UTF-8")
	}
	return text, nil
}

// render executes t over doc, capped so a template ranging over a large
// body cannot build an unbounded string.
func render(t *template.Template, doc map[string]any) (string, error) {
	var b cappedBuffer
	if err := t.Execute(&b, doc); err != nil {
		return "", err
	}
	return b.String(), nil
}

// checkThread keeps the thread part of the key printable and short: it
// ends up in thread addresses, URLs and logs.
func checkThread(s string) error {
	if s == "" {
		return invalid("thread template rendered empty")
	}
	if len(s) > MaxThread {
		return invalid("thread is %d bytes; the limit is %d", len(s), MaxThread)
	}
	if !utf8.ValidString(s) || strings.ContainsFunc(s, unicode.IsControl) {
		return invalid("thread contains control characters or invalid UTF-8")
	}
	return nil
}

// eventID is the dedup key: the body's own "event_id" when it has one
// (inside the signature, so a sender can send the same command twice on
// purpose), else the body's SHA-256, so a signed body replayed is a
// duplicate and starts nothing.
func eventID(body []byte, doc map[string]any) (string, error) {
	if v, ok := doc["event_id"]; ok {
		id, isString := v.(string)
		id = strings.TrimSpace(id)
		if !isString || id == "" || len(id) > MaxDeliveryID || !utf8.ValidString(id) || strings.ContainsFunc(id, unicode.IsControl) {
			return "", invalid("event_id must be a string of 1 to %d printable bytes", MaxDeliveryID)
		}
		return id, nil
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:]), nil
}

// cappedBuffer fails writes past MaxText*4 bytes.
type cappedBuffer struct{ bytes.Buffer }

var errTooLong = errors.New("rendered text too long")

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > 4*MaxText {
		return 0, errTooLong
	}
	return b.Buffer.Write(p)
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// writeError answers in the API's error shape.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// statusRecorder captures what the mux's fallback handlers write.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
