package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core/redact"
)

// ModelSpec is one configured model (models[] in the config) in the shape
// the providers take; cmd/opsgate converts config.Model into it.
type ModelSpec struct {
	// Name is models[].name, used in errors and thread messages.
	Name string
	// Provider is "openai" or "anthropic".
	Provider string
	// BaseURL is the server; empty means the provider's public API.
	BaseURL string
	// APIKey may be empty for local servers (Ollama, vLLM, LM Studio).
	APIKey string
	// Model is the provider's model id ("gpt-4.1-mini", "qwen3:8b").
	Model string
	// MaxTokens bounds one turn's output; 0 means the provider default.
	MaxTokens int
	// Timeout bounds one turn, retries included (RetryPolicy.Timeout).
	Timeout time.Duration
	// HTTPClient, when set, makes the calls (tests, proxies); its Timeout
	// should be 0: streams are bounded by the turn's context instead.
	HTTPClient *http.Client
}

// The providers.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// MaxResponseBytes bounds the text and arguments one turn may stream; a
// server that goes on past it gets ErrStream instead of our memory.
const MaxResponseBytes = 4 << 20

// HostOf returns the host[:port] of a base URL, the only part of it that
// may be shown: a URL can carry credentials in its user info or query.
func HostOf(baseURL string) string {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

// ParseRetryAfter reads Retry-After-Ms, then Retry-After (seconds or an
// HTTP date); 0 when neither is usable.
func ParseRetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 || s > 1e6 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// HTTPError classifies an HTTP error status from a model server.
func HTTPError(spec ModelSpec, status int, header http.Header, message string, err error) *Error {
	e := &Error{Model: spec.Name, Host: HostOf(spec.BaseURL), Status: status, Err: err,
		Message: cleanMessage(message, spec.APIKey)}
	switch {
	case status == http.StatusTooManyRequests:
		e.Kind = ErrRateLimited
		e.RetryAfter = ParseRetryAfter(header, time.Now())
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind = ErrAuth
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		e.Kind = ErrServer
		e.RetryAfter = ParseRetryAfter(header, time.Now())
	default:
		e.Kind = ErrRequest
	}
	return e
}

// TransportError classifies an error that is not an HTTP status: a model
// server that cannot be reached (no response) or a stream that broke off
// after the response started. Context errors are returned as they are, for
// the caller to tell cancellation from a timeout.
func TransportError(spec ModelSpec, err error, gotResponse bool) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	e := &Error{Model: spec.Name, Host: HostOf(spec.BaseURL), Err: err}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var tlsErr *tls.RecordHeaderError
	switch {
	case errors.As(err, &dnsErr):
		e.Kind, e.Message = ErrUnreachable, "cannot resolve "+dnsErr.Name
	case errors.As(err, &opErr) && opErr.Op == "dial":
		e.Kind, e.Message = ErrUnreachable, dialProblem(opErr)
	case errors.As(err, &tlsErr):
		e.Kind, e.Message = ErrUnreachable, "TLS handshake failed (is base_url http or https?)"
	case !gotResponse:
		e.Kind, e.Message = ErrUnreachable, cleanMessage(rootMessage(err), spec.APIKey)
	default:
		e.Kind, e.Message = ErrStream, cleanMessage(rootMessage(err), spec.APIKey)
	}
	return e
}

func dialProblem(op *net.OpError) string {
	msg := op.Err.Error()
	switch {
	case strings.Contains(msg, "refused"):
		return "connection refused"
	case strings.Contains(msg, "timeout"), strings.Contains(msg, "timed out"):
		return "connection timed out"
	case strings.Contains(msg, "unreachable"):
		return "network unreachable"
	}
	return msg
}

// rootMessage is the innermost error's text: url.Error's wrapping repeats
// the whole URL, which may carry credentials.
func rootMessage(err error) string {
	for {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
			continue
		}
		return err.Error()
	}
}

// cleanMessage makes a server's message fit for a thread: the key and any
// credential core/redact recognizes masked, one line, bounded.
func cleanMessage(s, apiKey string) string {
	s = Scrub(redact.Text(strings.Join(strings.Fields(s), " ")), apiKey)
	return clipRunes(s, 300)
}

// BodyMessage pulls an explanation out of an error body in the shapes
// OpenAI-compatible servers use — {"error":{"message"}}, {"error":"…"}
// (Ollama), {"message"} (vLLM), {"detail"} — or returns the start of the
// text itself (a proxy's HTML page, plain text).
func BodyMessage(body []byte) string {
	var v map[string]any
	if json.Unmarshal(body, &v) == nil {
		if e, ok := v["error"].(map[string]any); ok {
			if m, ok := e["message"].(string); ok && m != "" {
				return m
			}
		}
		for _, k := range []string{"error", "message", "detail"} {
			if m, ok := v[k].(string); ok && m != "" {
				return m
			}
		}
	}
	text := strings.TrimSpace(string(body))
	if !utf8.ValidString(text) {
		return ""
	}
	return clipRunes(text, 200)
}

// EnsureCallIDs gives every call an id that is unique in the turn: some
// OpenAI-compatible servers send none, or the same one twice, and a result
// must name exactly one call.
func EnsureCallIDs(calls []ToolCall) {
	seen := map[string]bool{}
	for i := range calls {
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = newCallID()
		}
		seen[calls[i].ID] = true
	}
}

func newCallID() string {
	var b [9]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}

// ErrNoFinish is the cause of an ErrStream for a stream that ended without
// the model saying it finished.
var ErrNoFinish = errors.New("the stream ended before the model finished its turn")

// TooLarge is the error for a turn past MaxResponseBytes; not retried (the
// same request would run away again).
func TooLarge(spec ModelSpec) *Error {
	return &Error{Kind: ErrRequest, Model: spec.Name, Host: HostOf(spec.BaseURL),
		Message: fmt.Sprintf("the response is larger than %d bytes", MaxResponseBytes)}
}
