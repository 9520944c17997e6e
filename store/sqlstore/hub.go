package sqlstore

import "sync"

// Hub fans wake-ups out to in-process subscribers. Each subscriber has a
// channel with a buffer of one: a wake-up that finds the buffer full is
// dropped, because the subscriber has not yet looked and will see the new
// state anyway. Senders therefore never block.
type Hub struct {
	mu     sync.Mutex
	subs   map[string]map[*subscription]struct{}
	closed bool
}

type subscription struct{ ch chan struct{} }

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[string]map[*subscription]struct{}{}} }

// Subscribe registers for topic. cancel is idempotent; it does not close the
// channel, so a receiver racing with cancel never sees a spurious wake-up.
func (h *Hub) Subscribe(topic string) (<-chan struct{}, func()) {
	s := &subscription{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	if !h.closed {
		if h.subs[topic] == nil {
			h.subs[topic] = map[*subscription]struct{}{}
		}
		h.subs[topic][s] = struct{}{}
	}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[topic], s)
			if len(h.subs[topic]) == 0 {
				// Per-run topics come and go with their streams.
				delete(h.subs, topic)
			}
			h.mu.Unlock()
		})
	}
}

// Broadcast wakes every subscriber of topic without blocking.
func (h *Hub) Broadcast(topic string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[topic] {
		select {
		case s.ch <- struct{}{}:
		default:
		}
	}
}

// Close drops every subscription; later Subscribe calls get a channel that
// is never woken, so callers fall back to polling until they stop.
func (h *Hub) Close() {
	h.mu.Lock()
	h.subs = map[string]map[*subscription]struct{}{}
	h.closed = true
	h.mu.Unlock()
}

// BroadcastAll wakes every subscriber of every topic, for when wake-ups may
// have been lost (a dropped notification connection).
func (h *Hub) BroadcastAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, subs := range h.subs {
		for s := range subs {
			select {
			case s.ch <- struct{}{}:
			default:
			}
		}
	}
}
