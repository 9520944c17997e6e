// Package client is the small typed client of opsgate's HTTP API that the
// terminal surfaces (opsgate tui, opsgate chat, opsgate approvals
// watch|wait) share: JSON requests with the API's error body decoded
// (code, field, winner), and Server-Sent Events read by core/sse's parser,
// which treats the server's bytes as outside input.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/sse"
)

// Client calls one server with one bearer token.
type Client struct {
	base  *url.URL
	token string
	// HTTP serves requests (bounded by its timeout); Stream serves event
	// streams, which last as long as their context.
	HTTP   *http.Client
	Stream *http.Client
	// Channel, when set, is sent in api.ChannelHeader so the server records
	// decisions and answers with this label ("tui") instead of "api". It
	// is a label for the audit; it grants nothing.
	Channel string
}

// New checks server ("http://127.0.0.1:8080") and returns a client.
func New(server, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(server, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want a URL like http://127.0.0.1:8080", server)
	}
	if token == "" {
		return nil, errors.New("no API token")
	}
	return &Client{base: u, token: token, HTTP: &http.Client{Timeout: 30 * time.Second}, Stream: &http.Client{}}, nil
}

// Server is the base URL, for messages.
func (c *Client) Server() string { return c.base.String() }

// Error is a non-2xx answer, decoded from the API's error body
// {"error":{"code","message","field","by","at"}}.
type Error struct {
	Status  int
	Code    string
	Message string
	// Field names the argument or body field to blame (422).
	Field string
	// By and At name the decision that won (409).
	By, At string
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%d %s: %s", e.Status, e.Code, msg)
	}
	return fmt.Sprintf("%d: %s", e.Status, msg)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// maxResponse bounds one JSON answer.
const maxResponse = 64 << 20

func (c *Client) request(ctx context.Context, method, path string, q url.Values, body any, accept string) (*http.Request, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", accept)
	if c.Channel != "" {
		req.Header.Set(api.ChannelHeader, c.Channel)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// Do sends one request and decodes a JSON answer into out (when non-nil).
func (c *Client) Do(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.request(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the server at %s (is `opsgate serve` running? see --server): %w", c.base, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("read response from %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode response from %s: %w", path, err)
	}
	return nil
}

func decodeError(status int, data []byte) error {
	e := &Error{Status: status}
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Field   string `json:"field"`
			By      string `json:"by"`
			At      string `json:"at"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message, e.Field, e.By, e.At = eb.Error.Code, eb.Error.Message, eb.Error.Field, eb.Error.By, eb.Error.At
	} else {
		s := strings.TrimSpace(string(data))
		if len(s) > 300 {
			s = s[:300] + "..."
		}
		e.Message = s
	}
	if status == http.StatusUnauthorized {
		e.Message += " (check --token / $OPSGATE_TOKEN)"
	}
	return e
}

// Event is one event of a stream Events reads (the parser is core/sse's,
// shared with every Go reader of opsgate's streams).
type Event = sse.Event

// Events opens one event stream at path and calls fn for every event
// until the stream ends (nil), ctx ends (ctx's error), or fn returns an
// error (returned as is). lastID, when set, is sent as Last-Event-ID. It
// does not reconnect: callers decide what a lost stream means.
func (c *Client) Events(ctx context.Context, path string, q url.Values, lastID string, fn func(Event) error) error {
	req, err := c.request(ctx, "GET", path, q, nil, "text/event-stream")
	if err != nil {
		return err
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.Stream.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach the server at %s (is `opsgate serve` running? see --server): %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return decodeError(resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return fmt.Errorf("%s: not an event stream (Content-Type %q)", path, ct)
	}
	rd := sse.NewReader(resp.Body)
	for {
		ev, err := rd.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read %s: %w", path, err)
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}
