package fakeslack

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gorilla/websocket"
)

// upgrader accepts any Origin: the Socket Mode client sends none that a
// same-origin check would accept.
var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) ws(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	s.mu.Lock()
	s.conns++
	s.mu.Unlock()
	hello, _ := json.Marshal(map[string]any{
		"type": "hello", "num_connections": 1,
		"connection_info": map[string]any{"app_id": "A1"},
		"debug_info":      map[string]any{"host": "fake"},
	})
	if err := conn.WriteMessage(websocket.TextMessage, hello); err != nil {
		return
	}
	select {
	case s.connsCh <- struct{}{}:
	default:
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.acks = append(s.acks, json.RawMessage(msg))
			s.mu.Unlock()
		}
	}()
	ping := time.NewTicker(200 * time.Millisecond)
	defer ping.Stop()
	for {
		select {
		case <-done:
			return
		case <-r.Context().Done():
			return
		case <-ping.C:
			_ = conn.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second))
		case msg := <-s.wsOut:
			if err := conn.WriteMessage(websocket.TextMessage, msg); err != nil {
				return
			}
		}
	}
}

// WaitConnected waits for a Socket Mode client to connect and get hello.
func (s *Server) WaitConnected(d time.Duration) bool {
	select {
	case <-s.connsCh:
		return true
	case <-time.After(d):
		return false
	}
}

// SendEnvelope pushes one Socket Mode envelope to the connected client.
func (s *Server) SendEnvelope(envelopeID, typ string, payload json.RawMessage, retryAttempt int) {
	b, _ := json.Marshal(map[string]any{
		"envelope_id": envelopeID, "type": typ, "payload": payload,
		"accepts_response_payload": typ != "events_api", "retry_attempt": retryAttempt,
	})
	s.wsOut <- b
}

// Acks returns every message the client sent over the websocket.
func (s *Server) Acks() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.acks...)
}
