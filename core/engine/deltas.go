package engine

import (
	"sync"

	llm "github.com/opsgate/opsgate/core/agent"
)

// deltaHub fans a running turn's streamed text out to the subscribers of
// its run on this replica. Deltas are not stored (a commit per token would
// cost more than the model): the committed agent.message events are the
// durable record, and a subscriber on another replica sees those.
type deltaHub struct {
	mu   sync.Mutex
	subs map[string]map[chan llm.Delta]struct{}
}

// deltaBuffer bounds a subscriber's backlog; a slow one misses deltas
// (never the committed message) rather than slowing the model.
const deltaBuffer = 256

// Deltas subscribes to the streamed text of run's model turns on this
// replica until cancel is called. A Delta with Restart voids the text
// streamed so far (the turn is retried).
func (e *Engine) Deltas(runID string) (<-chan llm.Delta, func()) {
	return e.deltas.subscribe(runID)
}

func (h *deltaHub) subscribe(runID string) (<-chan llm.Delta, func()) {
	ch := make(chan llm.Delta, deltaBuffer)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan llm.Delta]struct{}{}
	}
	if h.subs[runID] == nil {
		h.subs[runID] = map[chan llm.Delta]struct{}{}
	}
	h.subs[runID][ch] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs[runID], ch)
			if len(h.subs[runID]) == 0 {
				delete(h.subs, runID)
			}
			h.mu.Unlock()
		})
	}
}

// sink is the llm.Sink of a run's model call.
func (h *deltaHub) sink(runID string) llm.Sink {
	return func(d llm.Delta) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for ch := range h.subs[runID] {
			select {
			case ch <- d:
			default:
			}
		}
	}
}
