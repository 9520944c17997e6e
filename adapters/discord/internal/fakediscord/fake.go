// Package fakediscord is a small Discord on 127.0.0.1 for the adapter's
// tests: the REST routes the adapter calls (messages, threads, channels,
// interaction webhooks, application commands, /gateway) and a Gateway
// websocket that says Hello, accepts Identify, sends READY and then
// whatever dispatches a test asks for. It records everything it accepted
// and can answer 429s and rate-limit headers on demand.
package fakediscord

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// BotID is the bot user's id the Gateway announces in READY.
const BotID = "100000000000000001"

// Message is one message as the fake holds it.
type Message struct {
	ID, ChannelID string
	Content       string
	Embeds        []map[string]any
	Components    []map[string]any
	// Edits counts PATCHes (Log marks them with Event.Edit).
	Edits   int
	Deleted bool
}

// Event is one accepted write, in arrival order: a new message or an edit.
type Event struct {
	Message
	Edit bool
}

// Request is one REST request as received.
type Request struct {
	Method, Path string
	Status       int
	Body         string
	At           time.Time // when it arrived
}

// Channel is a channel the fake knows: threads started from messages.
type Channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	ParentID string `json:"parent_id,omitempty"`
	GuildID  string `json:"guild_id,omitempty"`
}

// Server is the fake.
type Server struct {
	srv *httptest.Server

	mu        sync.Mutex
	next      int64
	msgs      map[string]*Message // by id
	log       []Event
	followups []Request
	reqs      []Request
	channels  map[string]Channel
	commands  map[string][]map[string]any // scope ("" or guild) → commands
	puts      int
	// fail429 answers the next n message POSTs with 429, once pass429
	// more have gone through.
	fail429     int
	pass429     int
	retryAfter  float64
	global      bool
	bucketLimit int // X-RateLimit-Remaining counts down from this per window
	bucketUsed  map[string]int
	identify    []json.RawMessage
	conns       []*wsConn
	seq         int
	// files on the CDN (cdn.go)
	files     map[string]*File
	downloads []string
}

type wsConn struct {
	mu sync.Mutex
	c  *websocket.Conn
}

func (w *wsConn) send(v any) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c.WriteJSON(v)
}

// New starts a fake on 127.0.0.1.
func New() *Server {
	s := &Server{
		next: 900000000000000000, msgs: map[string]*Message{}, channels: map[string]Channel{},
		commands: map[string][]map[string]any{}, bucketUsed: map[string]int{}, files: map[string]*File{},
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the fake's base, e.g. http://127.0.0.1:1234.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the fake and its websockets.
func (s *Server) Close() {
	s.mu.Lock()
	for _, c := range s.conns {
		c.c.Close()
	}
	s.mu.Unlock()
	s.srv.Close()
}

// Transport rewrites every request's scheme and host to the fake, so a
// client built for discord.com reaches it.
func (s *Server) Transport() http.RoundTripper {
	u, _ := url.Parse(s.srv.URL)
	return rewrite{host: u.Host}
}

type rewrite struct{ host string }

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host, req.Host = "http", r.host, r.host
	return http.DefaultTransport.RoundTrip(req)
}

// Fail429 makes the next n message POSTs answer 429 with retry_after
// seconds (global marks the global limit).
func (s *Server) Fail429(n int, retryAfter float64, global bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail429, s.retryAfter, s.global = n, retryAfter, global
}

// Fail429After lets the next ok message POSTs through, then answers the n
// after them with 429 and retry_after seconds: a storm in the middle of a
// stream of messages.
func (s *Server) Fail429After(ok, n int, retryAfter float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pass429, s.fail429, s.retryAfter, s.global = ok, n, retryAfter, false
}

// SetBucket makes message POSTs carry X-RateLimit-* headers of a bucket
// holding limit requests per channel (reset-after 60 s, never refilled), so
// a client that ignores them gets 429s.
func (s *Server) SetBucket(limit int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bucketLimit = limit
}

// AddChannel registers a channel (e.g. a thread) for GET /channels/{id}.
func (s *Server) AddChannel(c Channel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.channels[c.ID] = c
}

// Log returns every accepted message and edit, in order.
func (s *Server) Log() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.log...)
}

// Message returns the current state of message id.
func (s *Server) Message(id string) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.msgs[id]
	if !ok {
		return Message{}, false
	}
	return *m, true
}

// Followups returns the interaction webhook calls (PATCH @original, POST).
func (s *Server) Followups() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.followups...)
}

// Requests returns every REST request, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// CommandPuts counts bulk overwrites of application commands.
func (s *Server) CommandPuts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

// Commands returns the registered commands of scope ("" global or a guild).
func (s *Server) Commands(scope string) []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands[scope]
}

// Identifies returns the Identify payloads received on the Gateway.
func (s *Server) Identifies() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.identify...)
}

