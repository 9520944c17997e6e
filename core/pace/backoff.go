package pace

import (
	"math/rand/v2"
	"time"
)

// BackoffPolicy spaces retries of network errors and 5xx answers: capped
// exponential growth with full jitter, so that many senders failing together
// do not retry in lockstep.
type BackoffPolicy struct {
	Base time.Duration // first ceiling; zero means 500ms
	Cap  time.Duration // largest ceiling; zero means 1 minute
	// Rand returns a uniform value in [0, n); nil uses math/rand/v2.
	// Injectable so tests are deterministic.
	Rand func(n int64) int64
}

// Backoff returns the delay before retry number attempt (0 for the first
// retry): uniform in [0, min(Cap, Base·2^attempt)].
func (p BackoffPolicy) Backoff(attempt int) time.Duration {
	base, ceil := p.Base, p.Cap
	if base <= 0 {
		base = 500 * time.Millisecond
	}
	if ceil <= 0 {
		ceil = time.Minute
	}
	upper := ceil
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 62 && base <= ceil>>min(attempt, 62) {
		upper = min(base<<attempt, ceil)
	}
	rnd := p.Rand
	if rnd == nil {
		rnd = rand.Int64N
	}
	return time.Duration(rnd(int64(upper) + 1))
}
