package pace

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Handover is what a Limiter's owner leaves the next owner of the same
// account's sending (another replica taking the send lease over), so that
// together they keep the platform's limits as one Limiter would: when this
// one last granted a send — after the slowest bucket's Refill from then,
// every bucket it drew from is full again, exactly as a fresh Limiter's
// are — and the pauses a platform's 429 imposed that are still running.
type Handover struct {
	LastGrant time.Time `json:"last_grant,omitzero"`
	Pauses    []Paused  `json:"pauses,omitempty"`
}

// Paused is one bucket a 429 paused, and until when.
type Paused struct {
	Scope Scope     `json:"scope"`
	Key   string    `json:"key,omitempty"`
	Until time.Time `json:"until"`
}

// MaxHandoverPauses bounds Handover.Pauses: past it the pauses ending
// soonest are folded into one Global pause until the latest of them, which
// holds back more than the platform asked and never less.
const MaxHandoverPauses = 256

// Refill is how long the slowest bucket of the spec takes to fill from
// empty: a Limiter that granted nothing for that long is as full as a new
// one.
func (s Spec) Refill() time.Duration {
	var d time.Duration
	for _, r := range []*Rate{s.Conversation, s.Group, s.Account, s.Global} {
		if r != nil {
			d = max(d, r.Every*time.Duration(r.Burst))
		}
	}
	return d
}

// Handover reports this Limiter's latest grant and its pauses still
// running at now.
func (l *Limiter) Handover() Handover {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	h := Handover{LastGrant: l.lastGrant}
	for k, b := range l.buckets {
		if b.pausedUntil.After(now) {
			h.Pauses = append(h.Pauses, Paused{Scope: k.scope, Key: k.key, Until: b.pausedUntil})
		}
	}
	if len(h.Pauses) > MaxHandoverPauses {
		slices.SortFunc(h.Pauses, func(a, b Paused) int { return b.Until.Compare(a.Until) })
		latest := h.Pauses[MaxHandoverPauses-1].Until
		h.Pauses = append(h.Pauses[:MaxHandoverPauses-1], Paused{Scope: Global, Until: latest})
	}
	slices.SortFunc(h.Pauses, func(a, b Paused) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Key, b.Key))
	})
	return h
}

// TakeOver applies what the previous owner left: its pauses, and a hold on
// every grant until quiet (a time the caller derives from h.LastGrant and
// Refill, or later when it knows less). Pauses already over change nothing;
// none shortens a pause this Limiter already has.
func (l *Limiter) TakeOver(h Handover, quiet time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	pause := func(scope Scope, key string, until time.Time) {
		if !until.After(now) {
			return
		}
		if scope == Global {
			key = ""
		}
		b := l.ensure(scope, key, now)
		if until.After(b.pausedUntil) {
			b.pausedUntil = until
		}
	}
	for _, p := range h.Pauses {
		pause(p.Scope, p.Key, p.Until)
	}
	pause(Global, "", quiet)
	if h.LastGrant.After(l.lastGrant) {
		l.lastGrant = h.LastGrant
	}
}

// MarshalText names the scope, so a stored Handover reads the same after
// the constants are reordered.
func (s Scope) MarshalText() ([]byte, error) {
	if s < Conversation || s > Route {
		return nil, fmt.Errorf("pace: unknown scope %d", int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText is MarshalText's inverse.
func (s *Scope) UnmarshalText(b []byte) error {
	for c := Conversation; c <= Route; c++ {
		if c.String() == string(b) {
			*s = c
			return nil
		}
	}
	return fmt.Errorf("pace: unknown scope %q", b)
}
