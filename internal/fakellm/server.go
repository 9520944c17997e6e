// Package fakellm holds local fake model servers for tests and benchmarks:
// one HTTP server that speaks OpenAI's Chat Completions streaming and
// Anthropic's Messages streaming byte for byte (SSE `data: {…}\n\n` chunks
// and `data: [DONE]`, tool-call argument fragments, usage chunks, the
// providers' real error bodies with Retry-After), scripted per test and
// recording every request it received; and Model, an in-process
// zero-latency agent.Model for benchmarks of opsgate's own cost.
//
// One Server serves a whole test package (start it in TestMain); every test
// takes its own Script, which has its own base URLs, so parallel tests never
// see each other's replies or requests:
//
//	sc := srv.Script(t)
//	sc.Push(fakellm.Turn{Calls: []fakellm.Call{{Name: "deploy", Args: `{"service":"api"}`}}})
//	m, _ := openai.New(agent.ModelSpec{BaseURL: sc.OpenAIURL(), Model: "m"})
package fakellm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Server is the fake model server. Its zero value is not usable; call
// NewServer.
type Server struct {
	srv     *httptest.Server
	mu      sync.Mutex
	scripts map[string]*Script
	next    int
	conns   atomic.Int64
}

// NewServer starts a server on a loopback port.
func NewServer() *Server {
	s := &Server{scripts: map[string]*Script{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.Start()
	return s
}

// Conns is how many connections clients opened so far: a client that
// reuses its connection opens one for many turns.
func (s *Server) Conns() int64 { return s.conns.Load() }

// URL is the server's root URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// TB is the part of testing.TB a Script needs.
type TB interface {
	Cleanup(func())
	Errorf(format string, args ...any)
}

var _ TB = testing.TB(nil)

// Script returns a fresh script for t, removed when t ends. When t ends the
// script reports requests that found no scripted reply.
func (s *Server) Script(t TB) *Script {
	s.mu.Lock()
	s.next++
	id := fmt.Sprintf("t%d", s.next)
	sc := &Script{id: id, root: s.srv.URL}
	s.scripts[id] = sc
	s.mu.Unlock()
	t.Cleanup(func() {
		s.mu.Lock()
		delete(s.scripts, id)
		s.mu.Unlock()
		if n := sc.Unscripted(); n > 0 {
			t.Errorf("fakellm: %d request(s) found no scripted reply", n)
		}
	})
	return sc
}

// Script is one test's replies and the requests they answered.
type Script struct {
	id, root string

	mu         sync.Mutex
	replies    []Reply
	requests   []Request
	unscripted int
	discard    bool
}

// DiscardRequests stops recording requests (benchmarks: only memory).
func (sc *Script) DiscardRequests() *Script {
	sc.mu.Lock()
	sc.discard = true
	sc.mu.Unlock()
	return sc
}

// OpenAIURL is the base_url for provider openai ("…/v1").
func (sc *Script) OpenAIURL() string { return sc.root + "/s/" + sc.id + "/v1" }

// AnthropicURL is the base_url for provider anthropic.
func (sc *Script) AnthropicURL() string { return sc.root + "/s/" + sc.id }

// Push queues replies, answered in order, one per request.
func (sc *Script) Push(replies ...Reply) *Script {
	sc.mu.Lock()
	sc.replies = append(sc.replies, replies...)
	sc.mu.Unlock()
	return sc
}

// Requests returns copies of the requests received so far.
func (sc *Script) Requests() []Request {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return append([]Request(nil), sc.requests...)
}

// Pending is how many pushed replies no request has taken yet.
func (sc *Script) Pending() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return len(sc.replies)
}

// Unscripted is how many requests arrived with no reply left (they got a
// 500 saying so).
func (sc *Script) Unscripted() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.unscripted
}

// Request is one request the server received.
type Request struct {
	// Format is "openai" or "anthropic", from the path.
	Format string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the body.
func (r Request) JSON() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	return m
}

