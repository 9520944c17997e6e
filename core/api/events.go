package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/authority"
)

// eventPage bounds one read of a run's events; a long backlog is sent in
// pages, flushed as it goes.
const eventPage = 100

// sseEvent is the data of every streamed event: the whole stored event, so
// a client learns when it happened without a second request.
type sseEvent struct {
	Seq   int64           `json:"seq"`
	RunID string          `json:"run_id"`
	Type  string          `json:"type"`
	At    string          `json:"at"`
	Data  json.RawMessage `json:"data"`
}

// runEvents streams a run's events as Server-Sent Events:
//
//	id: <seq>
//	event: <type>
//	data: {"seq":…,"run_id":…,"type":…,"at":…,"data":{…}}
//
// It replays events after Last-Event-ID (or ?after=), then waits for new
// ones on the store's wake-up topic with a polling fallback, sends a ": ping"
// comment when idle, and once the run is final and its last event sent,
// sends "event: end" with the final status and closes.
func (s *server) runEvents(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id := r.PathValue("id")
	after, err := lastEventID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Subscribe before the first read so no wake-up between the read and
	// the wait is lost.
	wake, cancel := s.subscribeRun(id)
	defer cancel()
	// An agent run's streamed text comes from the engine on this replica,
	// not the store: text.delta events carry no id, so Last-Event-ID stays
	// the stored stream's, and a reconnect resumes at the committed
	// message (message.committed / agent.message), never mid-delta.
	var deltas <-chan llm.Delta
	if ds, ok := s.o.Engine.(DeltaSource); ok {
		var stop func()
		deltas, stop = ds.Deltas(id)
		defer stop()
	}
	run, err := s.auth.Run(ctx, authFrom(ctx), authority.SeeRun, id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, errf(http.StatusInternalServerError, "internal", "streaming is not supported by this server"))
		return
	}
	// A server-wide WriteTimeout would cut a long-lived stream; lift it for
	// this response (ignored where unsupported).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	poll := time.NewTicker(s.o.PollInterval)
	defer poll.Stop()
	ping := time.NewTicker(s.o.PingInterval)
	defer ping.Stop()
	for {
		// Read the status before the events: a final status and the events
		// that led to it commit together, so once a final status has been
		// seen, the event read that follows it holds the last event.
		final := run.Status.Final()
		// Deltas the model wrote before what is read below are in the
		// channel already (the engine sinks them before it commits the
		// message): send them first, so none is lost behind a wake-up and
		// they come before their message.committed.
		if !drainDeltas(w, id, deltas) {
			return
		}
		flusher.Flush()
		sent, finished, err := s.sendEvents(ctx, w, flusher, id, &after)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "api: run events", "run", id, "err", err)
			}
			return
		}
		if sent > 0 {
			ping.Reset(s.o.PingInterval)
		}
		if final {
			end, _ := json.Marshal(map[string]string{"run_id": id, "status": string(run.Status)})
			fmt.Fprintf(w, "event: end\ndata: %s\n\n", end)
			flusher.Flush()
			return
		}
		// The status is re-read only when it may have become final: after
		// a turn.finished (which commits with the final status) or on the
		// polling fallback (for anything else). A wake-up then costs one
		// query, not two.
		if !finished {
			woken := false
		wait:
			for {
				select {
				case <-ctx.Done():
					return
				case <-wake:
					woken = true
					break wait
				case d := <-deltas:
					// Deltas cost no store read: keep waiting.
					if writeDelta(w, id, d) != nil {
						return
					}
					flusher.Flush()
				case <-poll.C:
					break wait
				case <-ping.C:
					if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
						return
					}
					flusher.Flush()
					woken = true
					break wait
				}
			}
			if woken {
				continue
			}
		}
		if run, err = s.o.Store.RunGet(ctx, id); err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "api: run events: get run", "run", id, "err", err)
			}
			return
		}
	}
}

