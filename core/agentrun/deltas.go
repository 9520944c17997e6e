package agentrun

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
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
func (l *Loop) Deltas(runID string) (<-chan llm.Delta, func()) {
	return l.deltas.subscribe(runID)
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

// streamInterval is the least time between two edits of a streamed message.
const streamInterval = time.Second

// streamer queues a turn's text into the thread as KindStream outbox
// messages, at most one per streamInterval, while the model call runs.
type streamer struct {
	l    *Loop
	run  *core.Run
	mu   sync.Mutex
	text strings.Builder
	// sent is the text last queued; queued reports whether any was.
	sent   string
	queued bool
	// first is the outbox id of the segment's first streamed message:
	// every KindStream of the segment and the message that ends it name it
	// in Replaces, so they edit that message. A turn that ends in tool
	// calls ends its segment (its text stays in the thread as said), and
	// the next turn streams into a new message.
	first string
}

// add is the llm.Sink part: it only collects.
func (s *streamer) add(d llm.Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.Restart {
		s.text.Reset()
	}
	s.text.WriteString(d.Text)
}

// run queues the text every streamInterval until stop is closed.
func (s *streamer) loop(ctx context.Context, stop <-chan struct{}) {
	t := time.NewTicker(streamInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
			s.flush(ctx)
		}
	}
}

// flush queues the text collected so far, if it changed, under the run's
// lease (an execution that lost its run queues nothing).
func (s *streamer) flush(ctx context.Context) {
	s.mu.Lock()
	text := strings.TrimSpace(s.text.String())
	if text == "" || text == s.sent {
		s.mu.Unlock()
		return
	}
	first := s.first
	s.mu.Unlock()
	l := s.l
	now := l.now()
	id := l.opts.NewID()
	if first == "" {
		first = id // the segment's first message names itself: it edits nothing
	}
	err := l.opts.Store.RunCheckpoint(ctx, core.Checkpoint{RunID: s.run.ID, Owner: l.opts.Owner, Now: now,
		Outbox: []core.OutboxMessage{{ID: id, Thread: s.run.Thread, Kind: core.KindStream, Text: text + " …", RunID: s.run.ID, Replaces: first, CreatedAt: now}}})
	if err != nil {
		return // best effort: the final answer is sent anyway
	}
	s.mu.Lock()
	s.sent, s.queued, s.first = text, true, first
	s.mu.Unlock()
}

// segment returns the outbox id of the streamed message of the current
// segment, or "" when none was queued.
func (s *streamer) segment() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.queued {
		return ""
	}
	return s.first
}

// next starts a new segment: the next text streams into a new message.
func (s *streamer) next() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.text.Reset()
	s.sent, s.queued, s.first = "", false, ""
}
