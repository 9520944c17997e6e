package fakesignal

import (
	"encoding/base64"
	"fmt"
)

// AddAttachment stores a received file as signal-cli does (in its data
// directory, under a random id with the file's extension) and returns the
// attachment object an envelope's dataMessage carries.
func (s *Server) AddAttachment(name, contentType string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.attachments == nil {
		s.attachments = map[string][]byte{}
	}
	id := fmt.Sprintf("Zw%018dQ.bin", len(s.attachments)+1)
	s.attachments[id] = data
	return map[string]any{"contentType": contentType, "filename": name, "id": id, "size": len(data),
		"width": nil, "height": nil, "caption": nil, "uploadTimestamp": nil}
}

// Fetched lists the attachment ids getAttachment handed over, in order.
func (s *Server) Fetched() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.fetched...)
}

// getAttachment answers like signal-cli: the id and the conversation
// (recipient or groupId, one of them) are required; the file comes back
// base64 in {"data"}; an unknown id is a user error. Called with s.mu
// unlocked.
func (s *Server) getAttachment(id string, recipients []string, group string) (any, *rpcErr) {
	if id == "" || (len(recipients) == 0) == (group == "") {
		return nil, &rpcErr{Code: -32602, Message: "Invalid params: id and one of recipient or groupId are required"}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	data, ok := s.attachments[id]
	if !ok {
		return nil, &rpcErr{Code: -1, Message: "Could not find attachment with ID: " + id}
	}
	s.fetched = append(s.fetched, id)
	return map[string]any{"data": base64.StdEncoding.EncodeToString(data)}, nil
}
