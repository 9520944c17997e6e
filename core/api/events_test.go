package api

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// sseFrame is one parsed Server-Sent Events frame (or a comment).
type sseFrame struct {
	id, event, data, comment string
}

// sseStream reads frames from a response on a goroutine so tests can wait
// with a deadline.
type sseStream struct {
	res    *http.Response
	frames chan sseFrame
}

func openSSE(t *testing.T, b *bundle, path string, hdr map[string]string) *sseStream {
	t.Helper()
	return openSSEToken(t, b, path, adminToken, hdr)
}

func openSSEToken(t *testing.T, b *bundle, path, token string, hdr map[string]string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{res: res, frames: make(chan sseFrame, 100)}
	go func() {
		defer close(s.frames)
		sc := bufio.NewScanner(res.Body)
		var f sseFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				s.frames <- f
				f = sseFrame{}
			case strings.HasPrefix(line, ":"):
				f.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id: "):
				f.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				f.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				f.data = line[6:]
			}
		}
	}()
	return s
}

func (s *sseStream) next(t *testing.T) sseFrame {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			t.Fatal("stream closed")
		}
		return f
	case <-time.After(hang):
		t.Fatalf("no frame within %v", hang)
	}
	return sseFrame{}
}

// hang ends a wait that would otherwise hang: far beyond the slowest step
// on a loaded 2-core machine (the tests wait on events, never on it).
const hang = 2 * time.Minute

// nextEvent skips ping comments.
func (s *sseStream) nextEvent(t *testing.T) sseFrame {
	t.Helper()
	for {
		if f := s.next(t); f.comment == "" {
			return f
		}
	}
}

func (s *sseStream) closed(t *testing.T) {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if ok {
			t.Fatalf("frame %+v after the end", f)
		}
	case <-time.After(hang):
		t.Fatal("stream not closed")
	}
}

