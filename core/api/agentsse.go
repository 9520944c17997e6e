package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// sseEmitter writes Agent API events as Server-Sent Events:
//
//	event: <name>
//	data: <one line of JSON>
//
// Headers go out with the first event, so a refusal before it (a full
// queue, a bad answer) is still an ordinary JSON error. A nil emitter
// discards everything: the non-streaming caller's turn is followed the same
// way, only not written.
type sseEmitter struct {
	w       http.ResponseWriter
	f       http.Flusher
	started bool
}

func newSSEEmitter(w http.ResponseWriter) (*sseEmitter, error) {
	f, ok := w.(http.Flusher)
	if !ok {
		return nil, errf(http.StatusInternalServerError, "internal", "streaming is not supported by this server")
	}
	return &sseEmitter{w: w, f: f}, nil
}

func (e *sseEmitter) start() {
	if e.started {
		return
	}
	e.started = true
	// A server-wide WriteTimeout would cut a long turn; lift it here.
	_ = http.NewResponseController(e.w).SetWriteDeadline(time.Time{})
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
}

func (e *sseEmitter) isStarted() bool { return e != nil && e.started }

// send writes one event and flushes it.
func (e *sseEmitter) send(name string, data any) error {
	if e == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("api: encode %s: %w", name, err)
	}
	e.start()
	name = noLineBreaks.Replace(name)
	if _, err := fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return fmt.Errorf("api: write %s: %w", name, err)
	}
	e.f.Flush()
	return nil
}

// ping keeps an idle stream open through proxies.
func (e *sseEmitter) ping() error {
	if e == nil || !e.started {
		return nil
	}
	if _, err := fmt.Fprint(e.w, ": ping\n\n"); err != nil {
		return err
	}
	e.f.Flush()
	return nil
}
