package sse

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an http.ResponseWriter that can flush and tells each write
// to whoever waits for it.
type recorder struct {
	mu      sync.Mutex
	h       http.Header
	status  int
	buf     bytes.Buffer
	flushes int
	wrote   chan string
	fail    error
}

func newRecorder() *recorder {
	return &recorder{h: http.Header{}, wrote: make(chan string, 100)}
}

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = code
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.buf.Write(b)
	select {
	case r.wrote <- string(b):
	default:
	}
	return len(b), nil
}

func (r *recorder) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushes++
}

func (r *recorder) body() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// noFlush is a ResponseWriter without http.Flusher.
type noFlush struct{ http.ResponseWriter }

func TestStream(t *testing.T) {
	t.Parallel()
	t.Run("FramesAreTheWireFormat", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		st, err := New(rec)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Open(2 * time.Second); err != nil {
			t.Fatal(err)
		}
		_ = st.Event("7", "approval", []byte(`{"a":1}`))
		_ = st.Event("", "ready", []byte("{}"))
		_ = st.JSON("8", "run", map[string]string{"x": "a\nb"})
		_ = st.Send("end", map[string]int{"n": 1})
		_ = st.Ping()
		want := "retry: 2000\n\n" +
			"id: 7\nevent: approval\ndata: {\"a\":1}\n\n" +
			"event: ready\ndata: {}\n\n" +
			"id: 8\nevent: run\ndata: {\"x\":\"a\\nb\"}\n\n" +
			"event: end\ndata: {\"n\":1}\n\n" +
			": ping\n\n"
		if got := rec.body(); got != want {
			t.Fatalf("wrote\n%q\nwant\n%q", got, want)
		}
		for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-store", "X-Accel-Buffering": "no"} {
			if got := rec.h.Get(k); got != v {
				t.Errorf("%s = %q, want %q", k, got, v)
			}
		}
		if rec.status != http.StatusOK || rec.flushes != 3 {
			t.Fatalf("status %d, %d flushes (want 200, 3: open, send, ping)", rec.status, rec.flushes)
		}
	})
	t.Run("StoredValuesCannotInjectFields", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		st, _ := New(rec)
		_ = st.Event("1\nevent: forged\x00", "run\r\ndata: forged", []byte("a\r\nid: 9\rb\nc"))
		want := "id: 1_event: forged_\nevent: rundata: forged\ndata: a\ndata: id: 9\ndata: b\ndata: c\n\n"
		if got := rec.body(); got != want {
			t.Fatalf("wrote %q, want %q", got, want)
		}
		evs, err := readAll(t, rec.body())
		if err != nil || len(evs) != 1 || evs[0].ID != "1_event: forged_" || evs[0].Type != "rundata: forged" || string(evs[0].Data) != "a\nid: 9\nb\nc" {
			t.Fatalf("read back %v, %v", evs, err)
		}
	})
	t.Run("HeadersWaitForTheFirstFrame", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		st, _ := New(rec)
		if st.Started() || st.Ping() != nil || rec.body() != "" || rec.status != 0 {
			t.Fatal("a stream wrote before its first frame")
		}
		st.Flush()
		if rec.flushes != 0 {
			t.Fatal("flushed before the headers went out")
		}
		_ = st.Send("run.queued", map[string]int{"position": 0})
		if !st.Started() || rec.status != http.StatusOK || rec.h.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("after the first frame: started %v, status %d, %v", st.Started(), rec.status, rec.h)
		}
	})
	t.Run("NilStreamDiscards", func(t *testing.T) {
		t.Parallel()
		var st *Stream
		st.Start()
		st.Flush()
		if st.Started() || st.Open(time.Second) != nil || st.Event("1", "a", nil) != nil || st.JSON("", "a", 1) != nil || st.Send("a", 1) != nil || st.Ping() != nil {
			t.Fatal("a nil stream did something")
		}
	})
	t.Run("UnflushableWriterIsRefused", func(t *testing.T) {
		t.Parallel()
		if _, err := New(noFlush{httptest.NewRecorder()}); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("got %v, want ErrUnsupported", err)
		}
	})
	t.Run("WriteErrorsAreReturned", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		st, _ := New(rec)
		_ = st.Open(0)
		rec.fail = errors.New("client gone")
		if err := st.Event("1", "a", []byte("x")); err == nil || !strings.Contains(err.Error(), "client gone") {
			t.Fatalf("event: %v", err)
		}
		if err := st.Ping(); err == nil {
			t.Fatal("ping to a gone client: no error")
		}
		if err := st.JSON("", "a", func() {}); err == nil {
			t.Fatal("unencodable data: no error")
		}
	})
}

func TestLastSeq(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, header, query string
		want                int64
		field               string // of the error, "" for none
	}{
		{"Fresh", "", "", 0, ""},
		{"Header", "42", "", 42, ""},
		{"HeaderWinsOverQuery", "42", "7", 42, ""},
		{"Query", "", "7", 7, ""},
		{"SpacesTrimmed", " 5 ", "", 5, ""},
		{"NegativeHeader", "-1", "", 0, "Last-Event-ID"},
		{"WordInQuery", "", "abc", 0, "after"},
		{"Overflow", "99999999999999999999", "", 0, "Last-Event-ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/events?after="+tc.query, nil)
			if tc.header != "" {
				r.Header.Set("Last-Event-ID", tc.header)
			}
			n, err := LastSeq(r, "after")
			var bad *BadLastEventIDError
			switch {
			case tc.field == "" && (err != nil || n != tc.want):
				t.Fatalf("got %d, %v; want %d", n, err, tc.want)
			case tc.field != "" && (!errors.As(err, &bad) || bad.Field != tc.field):
				t.Fatalf("got %d, %v; want an error naming %s", n, err, tc.field)
			}
		})
	}
}