func TestRunEvents(t *testing.T) {
	t.Parallel()
	setupRun := func(t *testing.T, mod ...func(*Options)) *bundle {
		b := setup(t, mod...)
		b.st.addRun(&core.Run{ID: "r1", Thread: core.Thread{Channel: "console", Key: "x"}, Status: core.RunRunning})
		b.st.appendEvent("r1", core.EventRunQueued)
		b.st.appendEvent("other", core.EventRunQueued) // another run's event is not streamed
		b.st.appendEvent("r1", core.EventTurnStarted)
		b.st.appendEvent("r1", core.EventToolStarted)
		return b
	}
	t.Run("ReplaysFromStartThenLive", func(t *testing.T) {
		b := setupRun(t, func(o *Options) { o.PollInterval = time.Hour }) // only the wake-up can deliver
		s := openSSE(t, b, "/api/v1/runs/r1/events", nil)
		var got []string
		for range 3 {
			f := s.nextEvent(t)
			got = append(got, f.id+"="+f.event)
		}
		if strings.Join(got, ",") != "1=run.queued,3=turn.started,4=tool.started" {
			t.Fatalf("replay %v", got)
		}
		seq := b.st.appendEvent("r1", core.EventToolFinished)
		f := s.nextEvent(t)
		if f.event != "tool.finished" || f.id != "5" || seq != 5 {
			t.Fatalf("live %+v", f)
		}
		var data map[string]any
		if err := json.Unmarshal([]byte(f.data), &data); err != nil {
			t.Fatal(err)
		}
		if data["seq"] != 5.0 || data["run_id"] != "r1" || data["type"] != "tool.finished" ||
			data["at"] != "2026-01-02T03:04:05Z" || data["data"].(map[string]any)["n"] != 5.0 {
			t.Fatalf("data %v", data)
		}
	})
	t.Run("LastEventIDResumes", func(t *testing.T) {
		b := setupRun(t)
		s := openSSE(t, b, "/api/v1/runs/r1/events", map[string]string{"Last-Event-ID": "3"})
		if f := s.nextEvent(t); f.id != "4" {
			t.Fatalf("resumed at %+v", f)
		}
		s = openSSE(t, b, "/api/v1/runs/r1/events?after=1", nil)
		if f := s.nextEvent(t); f.id != "3" {
			t.Fatalf("after=1 resumed at %+v", f)
		}
	})
	t.Run("PollFallbackWithoutWakeup", func(t *testing.T) {
		b := setupRun(t)
		s := openSSE(t, b, "/api/v1/runs/r1/events?after=4", nil)
		// Append without notifying subscribers: only polling can find it.
		b.st.mu.Lock()
		b.st.events["r1"] = append(b.st.events["r1"], core.RunEvent{Seq: 9, RunID: "r1", Type: core.EventMessageCommitted, At: testNow})
		b.st.mu.Unlock()
		if f := s.nextEvent(t); f.id != "9" || f.event != "message.committed" || !strings.Contains(f.data, `"data":null`) {
			t.Fatalf("polled %+v", f)
		}
	})
	t.Run("EndsAfterFinalRun", func(t *testing.T) {
		b := setupRun(t)
		s := openSSE(t, b, "/api/v1/runs/r1/events?after=4", nil)
		b.st.setRun("r1", func(r *core.Run) { r.Status = core.RunSucceeded })
		b.st.appendEvent("r1", core.EventTurnFinished)
		if f := s.nextEvent(t); f.event != "turn.finished" {
			t.Fatalf("want the last event before the end, got %+v", f)
		}
		f := s.nextEvent(t)
		if f.event != "end" || !strings.Contains(f.data, `"status":"succeeded"`) {
			t.Fatalf("end frame %+v", f)
		}
		s.closed(t)
	})
	t.Run("FinalRunReplaysAndEnds", func(t *testing.T) {
		b := setupRun(t)
		b.st.setRun("r1", func(r *core.Run) { r.Status = core.RunFailed })
		s := openSSE(t, b, "/api/v1/runs/r1/events", map[string]string{"Last-Event-ID": "3"})
		if f := s.nextEvent(t); f.id != "4" {
			t.Fatalf("got %+v", f)
		}
		if f := s.nextEvent(t); f.event != "end" {
			t.Fatalf("got %+v", f)
		}
		s.closed(t)
	})
	t.Run("PingsWhenIdle", func(t *testing.T) {
		b := setupRun(t, func(o *Options) { o.PingInterval = 30 * time.Millisecond })
		s := openSSE(t, b, "/api/v1/runs/r1/events?after=4", nil)
		if f := s.next(t); f.comment != "ping" {
			t.Fatalf("want a ping comment, got %+v", f)
		}
	})
	t.Run("StopsOnDisconnect", func(t *testing.T) {
		b := setupRun(t)
		s := openSSE(t, b, "/api/v1/runs/r1/events", nil)
		s.nextEvent(t)
		if b.st.activeSubs() != 1 {
			t.Fatalf("%d subscriptions", b.st.activeSubs())
		}
		s.res.Body.Close()
		deadline := time.Now().Add(hang)
		for b.st.activeSubs() != 0 {
			if time.Now().After(deadline) {
				t.Fatal("handler kept its subscription after the client left")
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		b := setupRun(t)
		want(t, b.do(t, "GET", "/api/v1/runs/nope/events", adminToken, nil), 404, "not_found")
		want(t, b.do(t, "GET", "/api/v1/runs/r1/events?after=x", adminToken, nil), 422, "invalid")
		want(t, b.do(t, "GET", "/api/v1/runs/r1/events", "", nil), 401, "unauthorized")
		if b.st.activeSubs() != 0 {
			t.Fatal("a refused stream leaked its subscription")
		}
	})
}

// runSubStore is a memStore with the per-run wake-up capability: it
// records which runs were subscribed to and wakes them when asked.
type runSubStore struct {
	*memStore
	mu   sync.Mutex
	runs map[string]chan struct{}
}

func (r *runSubStore) SubscribeRunEvents(runID string) (<-chan struct{}, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := make(chan struct{}, 1)
	r.runs[runID] = c
	return c, func() {}
}

func (r *runSubStore) wake(runID string) {
	r.mu.Lock()
	c := r.runs[runID]
	r.mu.Unlock()
	if c != nil {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func TestRunEventsNarrowWakeups(t *testing.T) {
	t.Parallel()
	var rs *runSubStore
	// No polling: only the per-run wake-up (and the turn.finished rule)
	// can move the stream.
	b := setup(t, func(o *Options) {
		rs = &runSubStore{memStore: o.Store.(*memStore), runs: map[string]chan struct{}{}}
		o.Store = rs
		o.PollInterval = time.Hour
	})
	b.st.addRun(&core.Run{ID: "r1", Thread: core.Thread{Channel: "console", Key: "x"}, Status: core.RunRunning})
	b.st.appendEvent("r1", core.EventRunQueued)
	s := openSSE(t, b, "/api/v1/runs/r1/events", nil)
	if f := s.nextEvent(t); f.event != "run.queued" {
		t.Fatalf("replay %+v", f)
	}
	rs.mu.Lock()
	_, subscribed := rs.runs["r1"]
	rs.mu.Unlock()
	if !subscribed {
		t.Fatal("stream did not subscribe to its run's wake-ups")
	}
	// The run ends: the final status commits with turn.finished; a wake of
	// this run alone must deliver the event and then end the stream
	// without waiting for a poll.
	b.st.setRun("r1", func(r *core.Run) { r.Status = core.RunSucceeded })
	b.st.appendEvent("r1", core.EventTurnFinished)
	rs.wake("r1")
	if f := s.nextEvent(t); f.event != "turn.finished" {
		t.Fatalf("want turn.finished, got %+v", f)
	}
	if f := s.nextEvent(t); f.event != "end" || !strings.Contains(f.data, `"status":"succeeded"`) {
		t.Fatalf("end frame %+v", f)
	}
}