var (
	apiPrefix    = regexp.MustCompile(`^/api/v[0-9]+`)
	reMessages   = regexp.MustCompile(`^/channels/([0-9]+)/messages$`)
	reMessage    = regexp.MustCompile(`^/channels/([0-9]+)/messages/([0-9]+)$`)
	reThread     = regexp.MustCompile(`^/channels/([0-9]+)/messages/([0-9]+)/threads$`)
	reChannel    = regexp.MustCompile(`^/channels/([0-9]+)$`)
	reWebhook    = regexp.MustCompile(`^/webhooks/([0-9]+)/([^/]+)(/messages/@original)?$`)
	reCommands   = regexp.MustCompile(`^/applications/([0-9]+)(/guilds/([0-9]+))?/commands$`)
	reCallback   = regexp.MustCompile(`^/interactions/([0-9]+)/([^/]+)/callback$`)
	reGatewayAPI = regexp.MustCompile(`^/gateway(/bot)?$`)
)

func (s *Server) id() string {
	s.next++
	return strconv.FormatInt(s.next, 10)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ws" || r.URL.Path == "/ws/" {
		s.serveGateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/attachments/") {
		s.serveCDN(w, r)
		return
	}
	var body map[string]any
	var rawBody []byte
	if r.Body != nil {
		dec := json.NewDecoder(r.Body)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == nil {
			rawBody = raw
			json.Unmarshal(raw, &body)
		}
	}
	at := time.Now()
	path := apiPrefix.ReplaceAllString(r.URL.Path, "")
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	s.route(rec, r, path, body, rawBody)
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: path, Status: rec.status, Body: string(rawBody), At: at})
	s.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(c int) { r.status = c; r.ResponseWriter.WriteHeader(c) }

