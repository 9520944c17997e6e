// Package pace holds the token buckets that keep outbound sends inside a
// platform's rate limits: per conversation, per group, per bot account,
// global, and per-route buckets learned from response headers. A send waits
// until every bucket that applies grants it a token; it is never dropped. A
// 429 pauses the bucket it hit for the platform's Retry-After, and nothing is
// granted from it before then.
//
// The platform defaults are not here: each adapter supplies its Spec.
package pace

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// ErrWouldExceedDeadline is returned by Wait when the earliest grant lies
// beyond the context's deadline; no token was taken, so the caller can
// requeue the message and let it go later.
var ErrWouldExceedDeadline = errors.New("pace: grant would come after the context deadline")

// Rate is one bucket's shape: a token every Every, at most Burst saved up.
// "20 per minute" is Rate{Every: 3 * time.Second, Burst: 1}.
type Rate struct {
	Every time.Duration
	Burst int
}

// Spec says which buckets a platform has. A nil entry means the platform
// does not limit at that level.
type Spec struct {
	Conversation *Rate // per chat/channel
	Group        *Rate // per group chat (Telegram groups)
	Account      *Rate // per bot account
	Global       *Rate // across everything this Limiter sends
	// IdleTTL is how long an unused, full bucket is kept before eviction;
	// zero means DefaultIdleTTL.
	IdleTTL time.Duration
}

// Scope names a kind of bucket, for Pause.
type Scope int

const (
	// Conversation buckets are keyed by Keys.Conversation.
	Conversation Scope = iota
	// Group buckets are keyed by Keys.Group.
	Group
	// Account buckets are keyed by Keys.Account.
	Account
	// Global is the single bucket of the Limiter; its key is ignored.
	Global
	// Route buckets are learned from response headers (Discord's
	// X-RateLimit-Bucket) and keyed by Keys.Route.
	Route
)

