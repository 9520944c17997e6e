// Package fakesignal is a signal-cli daemon as the Signal adapter's tests
// meet it: `signal-cli -a ACCOUNT daemon --http`, with its JSON-RPC
// endpoint (POST /api/v1/rpc: Content-Type application/json, JSON-RPC 2.0,
// signal-cli's error codes and result shapes) and its event stream
// (GET /api/v1/events: Server-Sent Events with ids "<start>-<seq>", event
// "receive", one JSON line of data, ":" keep-alives, Last-Event-ID replay
// of a bounded buffer). Shapes follow signal-cli's own sources and the
// recorded payloads in ../../testdata.
package fakesignal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Sent is one send or sendReaction the fake accepted.
type Sent struct {
	Method        string
	Recipient     []string
	GroupID       string
	Message       string
	EditTimestamp int64
	Emoji         string
	Timestamp     int64
}

// Server is the fake daemon.
type Server struct {
	*httptest.Server
	Account string

	mu        sync.Mutex
	sent      []Sent
	clock     int64
	start     int64
	seq       int
	buffer    []event
	clients   map[chan event]bool
	rateLimit int // answer this many sends with a rate-limit error
	retrySecs int64
	rpcs      int
	// attachments signal-cli holds (files.go)
	attachments map[string][]byte
	fetched     []string
}

type event struct {
	id   string
	data string
}

// New starts a fake daemon for account on 127.0.0.1.
func New(t testing.TB, account string) *Server {
	s := &Server{Account: account, clock: time.Now().UnixMilli(), start: time.Now().UnixMilli(), clients: map[chan event]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/rpc", s.rpc)
	mux.HandleFunc("/api/v1/events", s.events)
	mux.HandleFunc("/api/v1/check", func(w http.ResponseWriter, r *http.Request) {})
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// Sent returns what was sent so far, in order.
func (s *Server) Sent() []Sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sent(nil), s.sent...)
}

// RPCs counts JSON-RPC calls received (also refused ones).
func (s *Server) RPCs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rpcs
}

// RateLimitNext makes the next n sends fail as signal-cli does when the
// Signal server rate-limits the account, asking to retry after secs.
func (s *Server) RateLimitNext(n int, secs int64) {
	s.mu.Lock()
	s.rateLimit, s.retrySecs = n, secs
	s.mu.Unlock()
}

// Push delivers one received-message event: data is the "receive" event's
// JSON ({"envelope":…,"account":…}), written on one line as signal-cli does.
func (s *Server) Push(data string) string {
	var compact strings.Builder
	for _, l := range strings.Split(data, "\n") {
		compact.WriteString(strings.TrimSpace(l))
	}
	s.mu.Lock()
	s.seq++
	ev := event{id: fmt.Sprintf("%d-%d", s.start, s.seq), data: compact.String()}
	s.buffer = append(s.buffer, ev)
	if len(s.buffer) > 1000 {
		s.buffer = s.buffer[1:]
	}
	for c := range s.clients {
		select {
		case c <- ev:
		default:
		}
	}
	s.mu.Unlock()
	return ev.id
}

// Now is a fresh timestamp, as Signal message ids are.
func (s *Server) Now() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	return s.clock
}

type rpcErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data"`
}

