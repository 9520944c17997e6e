package agent

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrorKind classifies a failed model call, so the loop branches on what
// happened rather than on a provider's status codes.
type ErrorKind string

// The kinds of model-call failure.
const (
	// ErrRateLimited is a 429: retried after Retry-After, never earlier.
	ErrRateLimited ErrorKind = "rate_limited"
	// ErrServer is a 5xx, Anthropic's 529 overloaded, or an error event in
	// the middle of a stream: retried with backoff.
	ErrServer ErrorKind = "server"
	// ErrStream is a stream that broke off or could not be decoded: the
	// turn is retried (a model call changes nothing).
	ErrStream ErrorKind = "stream"
	// ErrUnreachable means no HTTP response at all: connection refused,
	// DNS, TLS. Retried a few times, then the turn ends with a message.
	ErrUnreachable ErrorKind = "unreachable"
	// ErrTimeout is the per-turn timeout.
	ErrTimeout ErrorKind = "timeout"
	// ErrAuth is a 401 or 403: the api_key is wrong. Not retried.
	ErrAuth ErrorKind = "auth"
	// ErrRequest is any other 4xx (unknown model, context too long). Not
	// retried.
	ErrRequest ErrorKind = "request"
)

// Error is a failed model call. Message is safe to show in a thread: it
// names the model and the server's host but never the API key (providers
// scrub it) nor the full URL.
type Error struct {
	Kind ErrorKind
	// Model is the configured model's name (models[].name) when known.
	Model string
	// Host is the server the call went to (host[:port] only).
	Host string
	// Status is the HTTP status, 0 when there was none.
	Status int
	// RetryAfter is what the server asked for (Retry-After), 0 if nothing.
	RetryAfter time.Duration
	// Message is the provider's own explanation, scrubbed.
	Message string
	// Err is the underlying error, for errors.Is/As and logs.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("model")
	if e.Model != "" {
		fmt.Fprintf(&b, " %s", e.Model)
	}
	if e.Host != "" {
		fmt.Fprintf(&b, " at %s", e.Host)
	}
	b.WriteString(": ")
	b.WriteString(e.describe())
	return b.String()
}

func (e *Error) describe() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	status := ""
	if e.Status != 0 {
		status = fmt.Sprintf(" (HTTP %d)", e.Status)
	}
	switch e.Kind {
	case ErrRateLimited:
		return "rate limited" + status + suffix(msg)
	case ErrServer:
		return "server error" + status + suffix(msg)
	case ErrStream:
		return "the response stream broke off" + suffix(msg)
	case ErrUnreachable:
		return "unreachable" + suffix(msg)
	case ErrTimeout:
		return "no answer in time" + suffix(msg)
	case ErrAuth:
		return "refused the API key" + status + suffix(msg)
	default:
		return "refused the request" + status + suffix(msg)
	}
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether trying the same call again may succeed.
func (e *Error) Retryable() bool {
	switch e.Kind {
	case ErrRateLimited, ErrServer, ErrStream, ErrUnreachable:
		return true
	}
	return false
}

// ThreadMessage is the sentence the thread gets when a turn ends on this
// error: what failed, in words an operator can act on.
func (e *Error) ThreadMessage() string {
	name := "The model"
	if e.Model != "" {
		name = fmt.Sprintf("The model %q", e.Model)
	}
	where := ""
	if e.Host != "" {
		where = " at " + e.Host
	}
	switch e.Kind {
	case ErrUnreachable:
		return fmt.Sprintf("%s could not be reached%s (%s). The turn ended; check that the model server is running and models[].base_url, then send the message again.", name, where, e.describeShort())
	case ErrTimeout:
		return fmt.Sprintf("%s did not answer in time%s. The turn ended; send the message again, or raise models[].timeout.", name, where)
	case ErrRateLimited:
		return fmt.Sprintf("%s is rate limited%s. The turn ended; send the message again later.", name, where)
	case ErrAuth:
		return fmt.Sprintf("%s refused opsgate's API key%s. The turn ended; check models[].api_key.", name, where)
	case ErrServer, ErrStream:
		return fmt.Sprintf("%s failed%s (%s). The turn ended; send the message again later.", name, where, e.describeShort())
	default:
		return fmt.Sprintf("%s refused the request%s (%s). The turn ended.", name, where, e.describeShort())
	}
}

func (e *Error) describeShort() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Status != 0 {
		if msg == "" {
			return fmt.Sprintf("HTTP %d", e.Status)
		}
		return fmt.Sprintf("HTTP %d: %s", e.Status, msg)
	}
	if msg == "" {
		return string(e.Kind)
	}
	return msg
}

// AsError returns err as an *Error, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Scrub replaces every occurrence of each secret in s with "[redacted]", so
// a server that echoes a key back in an error message cannot put it in a
// thread or a log. Empty secrets are ignored.
func Scrub(s string, secrets ...string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "[redacted]")
		}
	}
	return s
}
