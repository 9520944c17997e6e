package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core/sse"
)

// client is a minimal /api/v1 client tuned for measuring: one keep-alive
// connection per concurrent caller so connection setup is not measured.
type client struct {
	base  *url.URL
	token string
	http  *http.Client
	// stream has no overall timeout: SSE responses stay open.
	stream *http.Client
}

func newClient(base *url.URL, token string, conns int) *client {
	tr := &http.Transport{
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     90 * time.Second,
	}
	return &client{
		base:   base,
		token:  token,
		http:   &http.Client{Transport: tr, Timeout: 60 * time.Second},
		stream: &http.Client{Transport: tr},
	}
}

// httpError is a non-2xx answer.
type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.status, e.body) }

func (c *client) url(path string) string { return c.base.String() + path }

func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.url(path), rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		s := strings.TrimSpace(string(data))
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		return fmt.Errorf("%s %s: %w", method, path, &httpError{status: resp.StatusCode, body: s})
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// The API shapes the bench reads (the README's HTTP API; extra fields are ignored).
type (
	apiRun struct {
		ID     string    `json:"id"`
		Status string    `json:"status"`
		Steps  []apiStep `json:"steps"`
	}
	apiStep struct {
		Index      int        `json:"index"`
		Status     string     `json:"status"`
		ApprovalID string     `json:"approval_id"`
		StartedAt  *time.Time `json:"started_at"`
	}
	messageResp struct {
		EventID string  `json:"event_id"`
		Run     *apiRun `json:"run"`
	}
	runPage struct {
		Items      []apiRun `json:"items"`
		NextCursor string   `json:"next_cursor"`
	}
)

func (c *client) postMessage(ctx context.Context, thread, text string) (*apiRun, error) {
	var m messageResp
	if err := c.do(ctx, http.MethodPost, "/api/v1/messages", map[string]string{"thread": thread, "text": text}, &m); err != nil {
		return nil, err
	}
	if m.Run == nil {
		return nil, fmt.Errorf("message %q in %s: %w (is the flow configured? see bench.yaml)", text, thread, errNoRun)
	}
	return m.Run, nil
}

func (c *client) getRun(ctx context.Context, id string) (*apiRun, error) {
	var r apiRun
	if err := c.get(ctx, "/api/v1/runs/"+url.PathEscape(id), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// errNoRun means a message was recorded but started no run.
var errNoRun = errors.New("started no run")

// sseEvent is one Server-Sent Event as received.
type sseEvent struct {
	typ string
	at  time.Time
}

// openEvents subscribes to a run's event stream and returns a channel that
// receives each event type with its arrival time; it is closed when the
// stream ends or ctx is done. The subscription is established (response
// headers received) when openEvents returns.
func (c *client) openEvents(ctx context.Context, runID string) (<-chan sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/api/v1/runs/"+url.PathEscape(runID)+"/events"), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", runID, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("events of %s: %w", runID, &httpError{status: resp.StatusCode, body: string(b)})
	}
	ch := make(chan sseEvent, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		_ = readSSE(resp.Body, func(typ string) bool {
			select {
			case ch <- sseEvent{typ: typ, at: time.Now()}:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	return ch, nil
}

// readSSE parses a Server-Sent Events stream and calls emit with each
// event's type: the "event:" field, or else the "type" of its JSON data.
// It stops when the stream ends, emit returns false, or a line or event is
// past core/sse's limits; the parsing is core/sse's, as every client's.
func readSSE(r io.Reader, emit func(typ string) bool) error {
	rd := sse.NewReader(r)
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		typ := ev.Type
		if typ == "message" { // no "event:" line: the type is in the data
			var p struct {
				Type string `json:"type"`
			}
			if json.Unmarshal(ev.Data, &p) != nil {
				continue
			}
			typ = p.Type
		}
		if typ != "" && !emit(typ) {
			return nil
		}
	}
}

// serverRSS reads process_resident_memory_bytes from /metrics.
func serverRSS(ctx context.Context, c *client) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url("/metrics"), nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, &httpError{status: resp.StatusCode, body: "/metrics"}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "process_resident_memory_bytes "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no process_resident_memory_bytes in /metrics")
}
