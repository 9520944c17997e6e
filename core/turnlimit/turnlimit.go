// Package turnlimit bounds the Agent API's turns per token: at most Limit
// turns run at once, at most Queue more wait in arrival order, one turn per
// session at a time (docs/agent-api.md, "Concurrency").
//
// It is in-memory on purpose. A queued turn has not started anywhere: it
// lives only as long as the request that waits for it, so there is nothing
// to recover after a restart. Running turns are the engine's, in the store.
package turnlimit

import (
	"context"
	"errors"
	"sync"
)

// Sentinel errors of Enter.
var (
	// ErrQueueFull: Limit turns run and Queue wait already (HTTP 429 queue_full).
	ErrQueueFull = errors.New("turnlimit: queue full")
	// ErrSessionBusy: the session has a turn queued or running (HTTP 409).
	ErrSessionBusy = errors.New("turnlimit: session busy")
)

// Limiter is one token's bound. The zero value is not usable; use New.
type Limiter struct {
	limit, queue int

	mu       sync.Mutex
	running  int
	waiting  []*Ticket // arrival order
	sessions map[string]*Ticket
}

// New returns a limiter running at most limit turns (at least 1) with at
// most queue waiting (at least 0).
func New(limit, queue int) *Limiter {
	return &Limiter{limit: max(limit, 1), queue: max(queue, 0), sessions: map[string]*Ticket{}}
}

// Ticket is one turn's place: admitted (running) or waiting with a
// position. Release it exactly once when the turn ends or is given up;
// further calls do nothing.
type Ticket struct {
	l       *Limiter
	session string

	// guarded by l.mu
	pos      int           // 0 admitted, n ≥ 1 the n-th waiting
	changed  chan struct{} // closed and replaced at every position change
	released bool
}

// Enter takes a place for one turn of session: admitted at once when fewer
// than Limit run, else queued behind those already waiting. It fails with
// ErrSessionBusy while session holds a ticket, and ErrQueueFull when Queue
// turns wait already.
func (l *Limiter) Enter(session string) (*Ticket, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, busy := l.sessions[session]; busy && session != "" {
		return nil, ErrSessionBusy
	}
	t := &Ticket{l: l, session: session, changed: make(chan struct{})}
	switch {
	case l.running < l.limit && len(l.waiting) == 0:
		l.running++
	case len(l.waiting) < l.queue:
		l.waiting = append(l.waiting, t)
		t.pos = len(l.waiting)
	default:
		return nil, ErrQueueFull
	}
	if session != "" {
		l.sessions[session] = t
	}
	return t, nil
}

// Position is 0 once admitted, else the ticket's place in the queue (1 is
// next).
func (t *Ticket) Position() int {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	return t.pos
}

// Changed is closed when the position changes; call Position, then
// Changed again for the next change.
func (t *Ticket) Changed() <-chan struct{} {
	t.l.mu.Lock()
	defer t.l.mu.Unlock()
	return t.changed
}

// Wait blocks until the ticket is admitted, calling moved (if not nil) with
// each new queue position. When ctx ends first the ticket is released and
// ctx's error returned.
func (t *Ticket) Wait(ctx context.Context, moved func(pos int)) error {
	for {
		t.l.mu.Lock()
		pos, ch := t.pos, t.changed
		t.l.mu.Unlock()
		if pos == 0 {
			return nil
		}
		select {
		case <-ch:
			t.l.mu.Lock()
			pos = t.pos
			t.l.mu.Unlock()
			if pos > 0 && moved != nil {
				moved(pos)
			}
		case <-ctx.Done():
			t.Release()
			return ctx.Err()
		}
	}
}

// Release gives the place up: a running turn's slot goes to the first
// waiting turn, a waiting turn leaves the queue and those behind move up.
func (t *Ticket) Release() {
	l := t.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.released {
		return
	}
	t.released = true
	if l.sessions[t.session] == t {
		delete(l.sessions, t.session)
	}
	if t.pos > 0 {
		i := t.pos - 1
		l.waiting = append(l.waiting[:i], l.waiting[i+1:]...)
		t.pos = 0
		l.renumber(i)
		return
	}
	l.running--
	if len(l.waiting) > 0 && l.running < l.limit {
		next := l.waiting[0]
		l.waiting = l.waiting[1:]
		l.running++
		next.move(0)
		l.renumber(0)
	}
}

// renumber gives every waiting ticket from index i on its position; l.mu held.
func (l *Limiter) renumber(from int) {
	for i := from; i < len(l.waiting); i++ {
		l.waiting[i].move(i + 1)
	}
}

// move sets a new position and wakes the ticket's watchers; l.mu held.
func (t *Ticket) move(pos int) {
	if t.pos == pos {
		return
	}
	t.pos = pos
	close(t.changed)
	t.changed = make(chan struct{})
}

// Stats is a snapshot for metrics and tests.
type Stats struct{ Running, Waiting int }

// Stats returns how many turns run and wait now.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Running: l.running, Waiting: len(l.waiting)}
}

// Set holds one Limiter per token, made on first use.
type Set struct {
	mu sync.Mutex
	m  map[string]*Limiter
}

// For returns token's limiter, creating it with limit and queue the first
// time. A token's bound is fixed for the process's life; a changed
// agent_concurrency applies from the next restart.
func (s *Set) For(token string, limit, queue int) *Limiter {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*Limiter{}
	}
	l, ok := s.m[token]
	if !ok {
		l = New(limit, queue)
		s.m[token] = l
	}
	return l
}
