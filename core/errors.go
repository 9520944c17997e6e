package core

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// ErrNotFound is returned by stores and the engine for unknown ids. It is
// approvals.ErrNotFound itself (one sentinel, declared where approvals'
// Store interface can name it), so one errors.Is check covers every lookup.
var ErrNotFound = approvals.ErrNotFound

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

// The refusal codes, each mapped to an HTTP status by HTTPStatus.
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

// HTTPStatus is the one mapping of refusal codes to HTTP statuses, shared by
// the API, the web console and MCP (docs/architecture.md: 409 already decided, 403
// not an approver, 410 expired, 422 invalid arguments). An unknown code is
// 400.
func (c DecisionCode) HTTPStatus() int {
	switch c {
	case DecisionNotFound:
		return http.StatusNotFound
	case DecisionAlreadyDecided, DecisionAlreadyVoted:
		return http.StatusConflict
	case DecisionNotApprover, DecisionSelfApproval, DecisionDenied, DecisionUnverified, DecisionHumanRequired:
		return http.StatusForbidden
	case DecisionExpired:
		return http.StatusGone
	case DecisionInvalidArgs:
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// Refusal returns the decision refusal in err's chain as the *DecisionError
// every surface answers with: a *DecisionError as it is, or the approvals
// package's *approvals.RefusedError converted (the one place its sentinels
// become codes). ok is false for any other error, including a bare
// ErrNotFound: only the caller knows what was not found.
func Refusal(err error) (de *DecisionError, ok bool) {
	if errors.As(err, &de) {
		return de, true
	}
	var re *approvals.RefusedError
	if !errors.As(err, &re) {
		return nil, false
	}
	out := &DecisionError{Message: re.Error()}
	var ve *approvals.ValidationError
	switch {
	case errors.Is(re, approvals.ErrNotFound):
		out.Code = DecisionNotFound
	case errors.Is(re, approvals.ErrAlreadyDecided):
		out.Code, out.At = DecisionAlreadyDecided, re.At
		out.By = strings.Join(re.By, ", ")
		out.Message = "already decided"
		if out.By != "" {
			out.Message += " by " + out.By
		}
		if !re.At.IsZero() {
			out.Message += " at " + re.At.UTC().Format("2006-01-02 15:04:05 UTC")
		}
	case errors.Is(re, approvals.ErrDuplicateApproval):
		// Same 409 family: this approver's answer is already counted, and
		// the call still waits for others.
		out.Code, out.By = DecisionAlreadyVoted, strings.Join(re.By, ", ")
		out.Message = "you already approved this call; it still waits for more approvers (" + re.Detail + ")"
	case errors.Is(re, approvals.ErrExpired):
		out.Code, out.At = DecisionExpired, re.At
		out.Message = "approval expired"
		if !re.At.IsZero() {
			out.Message += " at " + re.At.UTC().Format("2006-01-02 15:04:05 UTC")
		}
	case errors.Is(re, approvals.ErrNotApprover):
		out.Code = DecisionNotApprover
	case errors.Is(re, approvals.ErrSelfApproval):
		out.Code = DecisionSelfApproval
	case errors.Is(re, approvals.ErrHumanRequired):
		out.Code = DecisionHumanRequired
	case errors.Is(re, approvals.ErrDeniedByPolicy):
		out.Code = DecisionDenied
	case errors.As(re, &ve):
		out.Code, out.Field = DecisionInvalidArgs, ve.Field
		out.Message = ve.Error()
	case errors.Is(re, approvals.ErrUnverified):
		out.Code = DecisionUnverified
	case re.Field != "":
		out.Code, out.Field = DecisionInvalidArgs, re.Field
	default:
		out.Code = DecisionBadRequest
	}
	return out, true
}

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
	// Question marks the refusal of an answer to an agent's question
	// rather than of a decision, so its text speaks of a question.
	Question bool
	// Batch marks the refusal of an "Approve all" that was refused for
	// some calls: Message is the account of every call (what was approved,
	// what was refused and why), shown as it is.
	Batch bool
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
