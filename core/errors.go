package core

import (
	"errors"
	"fmt"
	"time"
)

// ErrNotFound is returned by stores and the engine for unknown ids.
var ErrNotFound = errors.New("not found")

// ErrForbidden is returned when the actor is authenticated but may not do
// what it asked (cancel someone else's run, use a token scope it lacks).
var ErrForbidden = errors.New("forbidden")

// ErrNotSupported is returned by an adapter for a capability its platform
// lacks (editing a message, opening a modal). Callers fall back to plain
// text or a new message.
var ErrNotSupported = errors.New("not supported by this channel")

// ErrConflict is returned by a store when a guarded write lost its race: the
// run is no longer held by this owner or not in the expected state.
var ErrConflict = errors.New("conflict: state changed concurrently")

// DecisionCode says why a decision was refused, so every surface can answer
// in its own way (HTTP status, ephemeral message, modal error, mail).
type DecisionCode string

// The refusal codes, each mapped to an HTTP status by the API.
const (
	DecisionNotFound       DecisionCode = "not_found"        // 404
	DecisionAlreadyDecided DecisionCode = "already_decided"  // 409
	DecisionAlreadyVoted   DecisionCode = "already_approved" // 409: your approval counts; quorum not reached yet
	DecisionNotApprover    DecisionCode = "not_approver"     // 403
	DecisionSelfApproval   DecisionCode = "self_approval"    // 403
	DecisionExpired        DecisionCode = "expired"          // 410
	DecisionInvalidArgs    DecisionCode = "invalid_args"     // 422
	DecisionDenied         DecisionCode = "denied_by_policy" // 403
	DecisionBadRequest     DecisionCode = "bad_request"      // 400
	DecisionUnverified     DecisionCode = "unverified"       // 403: the surface could not authenticate the decider
	// DecisionHumanRequired refuses an agent (an "agent:" actor, or a
	// token without scope decide): approvals are decided by humans.
	DecisionHumanRequired DecisionCode = "human_confirmation_required" // 403
)

// DecisionError is a decision the core refused. Nothing changed except the
// audit entry that records the refused attempt.
type DecisionError struct {
	Code    DecisionCode
	Message string
	// By and At name the winning decision for DecisionAlreadyDecided.
	By string
	At time.Time
	// Field names the offending argument for DecisionInvalidArgs, when known.
	Field string
}

func (e *DecisionError) Error() string {
	return fmt.Sprintf("decision refused (%s): %s", e.Code, e.Message)
}

// RateLimitError is returned by an adapter's Send when the platform answered
// 429. The pipeline pauses that bucket for RetryAfter and retries the same
// message after it, never earlier.
type RateLimitError struct {
	RetryAfter time.Duration
	// Scope names the bucket the platform limited ("conversation", "global",
	// or a route key); empty means the conversation.
	Scope string
	Err   error
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limited, retry after %s: %v", e.RetryAfter, e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }

// PermanentError marks a send that will never succeed as it is (bad
// request, unknown channel, message too long): the pipeline dead-letters it
// at once instead of retrying.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }
