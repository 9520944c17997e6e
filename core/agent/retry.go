package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy bounds how a model turn is retried and how long it may take.
// The providers disable their SDKs' own retries so this is the only policy.
// A model call changes nothing, so retrying one is always safe; deltas of a
// failed attempt are voided with a Delta{Restart: true}.
type RetryPolicy struct {
	// Timeout bounds the whole turn, retries and waits included; 0 means
	// no bound beyond ctx. It becomes ErrTimeout.
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one turn; default 4.
	MaxAttempts int
	// BaseDelay is the first backoff for 5xx, broken streams and
	// unreachable servers, doubled per attempt with jitter; default 500ms.
	BaseDelay time.Duration
	// MaxDelay caps one backoff; default 8s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a server asking
	// for more ends the turn with its 429 (it is never retried early).
	// Default 60s.
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx ends; default a timer. Tests replace it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Defaults of RetryPolicy.
const (
	DefaultMaxAttempts   = 4
	DefaultBaseDelay     = 500 * time.Millisecond
	DefaultMaxDelay      = 8 * time.Second
	DefaultMaxRetryAfter = 60 * time.Second
)

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retrying wraps m with policy p.
func Retrying(m Model, p RetryPolicy) Model { return &retrying{m: m, p: p.withDefaults()} }

type retrying struct {
	m Model
	p RetryPolicy
}

// TakesImages forwards the wrapped model's ImageInput.
func (r *retrying) TakesImages() bool { return TakesImages(r.m) }

func (r *retrying) Stream(ctx context.Context, req *Request, sink Sink) (*Response, error) {
	if r.p.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, r.p.Timeout, errTurnTimeout)
		defer cancel()
	}
	var last *Error
	for attempt := 1; ; attempt++ {
		streamed := false
		attemptSink := func(d Delta) {
			streamed = true
			if sink != nil {
				sink(d)
			}
		}
		resp, err := r.m.Stream(ctx, req, attemptSink)
		if err == nil {
			return resp, nil
		}
		if timedOut(ctx) {
			return nil, r.timeout(last, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // cancelled by the caller: not a model failure
		}
		e := AsError(err)
		if e == nil {
			return nil, err
		}
		last = e
		if !e.Retryable() || attempt >= r.p.MaxAttempts {
			return nil, e
		}
		wait := r.backoff(attempt)
		if e.Kind == ErrRateLimited && e.RetryAfter > 0 {
			if e.RetryAfter > r.p.MaxRetryAfter {
				return nil, e // honoured means not early: give up instead
			}
			wait = e.RetryAfter
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			if e.Kind == ErrRateLimited {
				return nil, e // the turn would end before the server allows a retry
			}
		}
		if err := r.p.Sleep(ctx, wait); err != nil {
			if timedOut(ctx) {
				return nil, r.timeout(last, err)
			}
			return nil, err
		}
		if streamed && sink != nil {
			sink(Delta{Restart: true})
		}
	}
}

var errTurnTimeout = errors.New("turn timeout")

func timedOut(ctx context.Context) bool { return errors.Is(context.Cause(ctx), errTurnTimeout) }

func (r *retrying) timeout(last *Error, err error) *Error {
	e := &Error{Kind: ErrTimeout, Err: err}
	if last != nil {
		e.Model, e.Host = last.Model, last.Host
		e.Message = "after " + last.describe()
	}
	if inner := AsError(err); inner != nil {
		e.Model, e.Host = inner.Model, inner.Host
	}
	return e
}

// backoff is the wait before attempt+1: BaseDelay·2^(attempt-1), capped,
// with up to 25% jitter so replicas do not retry in step.
func (r *retrying) backoff(attempt int) time.Duration {
	d := r.p.BaseDelay << (attempt - 1)
	if d > r.p.MaxDelay || d <= 0 {
		d = r.p.MaxDelay
	}
	return d - time.Duration(rand.Int64N(int64(d)/4+1))
}
