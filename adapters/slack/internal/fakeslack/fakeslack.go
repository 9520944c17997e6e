// Package fakeslack is a local fake of the Slack Web API and of a Socket
// Mode websocket, for the Slack adapter's tests: it records every call,
// answers like Slack (unique ts values, ok/error bodies, 429 with
// Retry-After on demand) and keeps the messages it accepted so tests can
// read a thread back.
package fakeslack

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one Web API request as the fake received it.
type Call struct {
	Method string
	Token  string
	// Params holds form fields, or the JSON body's top-level fields (non
	// strings as their JSON).
	Params map[string]string
	At     time.Time
	// RetryAfter is the Retry-After this call was answered 429 with; 0
	// when it was not rate limited.
	RetryAfter time.Duration
}

// Message is a message the fake holds: posted, then maybe updated.
type Message struct {
	Channel  string
	TS       string
	ThreadTS string
	Text     string
	Blocks   json.RawMessage
	// EditOf is the ts this update edited ("" for a new post).
	EditOf  string
	Deleted bool
}

// Server is the fake. Its zero value is not usable; call New.
type Server struct {
	t   testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	calls    []Call
	log      []Message // every post and update, in arrival order
	current  map[string]*Message
	tsSeq    int64
	limited  map[string][]int    // method → pending Retry-After seconds
	failures map[string][]string // method → pending error codes
	held     map[string]chan struct{}

	// files shared in the workspace (files.info, url_private downloads)
	files     map[string]*File
	downloads []string

	// Socket Mode
	wsOut   chan []byte
	acks    []json.RawMessage
	conns   int
	connsCh chan struct{}
}

// New starts a fake on 127.0.0.1, closed at test cleanup.
func New(t testing.TB) *Server {
	s := &Server{
		t: t, current: map[string]*Message{}, files: map[string]*File{}, limited: map[string][]int{}, failures: map[string][]string{},
		held: map[string]chan struct{}{}, wsOut: make(chan []byte, 64), connsCh: make(chan struct{}, 16),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/", s.api)
	mux.HandleFunc("/ws", s.ws)
	mux.HandleFunc("/files-pri/", s.download)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// APIURL is the base for slack.OptionAPIURL (with its trailing slash).
func (s *Server) APIURL() string { return s.srv.URL + "/api/" }

// RateLimit makes the next n calls of method answer 429 with Retry-After.
func (s *Server) RateLimit(method string, n, retryAfterSeconds int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.limited[method] = append(s.limited[method], retryAfterSeconds)
	}
}

// Fail makes the next call of method answer {"ok":false,"error":code}.
func (s *Server) Fail(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[method] = append(s.failures[method], code)
}

// Hold makes every call of method wait, unanswered, until release is
// called (or the caller gives up): a Slack that is slow for as long as the
// test says, so a test can check what happens before Slack answers without
// measuring time.
func (s *Server) Hold(method string) (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.held[method] = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.held, method)
			s.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns the calls of method ("" for all) so far.
func (s *Server) Calls(method string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if method == "" || c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// Log returns every accepted post and update, in arrival order.
func (s *Server) Log() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.log...)
}

// Message returns the current state of the message at ts.
func (s *Server) Message(channel, ts string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.current[channel+"/"+ts]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// Thread returns the live (not deleted) messages whose thread root is ts,
// the root included, in posting order.
func (s *Server) Thread(channel, ts string) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	seen := map[string]bool{}
	for _, l := range s.log {
		key := l.Channel + "/" + l.TS
		if seen[key] || l.Channel != channel || (l.TS != ts && l.ThreadTS != ts) {
			continue
		}
		seen[key] = true
		if m := s.current[key]; m != nil && !m.Deleted {
			out = append(out, *m)
		}
	}
	return out
}

