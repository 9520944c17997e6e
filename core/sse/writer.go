package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrUnsupported is a ResponseWriter that cannot flush: nothing could be
// streamed through it, so the caller answers with an ordinary error.
var ErrUnsupported = errors.New("streaming is not supported by this server")

// Stream is one text/event-stream response. Its headers go out with the
// first frame (or Start), so a refusal before it is still an ordinary
// error response. Frames are written whole and flushed by the caller
// (Flush), once per batch: a flush is a write system call.
//
// A nil *Stream discards everything: a caller that follows the same work
// with and without a client listening (the Agent API's turns) writes it
// once. A Stream is not safe for concurrent use.
type Stream struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
	frames  int64 // frames written, so a Waiter knows the stream was not idle
}

// New makes w a Stream; ErrUnsupported when w cannot flush.
func New(w http.ResponseWriter) (*Stream, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, ErrUnsupported
	}
	return &Stream{w: w, f: f}, nil
}

// Start sends the stream's headers (once). It lifts a server-wide write
// deadline, which would otherwise cut a long-lived stream (ignored where
// unsupported), and asks proxies (nginx) not to buffer.
func (s *Stream) Start() {
	if s == nil || s.started {
		return
	}
	s.started = true
	_ = http.NewResponseController(s.w).SetWriteDeadline(time.Time{})
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// Started reports whether the headers went out: after that an error can
// only be told inside the stream.
func (s *Stream) Started() bool { return s != nil && s.started }

// Open starts the stream, tells a browser how long to wait before it
// reconnects (retry: in milliseconds; none when zero) and flushes, so the
// client sees the stream open before the first event.
func (s *Stream) Open(retry time.Duration) error {
	if s == nil {
		return nil
	}
	s.Start()
	if retry > 0 {
		if _, err := fmt.Fprintf(s.w, "retry: %d\n\n", retry.Milliseconds()); err != nil {
			return fmt.Errorf("sse: write retry: %w", err)
		}
	}
	s.f.Flush()
	return nil
}

// Event writes one frame, unflushed:
//
//	id: <id>        (when id is not empty)
//	event: <name>   (when name is not empty)
//	data: <data>    (one line per line of data)
//
// Whatever a store holds cannot inject fields: line breaks are dropped
// from the name, and line breaks and NUL (which makes a client ignore the
// id) become "_" in the id.
func (s *Stream) Event(id, name string, data []byte) error {
	if s == nil {
		return nil
	}
	s.Start()
	var b []byte
	if id != "" {
		b = append(b, "id: "...)
		b = append(b, idReplacer.Replace(id)...)
		b = append(b, '\n')
	}
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, nameReplacer.Replace(name)...)
		b = append(b, '\n')
	}
	for _, line := range strings.Split(lineBreaks.Replace(string(data)), "\n") {
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("sse: write %s: %w", name, err)
	}
	s.frames++
	return nil
}

// JSON writes v as one event's data (json.Marshal escapes line breaks,
// so it is always one data line), unflushed.
func (s *Stream) JSON(id, name string, v any) error {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sse: encode %s: %w", name, err)
	}
	return s.Event(id, name, b)
}

// Send writes v as an event without an id and flushes it: for a stream
// whose events are few and each worth seeing at once.
func (s *Stream) Send(name string, v any) error {
	if err := s.JSON("", name, v); err != nil {
		return err
	}
	s.Flush()
	return nil
}

// Flush sends what was written.
func (s *Stream) Flush() {
	if s == nil || !s.started {
		return
	}
	s.f.Flush()
}

// Ping writes and flushes the ": ping" comment that keeps an idle stream
// open through proxies; nothing before the stream started.
func (s *Stream) Ping() error {
	if s == nil || !s.started {
		return nil
	}
	if _, err := fmt.Fprint(s.w, ": ping\n\n"); err != nil {
		return fmt.Errorf("sse: write ping: %w", err)
	}
	s.f.Flush()
	return nil
}

var (
	idReplacer   = strings.NewReplacer("\r", "_", "\n", "_", "\x00", "_")
	nameReplacer = strings.NewReplacer("\r", "", "\n", "")
	lineBreaks   = strings.NewReplacer("\r\n", "\n", "\r", "\n")
)

