package tools

import (
	"errors"
	"fmt"
)

// ErrTimeout is wrapped by Run and Preview when the tool's own timeout (not
// the caller's context) ended the call, so the engine can report "timed out"
// rather than "cancelled".
var ErrTimeout = errors.New("tool timed out")

// ErrRedirectRefused is wrapped by HTTP.Run when the server redirected to a
// different host: a tool's credentials and idempotency key must only ever go
// to the host the configuration named.
var ErrRedirectRefused = errors.New("redirect to a different host refused")

// ErrTemplate is wrapped by every template parse or render failure (a
// missing key, a bad function argument), so callers can tell a configuration
// or argument problem from a failure of the tool itself.
var ErrTemplate = errors.New("template")

// ExitError reports that an exec tool ran and exited non-zero. The Result
// returned next to it is complete (output, exit code), so the engine can show
// both the failure and what the tool printed.
type ExitError struct {
	// Code is the process exit status; 128+N when killed by signal N.
	Code int
}

// Error implements error.
func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// StatusError reports that an http tool got a non-2xx response. The Result
// returned next to it holds the status and the (capped) response body.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
}

// Error implements error.
func (e *StatusError) Error() string { return fmt.Sprintf("http status %d", e.Code) }