// Texts returns every text the model was shown, in order: the system
// prompt, then each message's text content (strings and text blocks, tool
// results included), in either wire format.
func (r Request) Texts() []string {
	m := r.JSON()
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				out = append(out, t)
			}
			if c, ok := x["content"]; ok {
				walk(c)
			}
		}
	}
	walk(m["system"])
	if msgs, ok := m["messages"].([]any); ok {
		for _, msg := range msgs {
			if mm, ok := msg.(map[string]any); ok {
				walk(mm["content"])
			}
		}
	}
	return out
}

// Image is one image part a request carried, decoded from either wire
// format.
type Image struct {
	MimeType string
	Data     []byte
}

// Images returns the image parts of the request's messages, in order:
// Chat Completions' image_url data URLs and the Messages API's base64
// image blocks. A part it cannot decode comes back with MimeType
// "undecodable".
func (r Request) Images() []Image {
	m := r.JSON()
	var out []Image
	msgs, _ := m["messages"].([]any)
	for _, msg := range msgs {
		mm, _ := msg.(map[string]any)
		parts, _ := mm["content"].([]any)
		for _, p := range parts {
			pm, _ := p.(map[string]any)
			switch pm["type"] {
			case "image_url":
				iu, _ := pm["image_url"].(map[string]any)
				u, _ := iu["url"].(string)
				head, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ";base64,")
				b, err := base64.StdEncoding.DecodeString(data)
				if !ok || err != nil || !strings.HasPrefix(u, "data:") {
					out = append(out, Image{MimeType: "undecodable"})
					continue
				}
				out = append(out, Image{MimeType: head, Data: b})
			case "image":
				src, _ := pm["source"].(map[string]any)
				data, _ := src["data"].(string)
				mt, _ := src["media_type"].(string)
				b, err := base64.StdEncoding.DecodeString(data)
				if err != nil || src["type"] != "base64" {
					out = append(out, Image{MimeType: "undecodable"})
					continue
				}
				out = append(out, Image{MimeType: mt, Data: b})
			}
		}
	}
	return out
}

// Reply is one scripted answer: a Turn, an HTTPError, Raw bytes, or Hang.
type Reply interface {
	serve(w http.ResponseWriter, r *http.Request, format string)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/s/")
	id, path, _ := strings.Cut(rest, "/")
	s.mu.Lock()
	sc := s.scripts[id]
	s.mu.Unlock()
	if !ok || sc == nil {
		http.Error(w, "fakellm: no such script", http.StatusNotFound)
		return
	}
	var format string
	switch path {
	case "v1/chat/completions":
		format = "openai"
	case "v1/messages":
		format = "anthropic"
	default:
		http.Error(w, "fakellm: unknown path /"+path, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	sc.mu.Lock()
	if !sc.discard {
		sc.requests = append(sc.requests, Request{Format: format, Path: "/" + path, Header: r.Header.Clone(), Body: body})
	}
	var reply Reply
	if len(sc.replies) > 0 {
		reply, sc.replies = sc.replies[0], sc.replies[1:]
	} else {
		sc.unscripted++
	}
	sc.mu.Unlock()
	if reply == nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"fakellm: no scripted reply","type":"server_error","param":null,"code":null}}`)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	reply.serve(w, r, format)
}

// Raw answers with exactly these bytes (for wire quirks no Turn renders).
type Raw struct {
	Status int // default 200
	Header http.Header
	// Body is written as is; for a stream write SSE yourself.
	Body string
}

func (x Raw) serve(w http.ResponseWriter, _ *http.Request, _ string) {
	for k, vs := range x.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "text/event-stream")
	}
	w.WriteHeader(cmp(x.Status, http.StatusOK))
	_, _ = io.WriteString(w, x.Body)
}

// Hang accepts the request and sends nothing until the client gives up.
type Hang struct{}

func (Hang) serve(w http.ResponseWriter, r *http.Request, _ string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	<-r.Context().Done()
}

func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// RefusedURL returns a base URL on a loopback port nothing listens on, for
// "connection refused".
func RefusedURL() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "http://127.0.0.1:9"
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}