// String names the scope for logs.
func (s Scope) String() string {
	switch s {
	case Conversation:
		return "conversation"
	case Group:
		return "group"
	case Account:
		return "account"
	case Global:
		return "global"
	case Route:
		return "route"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Keys name the buckets one send draws from; empty keys do not apply.
type Keys struct {
	Conversation string
	Group        string
	Account      string
	Route        string
}

// Clock is the time source, injectable so tests can prove that nothing is
// granted before a pause ends without sleeping.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock replaces the wall clock.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// OnGrant has f called with every grant's instant and keys, under the
// Limiter's lock (f must not call back into it): the exact times a
// Limiter spent tokens at, for checking them against a platform's limits
// without a loaded machine's scheduling in the way.
func OnGrant(f func(at time.Time, k Keys)) Option { return func(l *Limiter) { l.onGrant = f } }

type bucketKey struct {
	scope Scope
	key   string
}

// bucket is one token bucket plus what the platform told us about it.
type bucket struct {
	// lim holds the tokens; nil for pause-only and route buckets. last is
	// the instant of its latest take (or its creation): lim is only ever
	// handed that instant or a later one, since a rate.Limiter handed an
	// earlier time than it last saw takes the tokens it held then as
	// current, which would grant early.
	lim         *rate.Limiter
	every       time.Duration
	last        time.Time
	pausedUntil time.Time
	// route buckets: remaining requests until resetAt, as last observed
	remaining int
	resetAt   time.Time
	lastUsed  time.Time
}

// Limiter paces sends. It is safe for concurrent use. One Limiter serves one
// platform account's sending (one replica owns it at a time), so its counts
// are exact.
type Limiter struct {
	spec  Spec
	clock Clock

	mu        sync.Mutex
	buckets   map[bucketKey]*bucket
	lastSweep time.Time
	// lastGrant is the latest instant a grant was dated (see Handover).
	lastGrant time.Time
	onGrant   func(time.Time, Keys) // tests: observe grants at their exact time
}

// DefaultIdleTTL is short because eviction loses nothing: only a full
// bucket with no pause or reset pending is evicted, and it comes back full.
// The TTL only spares a busy conversation the churn of re-creating its
// bucket, while memory is bounded by the conversations active in the last
// TTL and a half: at 400 new Slack threads a second (about 225 bytes a
// bucket), ten minutes would keep up to 360,000 buckets; one minute keeps
// at most 36,000.
const DefaultIdleTTL = time.Minute

// New builds a Limiter from spec.
func New(spec Spec, opts ...Option) (*Limiter, error) {
	for _, r := range []struct {
		name string
		r    *Rate
	}{{"conversation", spec.Conversation}, {"group", spec.Group}, {"account", spec.Account}, {"global", spec.Global}} {
		if r.r != nil && (r.r.Every <= 0 || r.r.Burst < 1) {
			return nil, fmt.Errorf("pace: %s rate %v per %d: every must be > 0 and burst >= 1", r.name, r.r.Every, r.r.Burst)
		}
	}
	if spec.IdleTTL <= 0 {
		spec.IdleTTL = DefaultIdleTTL
	}
	l := &Limiter{spec: spec, clock: realClock{}, buckets: map[bucketKey]*bucket{}}
	for _, o := range opts {
		o(l)
	}
	l.lastSweep = l.clock.Now()
	return l, nil
}

// maxLateCredit bounds how far before its return Wait may date a grant
// after sleeping for it; see Wait. Go's timers on Linux wait in whole
// milliseconds (epoll), so an idle process's sleep ends up to about 1 ms
// late. 1 ms covers that, while two returns from Wait stay no closer than
// the interval less 1 ms, leaving most of the few milliseconds of network
// jitter a platform's limiter tolerates to the network. (2 ms recovered
// slightly more under load but, against a burst-1 fake with 5 ms slack,
// left too little of it: the odd arrival was refused.)
const maxLateCredit = time.Millisecond

// Wait blocks until every bucket that applies to k grants a token at the same
// moment, then takes one from each. Nothing is held while it sleeps — a
// token taken from one bucket while waiting for another would let the first
// bucket's rate be exceeded or leak its token — so a Wait that fails takes
// nothing. It returns ErrWouldExceedDeadline (wrapped) without waiting when
// the grant would come after ctx's deadline, or ctx's error if ctx ends.
//
// Each bucket is a golang.org/x/time/rate Limiter, and the moment it can
// grant comes from a reservation's DelayFrom, so it is exact. Why not the
// Limiter's own Wait: it cannot wait for several buckets at once without
// holding one's token while waiting for another, and the reservation it
// keeps while sleeping cannot be moved by a 429's pause. A timer fires
// late, though (typically 0.5–2 ms), and a burst-1 bucket that dated each
// grant at the late wake-up would lose that time on every send for good
// (measured: 3–6% of a 30/s limit). So a grant after a sleep is dated at
// the moment it was due, but never more than the
// lateness credit — min(1 ms, 1/8 of the fastest bucket's interval) —
// before Wait returns. The buckets' accounting is exact; actual returns
// from Wait can lie up to that credit closer together than the interval. A
// grant that needed no sleep is dated at once: a caller that comes back
// late (its send took long) has no claim to the time it spent.
func (l *Limiter) Wait(ctx context.Context, k Keys) error {
	slept := false
	for {
		l.mu.Lock()
		now := l.clock.Now()
		at := l.tryTake(now, k, slept)
		l.mu.Unlock()
		if at.IsZero() {
			return nil
		}
		d := at.Sub(now)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
			return fmt.Errorf("pace: wait %v for %+v: %w", d, k, ErrWouldExceedDeadline)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pace: wait for %+v: %w", k, ctx.Err())
		case <-l.clock.After(d):
		}
		slept = true
	}
}

// tryTake takes a token from every applicable bucket if all can grant at now
// and returns the zero time; otherwise it takes nothing and returns the
// earliest time all of them can grant. slept says the caller slept for this
// grant, so it may be dated back by the lateness credit. l.mu is held.
//
// Each bucket is a rate.Limiter, asked when it next holds a whole token by
// a reservation (Reserve, DelayFrom) that is cancelled at once: that moment
// is exact, and the tokens stay where they were. The grant takes a token
// from every bucket at the same instant, the latest of their moments, the
// ends of pauses and route resets — never earlier than any bucket allows.
func (l *Limiter) tryTake(now time.Time, k Keys, slept bool) time.Time {
	l.sweep(now)
	var bs [5]*bucket
	n := 0
	add := func(scope Scope, key string, r *Rate) {
		if b := l.bucket(scope, key, r, now); b != nil {
			bs[n] = b
			n++
		}
	}
	if k.Conversation != "" {
		add(Conversation, k.Conversation, l.spec.Conversation)
	}
	if k.Group != "" {
		add(Group, k.Group, l.spec.Group)
	}
	if k.Account != "" {
		add(Account, k.Account, l.spec.Account)
	}
	add(Global, "", l.spec.Global)
	if k.Route != "" {
		add(Route, k.Route, nil)
	}

	// from: the earliest instant this grant may be dated — now, or after a
	// sleep up to the lateness credit before it; never before a bucket's
	// latest take (see bucket.last).
	credit := maxLateCredit
	for _, b := range bs[:n] {
		if b.lim != nil {
			credit = min(credit, b.every/8)
		}
	}
	from := now
	if slept {
		from = now.Add(-credit)
	}
	for _, b := range bs[:n] {
		if b.lim != nil && b.last.After(from) {
			from = b.last
		}
	}
	// due: the earliest instant from then on that every bucket grants.
	// Tokens only grow while we hold l.mu, so at due every bucket still
	// holds the token it held at its own moment.
	due := from
	later := func(t time.Time) {
		if t.After(due) {
			due = t
		}
	}
	for _, b := range bs[:n] {
		b.lastUsed = now
		later(b.pausedUntil)
		if b.remaining <= 0 {
			later(b.resetAt)
		}
		if b.lim != nil {
			later(b.nextToken())
		}
	}
	if due.After(now) {
		return due
	}
	for _, b := range bs[:n] {
		if b.lim != nil {
			b.take(due)
		}
		if now.Before(b.resetAt) {
			b.remaining--
		}
	}
	if due.After(l.lastGrant) {
		l.lastGrant = due
	}
	if l.onGrant != nil {
		l.onGrant(due, k)
	}
	return time.Time{}
}

// nextToken is the earliest instant at which b holds a whole token: a
// reservation made at b's latest take says how long it would wait
// (DelayFrom), and is cancelled, which gives the token back and leaves the
// Limiter as it was. Asking at the latest take, never at now, is what lets
// concurrent waiters ask in any order: a reservation at now would move the
// Limiter's clock to now, and a grant dated back by the lateness credit
// could then no longer be taken before it.
func (b *bucket) nextToken() time.Time {
	t := b.last
	r := b.lim.ReserveN(t, 1)
	d := r.DelayFrom(t)
	r.CancelAt(t)
	at := t.Add(d)
	// rate.Limiter counts tokens in floating point and truncates the delay
	// to whole nanoseconds: a token due a fraction of a nanosecond after
	// at would be granted a nanosecond early. Never early: check, and
	// round up.
	if d > 0 && b.lim.TokensAt(at) < 1-tokenSlack {
		at = at.Add(time.Nanosecond)
	}
	return at
}

// take spends one token at t (not before b.last), when b holds one then.
func (b *bucket) take(t time.Time) {
	b.lim.ReserveN(t, 1)
	b.last = t
}

// full reports whether b holds all the tokens it can at now.
func (b *bucket) full(now time.Time) bool {
	return !now.Before(b.last) && b.lim.TokensAt(now) >= float64(b.lim.Burst())
}

// tokenSlack is above the rounding noise of rate.Limiter's float token
// count (which drifts by about 1e-16 a grant: 1e-13 after a thousand, 1e-11
// only after a hundred thousand on one bucket without a pause to refill
// it) and below what a nanosecond is worth at any rate faster than one
// token per 100 s (3e-10 tokens at one per 3 s), so comparing against it
// tells a truncated delay from an exact one. A slower bucket may grant a
// nanosecond early; a bucket past that much drift may grant a nanosecond
// late. Neither is anything a platform can measure.
const tokenSlack = 1e-11

// bucket returns the bucket for (scope, key), creating it when the spec has
// a rate for scope; route buckets exist once observed or paused.
func (l *Limiter) bucket(scope Scope, key string, r *Rate, now time.Time) *bucket {
	bk := bucketKey{scope, key}
	if b, ok := l.buckets[bk]; ok {
		return b
	}
	if r == nil {
		return nil
	}
	b := &bucket{lim: rate.NewLimiter(rate.Every(r.Every), r.Burst), every: r.Every, last: now, lastUsed: now}
	l.buckets[bk] = b
	return b
}

// rateFor is the configured rate of scope.
func (l *Limiter) rateFor(scope Scope) *Rate {
	switch scope {
	case Conversation:
		return l.spec.Conversation
	case Group:
		return l.spec.Group
	case Account:
		return l.spec.Account
	case Global:
		return l.spec.Global
	}
	return nil
}

// Pause stops the bucket (scope, key) from granting anything until now+d, as
// a 429's Retry-After demands. A later, shorter pause does not shorten it.
func (l *Limiter) Pause(scope Scope, key string, d time.Duration) {
	if scope == Global {
		key = ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.ensure(scope, key, now)
	if until := now.Add(d); until.After(b.pausedUntil) {
		b.pausedUntil = until
	}
}

// Observe records a route's rate-limit headers (Discord X-RateLimit-Bucket,
// -Remaining, -Reset-After): after remaining more sends the route grants
// nothing until resetAfter has passed.
func (l *Limiter) Observe(routeKey string, remaining int, resetAfter time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	b := l.ensure(Route, routeKey, now)
	b.remaining = remaining
	b.resetAt = now.Add(resetAfter)
}

func (l *Limiter) ensure(scope Scope, key string, now time.Time) *bucket {
	if b := l.bucket(scope, key, l.rateFor(scope), now); b != nil {
		return b
	}
	b := &bucket{lastUsed: now}
	l.buckets[bucketKey{scope, key}] = b
	return b
}

// sweep evicts buckets idle for IdleTTL that hold no state worth keeping: a
// full token bucket, no pause, no pending reset. An evicted bucket comes back
// full, which is exactly what it was. Sweeps run at most every IdleTTL/2, so
// memory stays bounded by the keys active in the last IdleTTL or so.
func (l *Limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.spec.IdleTTL/2 {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.lastUsed) < l.spec.IdleTTL || now.Before(b.pausedUntil) || now.Before(b.resetAt) {
			continue
		}
		if b.lim != nil && !b.full(now) {
			continue
		}
		delete(l.buckets, k)
	}
}

// Len reports how many buckets the Limiter holds (for metrics and tests of
// eviction).
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
