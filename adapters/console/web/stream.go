package web

import (
	"net/http"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/sse"
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
	st, err := sse.New(w)
	if err != nil {
		s.plainError(w, http.StatusInternalServerError, "Streaming is not supported by this server.")
		return
	}
	evWake, cancelEv := s.o.Store.Subscribe(core.TopicEvents)
	defer cancelEv()
	obWake, cancelOb := s.o.Store.Subscribe(core.TopicOutbox)
	defer cancelOb()
	// retry: how long the browser waits before reconnecting.
	if st.Open(2*time.Second) != nil {
		return
	}
	// The tick is the polling fallback, and written, so no heartbeat.
	wait := st.Waiter(sse.WaitOptions{Poll: s.o.StreamTick, MinGap: minGap}, evWake, obWake)
	defer wait.Stop()
	var n int64
	for {
		woken, err := wait.Wait(ctx)
		if err != nil {
			return
		}
		kind := "change"
		if woken == sse.Polled {
			kind = "tick"
			// A session signed out elsewhere ends its open streams too.
			if gone, err := s.sessions.ConsoleSessionRevoked(ctx, infoFrom(ctx).sess.ID, s.o.Now()); err == nil && gone {
				return
			}
		}
		n++
		if st.Event(strconv.FormatInt(n, 10), kind, strconv.AppendInt(nil, n, 10)) != nil {
			return
		}
		st.Flush()
	}
}