func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	call := Call{Method: method, Params: map[string]string{}, At: time.Now()}
	call.Token = strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	body, _ := io.ReadAll(r.Body)
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(body, &m)
		for k, v := range m {
			var str string
			if json.Unmarshal(v, &str) == nil {
				call.Params[k] = str
			} else {
				call.Params[k] = string(v)
			}
		}
	} else {
		v, _ := url.ParseQuery(string(body))
		for k := range v {
			call.Params[k] = v.Get(k)
		}
		if call.Token == "" {
			call.Token = v.Get("token")
		}
	}

	s.mu.Lock()
	hold := s.held[method]
	var retry int
	limited := len(s.limited[method]) > 0
	if limited {
		retry, s.limited[method] = s.limited[method][0], s.limited[method][1:]
		call.RetryAfter = time.Duration(retry) * time.Second
	}
	s.calls = append(s.calls, call)
	var fail string
	if len(s.failures[method]) > 0 {
		fail, s.failures[method] = s.failures[method][0], s.failures[method][1:]
	}
	s.mu.Unlock()

	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
			return
		}
	}
	if limited {
		w.Header().Set("Retry-After", fmt.Sprint(retry))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"ok":false,"error":"ratelimited"}`))
		return
	}
	if fail != "" {
		reply(w, map[string]any{"ok": false, "error": fail})
		return
	}
	switch method {
	case "auth.test":
		reply(w, map[string]any{"ok": true, "user_id": "UBOT", "bot_id": "BBOT", "team_id": "T1", "user": "opsgate"})
	case "chat.postMessage":
		s.post(w, call)
	case "chat.update":
		s.update(w, call)
	case "chat.delete":
		s.mu.Lock()
		m := s.current[call.Params["channel"]+"/"+call.Params["ts"]]
		if m != nil {
			m.Deleted = true
		}
		s.mu.Unlock()
		if m == nil {
			reply(w, map[string]any{"ok": false, "error": "message_not_found"})
			return
		}
		reply(w, map[string]any{"ok": true, "channel": call.Params["channel"], "ts": call.Params["ts"]})
	case "chat.postEphemeral":
		reply(w, map[string]any{"ok": true, "message_ts": s.nextTS()})
	case "views.open":
		reply(w, map[string]any{"ok": true, "view": map[string]any{"id": "V" + s.nextTS()}})
	case "files.info":
		s.fileInfo(w, call)
	case "apps.connections.open":
		u := "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/ws"
		reply(w, map[string]any{"ok": true, "url": u})
	default:
		reply(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

func (s *Server) nextTS() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tsSeq++
	// Unique per message, unlike slacktest's whole seconds.
	return fmt.Sprintf("1700000000.%06d", s.tsSeq)
}

func (s *Server) post(w http.ResponseWriter, c Call) {
	ch := c.Params["channel"]
	if ch == "" {
		reply(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	if c.Params["text"] == "" && c.Params["blocks"] == "" {
		reply(w, map[string]any{"ok": false, "error": "no_text"})
		return
	}
	ts := s.nextTS()
	m := Message{Channel: ch, TS: ts, ThreadTS: c.Params["thread_ts"], Text: c.Params["text"], Blocks: json.RawMessage(c.Params["blocks"])}
	s.mu.Lock()
	s.log = append(s.log, m)
	cp := m
	s.current[ch+"/"+ts] = &cp
	s.mu.Unlock()
	reply(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "message": map[string]any{"text": m.Text, "ts": ts}})
}

func (s *Server) update(w http.ResponseWriter, c Call) {
	ch, ts := c.Params["channel"], c.Params["ts"]
	s.mu.Lock()
	m := s.current[ch+"/"+ts]
	if m == nil || m.Deleted {
		s.mu.Unlock()
		reply(w, map[string]any{"ok": false, "error": "message_not_found"})
		return
	}
	m.Text, m.Blocks = c.Params["text"], json.RawMessage(c.Params["blocks"])
	up := *m
	up.EditOf = ts
	s.log = append(s.log, up)
	s.mu.Unlock()
	reply(w, map[string]any{"ok": true, "channel": ch, "ts": ts, "text": up.Text})
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// VisibleText is what a person reads in a message: its blocks' text when
// it has blocks, else its text field.
func VisibleText(m Message) string {
	if len(m.Blocks) == 0 || string(m.Blocks) == "null" || string(m.Blocks) == "[]" { // no blocks: Slack shows the text
		return m.Text
	}
	var v any
	if json.Unmarshal(m.Blocks, &v) != nil {
		return m.Text
	}
	var b strings.Builder
	var walk func(any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			if s, ok := t["text"].(string); ok {
				b.WriteString(s + "\n")
			}
			for k, v := range t {
				if k != "text" || !isString(v) {
					walk(v)
				}
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return b.String()
}

func isString(v any) bool { _, ok := v.(string); return ok }
