package slack

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ThreadMemory is durable key/value state shared by every replica (in
// opsgate, core.StateStore). The adapter records in it each thread it has
// posted in, so a follow-up without a mention in a thread started by a
// mention still reaches opsgate after a restart or on another replica —
// the in-memory set alone forgets it.
type ThreadMemory interface {
	// StateGet returns the value under key, or an error matching
	// core.ErrNotFound when there is none.
	StateGet(ctx context.Context, key string) ([]byte, error)
	// StatePut stores value under key, overwriting any previous value.
	StatePut(ctx context.Context, key string, value []byte, now time.Time) error
}

// threadStateKey is the ThreadMemory key saying the bot takes part in the
// thread with key k ("<team>/<channel>/<thread_ts>").
func threadStateKey(k string) string { return "slack:thread:" + k }

// threadMark is the value stored under a threadStateKey: only the key's
// presence matters.
var threadMark = []byte("1")

// knownThread reports whether the bot takes part in the thread with key
// k: the in-memory set first, then the durable memory on a miss. A lookup
// that fails is logged and counted as unknown (the follow-up is ignored,
// as a thread the bot never posted in would be) and is not cached, so the
// next event asks again.
func (a *Adapter) knownThread(ctx context.Context, k string) bool {
	if a.threads.has(k) {
		return true
	}
	if a.memory == nil {
		return false
	}
	_, err := a.memory.StateGet(ctx, threadStateKey(k))
	switch {
	case err == nil:
		a.threads.add(k, true)
		return true
	case errors.Is(err, core.ErrNotFound):
		return false
	default:
		a.log.WarnContext(ctx, "slack: thread memory lookup failed; treating the thread as unknown", "thread", k, "err", err)
		return false
	}
}

// rememberThread records that the bot has posted in the thread with key k:
// in memory, and in the durable memory unless this adapter already wrote it
// there. A failed write is logged, never returned: the message is already
// posted, and failing the send would post it twice. The thread stays known
// to this adapter, and the write is retried on its next post there.
func (a *Adapter) rememberThread(ctx context.Context, k string) {
	if a.memory == nil {
		a.threads.add(k, false)
		return
	}
	if a.threads.durable(k) {
		return
	}
	if err := a.memory.StatePut(ctx, threadStateKey(k), threadMark, a.now()); err != nil {
		a.log.WarnContext(ctx, "slack: thread memory write failed; follow-ups there may be missed after a restart", "thread", k, "err", err)
		a.threads.add(k, false)
		return
	}
	a.threads.add(k, true)
}

// threadSet is a bounded set of thread keys, oldest forgotten first. Each
// key also says whether it is known to be in the durable memory, so a
// thread is written there once per adapter, not on every post.
type threadSet struct {
	mu    sync.Mutex
	max   int
	set   map[string]bool // key → stored durably
	order []string
}

func newThreadSet(max int) *threadSet {
	return &threadSet{max: max, set: make(map[string]bool, 64)}
}

// add inserts key; durable true marks it as stored durably (a later add
// with false does not unmark it).
func (s *threadSet) add(key string, durable bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d, ok := s.set[key]; ok {
		s.set[key] = d || durable
		return
	}
	if len(s.order) >= s.max {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
	s.set[key] = durable
	s.order = append(s.order, key)
}

func (s *threadSet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[key]
	return ok
}

// durable reports whether key is known to be stored durably.
func (s *threadSet) durable(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[key]
}