func (s *Server) rpc(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		return
	}
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		Method  string          `json:"method"`
		ID      json.RawMessage `json:"id"`
		Params  struct {
			Account       string          `json:"account"`
			Recipient     json.RawMessage `json:"recipient"`
			GroupID       string          `json:"groupId"`
			Message       string          `json:"message"`
			EditTimestamp int64           `json:"editTimestamp"`
			Emoji         string          `json:"emoji"`
			ID            string          `json:"id"`
		} `json:"params"`
	}
	s.mu.Lock()
	s.rpcs++
	s.mu.Unlock()
	answer := func(result any, e *rpcErr) {
		w.Header().Set("Content-Type", "application/json")
		out := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if e != nil {
			out["error"] = e
		} else {
			out["result"] = result
		}
		_ = json.NewEncoder(w).Encode(out)
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		answer(nil, &rpcErr{Code: -32700, Message: "parse error"})
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" {
		answer(nil, &rpcErr{Code: -32600, Message: "method field must be set"})
		return
	}
	if req.Params.Account != "" && req.Params.Account != s.Account {
		answer(nil, &rpcErr{Code: -32602, Message: "Specified account does not exist"})
		return
	}
	var recipients []string
	if len(req.Params.Recipient) > 0 {
		var one string
		if json.Unmarshal(req.Params.Recipient, &recipients) != nil && json.Unmarshal(req.Params.Recipient, &one) == nil {
			recipients = []string{one}
		}
	}
	switch req.Method {
	case "send", "sendReaction":
	case "getAttachment":
		res, e := s.getAttachment(req.Params.ID, recipients, req.Params.GroupID)
		answer(res, e)
		return
	default:
		answer(nil, &rpcErr{Code: -32601, Message: "Method not implemented"})
		return
	}
	if req.Method == "send" && req.Params.Message == "" {
		answer(nil, &rpcErr{Code: -1, Message: "Sending empty message is not allowed, either a message, attachment or sticker must be given."})
		return
	}
	ts := s.Now()
	result := func(typ string, retry *int64) map[string]any {
		res := []map[string]any{}
		for _, rc := range recipients {
			one := map[string]any{"recipientAddress": map[string]any{"uuid": nil, "number": rc}, "type": typ}
			if retry != nil {
				one["retryAfterSeconds"] = *retry
			}
			res = append(res, one)
		}
		if req.Params.GroupID != "" {
			one := map[string]any{"recipientAddress": map[string]any{"uuid": "00000000-0000-4000-8000-000000000001", "number": "+15550009999"},
				"groupId": req.Params.GroupID, "type": typ}
			if retry != nil {
				one["retryAfterSeconds"] = *retry
			}
			res = append(res, one)
		}
		return map[string]any{"timestamp": ts, "results": res}
	}
	s.mu.Lock()
	limited := s.rateLimit > 0
	if limited {
		s.rateLimit--
	}
	secs := s.retrySecs
	s.mu.Unlock()
	if limited {
		answer(nil, &rpcErr{Code: -5, Message: "Failed to send message due to rate limiting",
			Data: map[string]any{"response": result("RATE_LIMIT_FAILURE", &secs)}})
		return
	}
	s.mu.Lock()
	s.sent = append(s.sent, Sent{Method: req.Method, Recipient: recipients, GroupID: req.Params.GroupID, Message: req.Params.Message,
		EditTimestamp: req.Params.EditTimestamp, Emoji: req.Params.Emoji, Timestamp: ts})
	s.mu.Unlock()
	answer(result("SUCCESS", nil), nil)
}

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if a := r.URL.Query().Get("account"); a != "" && a != s.Account {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	c := make(chan event, 1024)
	s.mu.Lock()
	var replay []event
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		seq := int64(0)
		if rest, ok := strings.CutPrefix(last, strconv.FormatInt(s.start, 10)+"-"); ok {
			seq, _ = strconv.ParseInt(rest, 10, 64)
		}
		for i, ev := range s.buffer {
			if int64(i+1+s.seq-len(s.buffer)) > seq {
				replay = append(replay, ev)
			}
		}
	}
	s.clients[c] = true
	s.mu.Unlock()
	defer func() { s.mu.Lock(); delete(s.clients, c); s.mu.Unlock() }()
	write := func(ev event) bool {
		_, err := fmt.Fprintf(w, "id:%s\nevent:receive\ndata:%s\n\n", ev.id, ev.data)
		if fl != nil {
			fl.Flush()
		}
		return err == nil
	}
	for _, ev := range replay {
		if !write(ev) {
			return
		}
	}
	if fl != nil {
		fl.Flush()
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-c:
			if !write(ev) {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ":\n"); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

// Clients counts connected event-stream readers.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}
