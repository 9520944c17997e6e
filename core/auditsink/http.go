package auditsink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// HTTP: each batch is one POST of JSON lines (Content-Type
// application/x-ndjson), one entry per line in sequence order, the API's
// form. A 2xx answer acknowledges the whole batch; 408, 425, 429 and 5xx
// and network errors are retried (Retry-After honoured); any other answer
// refuses the batch for good, and the sink then sends one entry at a time
// to find the entry it refuses, which becomes a dead letter.

type httpDest struct {
	url     string
	headers map[string]string
	client  *http.Client
}

func newHTTP(url string, headers map[string]string, client *http.Client) *httpDest {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &httpDest{url: url, headers: headers, client: client}
}

// maxErrorBody bounds how much of a refusal's body is kept for the log.
const maxErrorBody = 512

func (d *httpDest) Deliver(ctx context.Context, entries []approvals.AuditEntry) (int, error) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			return 0, &PermanentError{Err: fmt.Errorf("audit sink: http: entry %d: %w", e.Seq, err)}
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, &body)
	if err != nil {
		return 0, &PermanentError{Err: fmt.Errorf("audit sink: http: %w", err)}
	}
	for k, v := range d.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	res, err := d.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("audit sink: http: post %d entries: %w", len(entries), err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		return len(entries), nil
	}
	err = fmt.Errorf("audit sink: http: post %d entries: %s: %q", len(entries), res.Status, msg)
	switch code := res.StatusCode; {
	case code == http.StatusRequestTimeout, code == http.StatusTooEarly, code == http.StatusTooManyRequests, code >= 500:
		return 0, &RetryError{Err: err, After: retryAfter(res.Header.Get("Retry-After"))}
	}
	return 0, &PermanentError{Err: err}
}

func (d *httpDest) Close() error { return nil }

// retryAfter reads a Retry-After header in seconds (0 when absent or an
// HTTP date, which the backoff covers).
func retryAfter(v string) time.Duration {
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