func (s *Server) route(w http.ResponseWriter, r *http.Request, path string, body map[string]any, raw []byte) {
	if r.Header.Get("Authorization") != "" && !strings.HasPrefix(r.Header.Get("Authorization"), "Bot ") {
		writeJSON(w, 401, map[string]any{"message": "401: Unauthorized", "code": 0})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := reMessages.FindStringSubmatch(path); {
	case m != nil && r.Method == http.MethodPost:
		if s.pass429 > 0 {
			s.pass429--
		} else if s.fail429 > 0 {
			s.fail429--
			w.Header().Set("Retry-After", strconv.Itoa(int(s.retryAfter+0.999)))
			if s.global {
				w.Header().Set("X-RateLimit-Global", "true")
				w.Header().Set("X-RateLimit-Scope", "global")
			}
			writeJSON(w, 429, map[string]any{"message": "You are being rate limited.", "retry_after": s.retryAfter, "global": s.global})
			return
		}
		if s.bucketLimit > 0 {
			used := s.bucketUsed[m[1]]
			w.Header().Set("X-RateLimit-Bucket", "msgbucket")
			w.Header().Set("X-RateLimit-Limit", strconv.Itoa(s.bucketLimit))
			w.Header().Set("X-RateLimit-Reset-After", "60.000")
			if used >= s.bucketLimit {
				w.Header().Set("X-RateLimit-Remaining", "0")
				writeJSON(w, 429, map[string]any{"message": "You are being rate limited.", "retry_after": 60.0, "global": false})
				return
			}
			s.bucketUsed[m[1]] = used + 1
			w.Header().Set("X-RateLimit-Remaining", strconv.Itoa(s.bucketLimit-used-1))
		}
		msg := &Message{ID: s.id(), ChannelID: m[1]}
		applyMessage(msg, body)
		s.msgs[msg.ID] = msg
		s.log = append(s.log, Event{Message: *msg})
		writeJSON(w, 200, msgJSON(msg))
	case reMessage.MatchString(path):
		m := reMessage.FindStringSubmatch(path)
		msg, ok := s.msgs[m[2]]
		if !ok || msg.ChannelID != m[1] || msg.Deleted {
			writeJSON(w, 404, map[string]any{"message": "Unknown Message", "code": 10008})
			return
		}
		switch r.Method {
		case http.MethodPatch:
			applyMessage(msg, body)
			msg.Edits++
			s.log = append(s.log, Event{Message: *msg, Edit: true})
			writeJSON(w, 200, msgJSON(msg))
		case http.MethodDelete:
			msg.Deleted = true
			w.WriteHeader(204)
		default:
			writeJSON(w, 405, map[string]any{"message": "405: Method Not Allowed", "code": 0})
		}
	case reThread.MatchString(path) && r.Method == http.MethodPost:
		m := reThread.FindStringSubmatch(path)
		// Threads may start from users' messages the fake never saw
		// (Gateway tests); those are accepted too.
		if c, ok := s.channels[m[1]]; ok && c.Type >= 10 && c.Type <= 12 {
			writeJSON(w, 400, map[string]any{"message": "Cannot execute action on this channel type", "code": 50024})
			return
		}
		c := Channel{ID: m[2], Type: 11, ParentID: m[1]}
		s.channels[c.ID] = c
		name, _ := body["name"].(string)
		writeJSON(w, 201, map[string]any{"id": c.ID, "type": c.Type, "parent_id": c.ParentID, "name": name})
	case reChannel.MatchString(path) && r.Method == http.MethodGet:
		id := reChannel.FindStringSubmatch(path)[1]
		c, ok := s.channels[id]
		if !ok {
			c = Channel{ID: id, Type: 0}
		}
		writeJSON(w, 200, c)
	case reWebhook.MatchString(path):
		s.followups = append(s.followups, Request{Method: r.Method, Path: path, Body: string(raw)})
		msg := &Message{ID: s.id(), ChannelID: "0"}
		applyMessage(msg, body)
		writeJSON(w, 200, msgJSON(msg))
	case reCallback.MatchString(path):
		s.followups = append(s.followups, Request{Method: r.Method, Path: path, Body: string(raw)})
		w.WriteHeader(204)
	case reCommands.MatchString(path):
		m := reCommands.FindStringSubmatch(path)
		scope := m[3]
		switch r.Method {
		case http.MethodGet:
			cmds := s.commands[scope]
			if cmds == nil {
				cmds = []map[string]any{}
			}
			writeJSON(w, 200, cmds)
		case http.MethodPut:
			var cmds []map[string]any
			if err := json.Unmarshal(raw, &cmds); err != nil {
				writeJSON(w, 400, map[string]any{"message": "Invalid Form Body", "code": 50035})
				return
			}
			for _, c := range cmds {
				c["id"] = s.id()
				c["application_id"] = m[1]
				c["version"] = s.id()
			}
			s.commands[scope] = cmds
			s.puts++
			writeJSON(w, 200, cmds)
		}
	case reGatewayAPI.MatchString(path):
		u, _ := url.Parse(s.srv.URL)
		writeJSON(w, 200, map[string]any{"url": "ws://" + u.Host + "/ws", "shards": 1})
	default:
		writeJSON(w, 404, map[string]any{"message": fmt.Sprintf("404: Not Found (%s %s)", r.Method, path), "code": 0})
	}
}

func applyMessage(m *Message, body map[string]any) {
	if c, ok := body["content"].(string); ok {
		m.Content = c
	}
	if e, ok := body["embeds"].([]any); ok {
		m.Embeds = nil
		for _, x := range e {
			if mm, ok := x.(map[string]any); ok {
				m.Embeds = append(m.Embeds, mm)
			}
		}
	}
	if c, ok := body["components"].([]any); ok {
		m.Components = []map[string]any{}
		for _, x := range c {
			if mm, ok := x.(map[string]any); ok {
				m.Components = append(m.Components, mm)
			}
		}
	}
}

func msgJSON(m *Message) map[string]any {
	return map[string]any{
		"id": m.ID, "channel_id": m.ChannelID, "content": m.Content, "type": 0,
		"author": map[string]any{"id": BotID, "username": "opsgate", "bot": true},
	}
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveGateway speaks enough of the Gateway: Hello, Identify → READY,
// heartbeats acknowledged; dispatches come from Dispatch.
func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	conn := &wsConn{c: c}
	defer c.Close()
	if conn.send(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 41250}}) != nil {
		return
	}
	for {
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := c.ReadJSON(&f); err != nil {
			return
		}
		switch f.Op {
		case 1:
			conn.send(map[string]any{"op": 11})
		case 2:
			s.mu.Lock()
			s.identify = append(s.identify, f.D)
			s.conns = append(s.conns, conn)
			s.seq++
			seq := s.seq
			s.mu.Unlock()
			u, _ := url.Parse(s.srv.URL)
			conn.send(map[string]any{"op": 0, "t": "READY", "s": seq, "d": map[string]any{
				"v": 10, "session_id": "fake-session", "resume_gateway_url": "ws://" + u.Host + "/ws",
				"user": map[string]any{"id": BotID, "username": "opsgate", "bot": true}, "guilds": []any{},
				"application": map[string]any{"id": "1"},
			}})
		}
	}
}

// Ready reports whether a Gateway client has identified.
func (s *Server) Ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns) > 0
}

// Dispatch sends an event (op 0, type t, data d) to every identified
// Gateway client.
func (s *Server) Dispatch(t string, d any) error {
	s.mu.Lock()
	s.seq++
	seq := s.seq
	conns := append([]*wsConn(nil), s.conns...)
	s.mu.Unlock()
	if len(conns) == 0 {
		return fmt.Errorf("fakediscord: no identified gateway client")
	}
	for _, c := range conns {
		if err := c.send(map[string]any{"op": 0, "t": t, "s": seq, "d": d}); err != nil {
			return err
		}
	}
	return nil
}
