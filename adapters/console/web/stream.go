package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/core"
)

// minGap coalesces bursts of wake-ups (one run writes several events in a
// second) into one refresh of the open page.
const minGap = 150 * time.Millisecond

// events is the page's live feed (Server-Sent Events). It carries no data
// from the store, only "something changed" (event: change) after any commit
// that appends a run event or queues a message, and a periodic tick as a
// fallback for a wake-up missed across replicas; the page then re-reads
// itself, so what it shows always went through the same templates as a
// full page load.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.plainError(w, http.StatusInternalServerError, "Streaming is not supported by this server.")
		return
	}
	evWake, cancelEv := s.o.Store.Subscribe(core.TopicEvents)
	defer cancelEv()
	obWake, cancelOb := s.o.Store.Subscribe(core.TopicOutbox)
	defer cancelOb()
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// retry: how long the browser waits before reconnecting.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil {
		return
	}
	flusher.Flush()
	tick := time.NewTicker(s.o.StreamTick)
	defer tick.Stop()
	var n int64
	for {
		kind := "change"
		select {
		case <-ctx.Done():
			return
		case <-evWake:
		case <-obWake:
		case <-tick.C:
			kind = "tick"
			// A session signed out elsewhere ends its open streams too.
			if gone, err := s.sessions.ConsoleSessionRevoked(ctx, infoFrom(ctx).sess.ID, s.o.Now()); err == nil && gone {
				return
			}
		}
		n++
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %d\n\n", n, kind, n); err != nil {
			return
		}
		flusher.Flush()
		select {
		case <-ctx.Done():
			return
		case <-time.After(minGap):
		}
	}
}