// LastEventID is where a reconnecting client resumes: the Last-Event-ID
// header an EventSource sends, else the query parameter param (for
// clients that cannot set headers), else "". field names where it came
// from, for an error that says which one was wrong.
func LastEventID(r *http.Request, param string) (value, field string) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return strings.TrimSpace(v), "Last-Event-ID"
	}
	if param != "" {
		if v := r.URL.Query().Get(param); v != "" {
			return strings.TrimSpace(v), param
		}
	}
	return "", ""
}

// LastSeq is LastEventID for streams whose ids are sequence numbers: 0
// when the client starts fresh, ErrBadLastEventID (naming the field) when
// it sent something else than a non-negative number.
func LastSeq(r *http.Request, param string) (int64, error) {
	v, field := LastEventID(r, param)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &BadLastEventIDError{Field: field, Value: v}
	}
	return n, nil
}

// BadLastEventIDError is a resume point that is not a sequence number.
type BadLastEventIDError struct {
	Field, Value string
}

func (e *BadLastEventIDError) Error() string {
	return fmt.Sprintf("%s must be a non-negative event sequence number, got %q", e.Field, e.Value)
}

// WaitOptions pace a Waiter.
type WaitOptions struct {
	// Poll is the fallback pass when no wake-up comes (a wake-up missed
	// across replicas then only delays the stream).
	Poll time.Duration
	// Ping is how long the stream may stay idle before a ": ping"; zero
	// sends none.
	Ping time.Duration
	// MinGap is the shortest time between two returns of Wait: a burst of
	// commits is one pass, not one per commit.
	MinGap time.Duration
}

// Woken says why Wait returned.
type Woken int

const (
	// WakeUp is one of the Waiter's wake-up channels.
	WakeUp Woken = iota
	// Polled is the polling fallback.
	Polled
)

// maxWakes is how many wake-up channels a Waiter selects on (a fixed
// select, no goroutine per stream); the streams have at most three topics.
const maxWakes = 4

// Waiter is how a stream that re-reads its source waits between passes:
// until a wake-up or the polling fallback, at most one pass per MinGap,
// with a heartbeat while idle.
type Waiter struct {
	s      *Stream
	wakes  [maxWakes]<-chan struct{}
	poll   *time.Ticker
	ping   *time.Ticker
	o      WaitOptions
	frames int64
	next   time.Time // no return before this (coalescing)
}

// Waiter waits for s on wakes (at most four; nil ones never fire). Stop
// it when the stream ends.
func (s *Stream) Waiter(o WaitOptions, wakes ...<-chan struct{}) *Waiter {
	if len(wakes) > maxWakes {
		panic(fmt.Sprintf("sse: a Waiter selects on at most %d wake-up channels, got %d", maxWakes, len(wakes)))
	}
	wt := &Waiter{s: s, o: o, poll: time.NewTicker(o.Poll)}
	copy(wt.wakes[:], wakes)
	if o.Ping > 0 {
		wt.ping = time.NewTicker(o.Ping)
	}
	return wt
}

// Stop releases the Waiter's tickers.
func (wt *Waiter) Stop() {
	wt.poll.Stop()
	if wt.ping != nil {
		wt.ping.Stop()
	}
}

// Wait blocks until a wake-up or the polling fallback, no sooner than
// MinGap after it last returned, and pings while it waits for longer than
// Ping since the stream's last frame. It returns ctx's error when the
// client left, or the write error of a ping.
func (wt *Waiter) Wait(ctx context.Context) (Woken, error) {
	if wt.ping != nil && wt.s.frames != wt.frames {
		wt.frames = wt.s.frames
		wt.ping.Reset(wt.o.Ping)
	}
	if d := time.Until(wt.next); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return WakeUp, ctx.Err()
		case <-t.C:
		}
	}
	var ping <-chan time.Time
	if wt.ping != nil {
		ping = wt.ping.C
	}
	woken := WakeUp
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			return WakeUp, ctx.Err()
		case <-wt.wakes[0]:
			waiting = false
		case <-wt.wakes[1]:
			waiting = false
		case <-wt.wakes[2]:
			waiting = false
		case <-wt.wakes[3]:
			waiting = false
		case <-wt.poll.C:
			woken, waiting = Polled, false
		case <-ping:
			if err := wt.s.Ping(); err != nil {
				return WakeUp, err
			}
		}
	}
	if wt.o.MinGap > 0 {
		wt.next = time.Now().Add(wt.o.MinGap)
	}
	return woken, nil
}
