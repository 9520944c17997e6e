package slack

import (
	"context"
	"sync"

	"github.com/opsgate/opsgate/core"
)

// ThreadMemory answers, durably and for every replica (in opsgate,
// core.ThreadStore), whether opsgate takes part in a thread: whether the
// thread holds an event it recorded or a message it queued. The adapter
// asks it on a miss of its in-memory set, so a follow-up without a mention
// in a thread started by a mention still reaches opsgate after a restart
// or on another replica. The answer comes from what the inbox and the
// outbox record anyway: remembering a thread writes nothing (issue 31: a
// write of its own here was one of the ~6 commits of every Slack event).
type ThreadMemory interface {
	// ThreadSeen reports whether thread holds a recorded inbound event or
	// a queued outbound message.
	ThreadSeen(ctx context.Context, thread core.Thread) (bool, error)
}

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
	seen, err := a.memory.ThreadSeen(ctx, core.Thread{Channel: channelName, Key: k})
	switch {
	case err != nil:
		a.log.WarnContext(ctx, "slack: thread memory lookup failed; treating the thread as unknown", "thread", k, "err", err)
		return false
	case seen:
		a.threads.add(k)
	}
	return seen
}

// rememberThread records in memory that the bot has posted in the thread
// with key k. Durably, the thread is already known: the post came from an
// outbox message queued to it (or, for a slash command's root, the
// command's event recorded in it).
func (a *Adapter) rememberThread(k string) { a.threads.add(k) }

// threadSet is a bounded set of thread keys, oldest forgotten first.
type threadSet struct {
	mu    sync.Mutex
	max   int
	set   map[string]struct{}
	order []string
}

func newThreadSet(max int) *threadSet {
	return &threadSet{max: max, set: make(map[string]struct{}, 64)}
}

// add inserts key.
func (s *threadSet) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[key]; ok {
		return
	}
	if len(s.order) >= s.max {
		delete(s.set, s.order[0])
		s.order = s.order[1:]
	}
	s.set[key] = struct{}{}
	s.order = append(s.order, key)
}

func (s *threadSet) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.set[key]
	return ok
}
