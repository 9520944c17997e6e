package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/core"
	llm "github.com/opsgate/opsgate/core/agent"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/sse"
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
	st, err := newStream(w)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if st.Open(0) != nil {
		return
	}

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
		if !drainDeltas(st, id, deltas) {
			return
		}
		st.Flush()
		sent, finished, err := s.sendEvents(ctx, st, id, &after)
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
			_ = st.Send("end", map[string]string{"run_id": id, "status": string(run.Status)})
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
					if writeDelta(st, id, d) != nil {
						return
					}
					st.Flush()
				case <-poll.C:
					break wait
				case <-ping.C:
					if st.Ping() != nil {
						return
					}
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
func writeDelta(st *sse.Stream, runID string, d llm.Delta) error {
	return st.JSON("", core.EventTextDelta, map[string]any{"run_id": runID, "text": d.Text, "restart": d.Restart})
}

// drainDeltas writes the deltas waiting in ch without blocking; false when
// the client is gone.
func drainDeltas(st *sse.Stream, runID string, ch <-chan llm.Delta) bool {
	for {
		select {
		case d := <-ch:
			if writeDelta(st, runID, d) != nil {
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
func (s *server) sendEvents(ctx context.Context, st *sse.Stream, runID string, after *int64) (sent int, finished bool, err error) {
	for {
		evs, err := s.o.Store.RunEventList(ctx, runID, *after, eventPage)
		if err != nil {
			return sent, finished, fmt.Errorf("list events after %d: %w", *after, err)
		}
		for _, ev := range evs {
			if ev.Seq <= *after {
				continue // a store must not, but a replayed duplicate would confuse clients
			}
			if err := writeEvent(st, ev); err != nil {
				return sent, finished, err
			}
			*after = ev.Seq
			sent++
			finished = finished || ev.Type == core.EventTurnFinished
		}
		if len(evs) > 0 {
			st.Flush() // once per page: a flush is a write system call
		}
		if len(evs) < eventPage {
			return sent, finished, nil
		}
	}
}

func writeEvent(st *sse.Stream, ev core.RunEvent) error {
	data := json.RawMessage("null")
	if len(ev.Data) > 0 {
		// Compact so the JSON fits on the one data: line SSE allows.
		var buf bytes.Buffer
		if json.Compact(&buf, ev.Data) == nil {
			data = buf.Bytes()
		}
	}
	err := st.JSON(strconv.FormatInt(ev.Seq, 10), ev.Type, sseEvent{Seq: ev.Seq, RunID: ev.RunID, Type: ev.Type, At: rfc3339(ev.At), Data: data})
	if err != nil {
		return fmt.Errorf("event %d: %w", ev.Seq, err)
	}
	return nil
}

// lastEventID reads where a client resumes: the Last-Event-ID header a
// reconnecting EventSource sends, else ?after=, else the beginning.
func lastEventID(r *http.Request) (int64, error) {
	n, err := sse.LastSeq(r, "after")
	var bad *sse.BadLastEventIDError
	if errors.As(err, &bad) {
		return 0, invalid(bad.Field, "%v", bad)
	}
	return n, err
}

// newStream opens w as an event stream, or says it cannot be one.
func newStream(w http.ResponseWriter) (*sse.Stream, error) {
	st, err := sse.New(w)
	if err != nil {
		return nil, errf(http.StatusInternalServerError, "internal", "%v", err)
	}
	return st, nil
}
