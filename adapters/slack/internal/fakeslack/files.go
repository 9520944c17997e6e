package fakeslack

import (
	"fmt"
	"net/http"
	"strings"
)

// File is a file shared in the fake workspace.
type File struct {
	ID, Name, Mimetype string
	Data               []byte
	// Size is what files.info reports (len(Data) unless set otherwise).
	Size int
}

// AddFile shares a file and returns its id ("F…"), as a file_share event
// names it.
func (s *Server) AddFile(name, mimetype string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("F%07d", len(s.files)+1)
	s.files[id] = &File{ID: id, Name: name, Mimetype: mimetype, Data: data, Size: len(data)}
	return id
}

// ReportSize makes files.info report size for file id (a file that grew,
// or a platform that under-reports).
func (s *Server) ReportSize(id string, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[id]; f != nil {
		f.Size = size
	}
}

// Downloads lists the file ids whose content was served, in order.
func (s *Server) Downloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.downloads...)
}

// fileInfo answers files.info like Slack: the file object with its
// url_private and url_private_download, or file_not_found.
func (s *Server) fileInfo(w http.ResponseWriter, c Call) {
	s.mu.Lock()
	f := s.files[c.Params["file"]]
	s.mu.Unlock()
	if f == nil {
		reply(w, map[string]any{"ok": false, "error": "file_not_found"})
		return
	}
	base := s.srv.URL + "/files-pri/T1-" + f.ID + "/"
	reply(w, map[string]any{"ok": true, "file": map[string]any{
		"id": f.ID, "name": f.Name, "title": f.Name, "mimetype": f.Mimetype, "size": f.Size, "mode": "hosted",
		"url_private": base + f.Name, "url_private_download": base + "download/" + f.Name,
	}})
}

// download serves /files-pri/T1-<id>/[download/]<name> to a bot token; a
// request without one gets Slack's sign-in page, 200 and HTML, as Slack
// does.
func (s *Server) download(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/files-pri/T1-")
	id, _, _ := strings.Cut(rest, "/")
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer xoxb-") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!DOCTYPE html><html><body>Sign in to Slack</body></html>"))
		return
	}
	s.mu.Lock()
	f := s.files[id]
	if f != nil {
		s.downloads = append(s.downloads, id)
	}
	s.mu.Unlock()
	if f == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", f.Mimetype)
	w.Header().Set("Content-Length", fmt.Sprint(len(f.Data)))
	_, _ = w.Write(f.Data)
}