// writeDelta writes one text.delta frame (no id: a reconnect resumes at the
// committed message, never mid-delta).
func writeDelta(w io.Writer, runID string, d llm.Delta) error {
	b, _ := json.Marshal(map[string]any{"run_id": runID, "text": d.Text, "restart": d.Restart})
	_, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", core.EventTextDelta, b)
	return err
}

// drainDeltas writes the deltas waiting in ch without blocking; false when
// the client is gone.
func drainDeltas(w io.Writer, runID string, ch <-chan llm.Delta) bool {
	for {
		select {
		case d := <-ch:
			if writeDelta(w, runID, d) != nil {
				return false
			}
		default:
			return true
		}
	}
}

// DeltaSource is the optional capability of an Engine that streams an
// agent turn's text as the model writes it (core/engine does).
type DeltaSource interface {
	Deltas(runID string) (<-chan llm.Delta, func())
}

// RunEventSubscriber is the optional capability of a Store that can wake
// the streams of one run only (store/sqlite and store/postgres have it).
// Without it every stream wakes on every events commit and re-reads the
// store; with 100 streams open that is 100 reads per commit, competing
// with the commits themselves.
type RunEventSubscriber interface {
	SubscribeRunEvents(runID string) (ch <-chan struct{}, cancel func())
}

// subscribeRun subscribes to runID's event stream, narrowly when the store
// can.
func (s *server) subscribeRun(runID string) (<-chan struct{}, func()) {
	if rs, ok := s.o.Store.(RunEventSubscriber); ok {
		return rs.SubscribeRunEvents(runID)
	}
	return s.o.Store.Subscribe(core.TopicEvents)
}

// sendEvents writes every stored event after *after, page by page, and
// advances *after past each one sent. finished reports a turn.finished
// among them.
func (s *server) sendEvents(ctx context.Context, w http.ResponseWriter, f http.Flusher, runID string, after *int64) (sent int, finished bool, err error) {
	for {
		evs, err := s.o.Store.RunEventList(ctx, runID, *after, eventPage)
		if err != nil {
			return sent, finished, fmt.Errorf("list events after %d: %w", *after, err)
		}
		for _, ev := range evs {
			if ev.Seq <= *after {
				continue // a store must not, but a replayed duplicate would confuse clients
			}
			if err := writeEvent(w, ev); err != nil {
				return sent, finished, err
			}
			*after = ev.Seq
			sent++
			finished = finished || ev.Type == core.EventTurnFinished
		}
		if len(evs) > 0 {
			f.Flush() // once per page: a flush is a write system call
		}
		if len(evs) < eventPage {
			return sent, finished, nil
		}
	}
}

func writeEvent(w http.ResponseWriter, ev core.RunEvent) error {
	data := json.RawMessage("null")
	if len(ev.Data) > 0 {
		// Compact so the JSON fits on the one data: line SSE allows.
		var buf bytes.Buffer
		if json.Compact(&buf, ev.Data) == nil {
			data = buf.Bytes()
		}
	}
	b, err := json.Marshal(sseEvent{Seq: ev.Seq, RunID: ev.RunID, Type: ev.Type, At: rfc3339(ev.At), Data: data})
	if err != nil {
		return fmt.Errorf("encode event %d: %w", ev.Seq, err)
	}
	// A type is a short dotted name; strip line breaks anyway so a stored
	// value can never inject SSE fields.
	typ := noLineBreaks.Replace(ev.Type)
	if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, typ, b); err != nil {
		return fmt.Errorf("write event %d: %w", ev.Seq, err)
	}
	return nil
}

// lastEventID reads where a client resumes: the Last-Event-ID header a
// reconnecting EventSource sends, else ?after=, else the beginning.
func lastEventID(r *http.Request) (int64, error) {
	v, field := r.Header.Get("Last-Event-ID"), "Last-Event-ID"
	if v == "" {
		v, field = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, invalid(field, "%s must be a non-negative event sequence number, got %q", field, v)
	}
	return n, nil
}

// noLineBreaks strips line breaks from an SSE field value; built once (a
// Replacer is safe for concurrent use).
var noLineBreaks = strings.NewReplacer("\n", "", "\r", "")