func TestWaiter(t *testing.T) {
	t.Parallel()
	open := func(t *testing.T) (*recorder, *Stream) {
		rec := newRecorder()
		st, _ := New(rec)
		if err := st.Open(0); err != nil {
			t.Fatal(err)
		}
		return rec, st
	}
	t.Run("WakeUpReturns", func(t *testing.T) {
		t.Parallel()
		_, st := open(t)
		wake := make(chan struct{}, 1)
		wt := st.Waiter(WaitOptions{Poll: time.Hour}, nil, nil, wake)
		defer wt.Stop()
		wake <- struct{}{}
		if w, err := wt.Wait(t.Context()); w != WakeUp || err != nil {
			t.Fatalf("got %v, %v", w, err)
		}
	})
	t.Run("PollReturnsPolled", func(t *testing.T) {
		t.Parallel()
		_, st := open(t)
		wt := st.Waiter(WaitOptions{Poll: time.Millisecond})
		defer wt.Stop()
		if w, err := wt.Wait(t.Context()); w != Polled || err != nil {
			t.Fatalf("got %v, %v", w, err)
		}
	})
	t.Run("PingsWhileIdleThenWakes", func(t *testing.T) {
		t.Parallel()
		rec, st := open(t)
		wake := make(chan struct{}, 1)
		wt := st.Waiter(WaitOptions{Poll: time.Hour, Ping: time.Millisecond}, wake)
		defer wt.Stop()
		done := make(chan error, 1)
		go func() {
			_, err := wt.Wait(t.Context())
			done <- err
		}()
		for w := range rec.wrote {
			if w == ": ping\n\n" {
				break
			}
		}
		wake <- struct{}{}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	t.Run("NoPingWithoutPingInterval", func(t *testing.T) {
		t.Parallel()
		rec, st := open(t)
		wt := st.Waiter(WaitOptions{Poll: time.Millisecond})
		defer wt.Stop()
		for range 3 {
			if _, err := wt.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		if rec.body() != "" {
			t.Fatalf("wrote %q", rec.body())
		}
	})
	t.Run("CoalescesWithinMinGap", func(t *testing.T) {
		t.Parallel()
		_, st := open(t)
		wake := make(chan struct{}, 1)
		const gap = 50 * time.Millisecond
		wt := st.Waiter(WaitOptions{Poll: time.Hour, MinGap: gap}, wake)
		defer wt.Stop()
		wake <- struct{}{}
		if _, err := wt.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		back := time.Now()
		wake <- struct{}{}
		if _, err := wt.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A lower bound only: however loaded the machine, Wait cannot
		// have returned sooner.
		if d := time.Since(back); d < gap {
			t.Fatalf("returned %v after the last return, want at least %v", d, gap)
		}
	})
	t.Run("ClientGoneEndsTheWait", func(t *testing.T) {
		t.Parallel()
		_, st := open(t)
		wt := st.Waiter(WaitOptions{Poll: time.Hour, MinGap: time.Hour})
		defer wt.Stop()
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := wt.Wait(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("PingWriteErrorEndsTheWait", func(t *testing.T) {
		t.Parallel()
		rec, st := open(t)
		rec.mu.Lock()
		rec.fail = errors.New("client gone")
		rec.mu.Unlock()
		wt := st.Waiter(WaitOptions{Poll: time.Hour, Ping: time.Millisecond})
		defer wt.Stop()
		if _, err := wt.Wait(t.Context()); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("MoreThanFourWakesIsAProgrammingError", func(t *testing.T) {
		t.Parallel()
		defer func() {
			if recover() == nil {
				t.Fatal("no panic")
			}
		}()
		_, st := open(t)
		st.Waiter(WaitOptions{Poll: time.Hour}, nil, nil, nil, nil, nil)
	})
}

// FuzzWriterRoundTrip: whatever a store holds, a frame reads back as one
// event, its data whole (line breaks normalised to \n) and its id and name
// changed only where they would break out of their line.
func FuzzWriterRoundTrip(f *testing.F) {
	f.Add("1", "approval", `{"a":1}`)
	f.Add("1\n2", "a\r\nb", "x\r\ny\rz")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, id, name, data string) {
		rec := newRecorder()
		st, _ := New(rec)
		if err := st.Event(id, name, []byte(data)); err != nil {
			t.Fatal(err)
		}
		evs, err := readAll(t, rec.body())
		if err != nil {
			t.Fatalf("%q: %v", rec.body(), err)
		}
		wantData := lineBreaks.Replace(data)
		if wantData == "" {
			if len(evs) != 0 {
				t.Fatalf("empty data dispatched %v", evs)
			}
			return
		}
		if len(evs) != 1 {
			t.Fatalf("%q read as %d events", rec.body(), len(evs))
		}
		ev := evs[0]
		wantName := nameReplacer.Replace(name)
		if wantName == "" {
			wantName = "message"
		}
		if ev.Type != wantName || ev.ID != idReplacer.Replace(id) || string(ev.Data) != wantData {
			t.Fatalf("(%q, %q, %q) read as %v", id, name, data, ev)
		}
	})
}
