package faketelegram

import (
	"fmt"
	"net/http"
	"strings"
)

// maxDownload is the Bot API's getFile limit: larger files are refused
// ("file is too big").
const maxDownload = 20 << 20

// File is a file a person sent to the bot.
type File struct {
	ID   string
	Path string
	Data []byte
	// Size is what getFile reports (len(Data) unless set otherwise).
	Size int
}

// AddFile stores a file the bot may fetch and returns its file_id, for
// the document/photo/audio of an update.
func (s *Server) AddFile(name string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("BQACAgIAAxkBAAI%04dZx", len(s.files)+1)
	s.files[id] = &File{ID: id, Path: fmt.Sprintf("documents/file_%d_%s", len(s.files)+1, name), Data: data, Size: len(data)}
	return id
}

// ReportSize makes getFile report size for file id.
func (s *Server) ReportSize(id string, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[id]; f != nil {
		f.Size = size
	}
}

// Downloads lists the file_ids whose content was served, in order.
func (s *Server) Downloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.downloads...)
}

// getFile answers like the Bot API (called with s.mu held).
func (s *Server) getFile(w http.ResponseWriter, p map[string]string) {
	f := s.files[p["file_id"]]
	switch {
	case f == nil:
		writeErr(w, Failure{Code: 400, Description: "Bad Request: invalid file_id"})
	case f.Size > maxDownload:
		writeErr(w, Failure{Code: 400, Description: "Bad Request: file is too big"})
	default:
		writeOK(w, map[string]any{"file_id": f.ID, "file_unique_id": "AgAD" + f.ID[len(f.ID)-6:], "file_size": f.Size, "file_path": f.Path})
	}
}

// download serves GET /file/bot<token>/<file_path>.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/file/bot"+s.token+"/")
	if !ok {
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		return
	}
	s.mu.Lock()
	var found *File
	for _, f := range s.files {
		if f.Path == rest {
			found = f
		}
	}
	if found != nil {
		s.downloads = append(s.downloads, found.ID)
	}
	s.mu.Unlock()
	if found == nil {
		http.Error(w, `{"ok":false,"error_code":404,"description":"Not Found"}`, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(found.Data)))
	_, _ = w.Write(found.Data)
}
