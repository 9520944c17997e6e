package fakediscord

import (
	"fmt"
	"net/http"
	"strings"
)

// File is an attachment on the fake CDN.
type File struct {
	Channel, ID, Name, ContentType string
	Data                           []byte
	// Expired links answer 404, as Discord's CDN does once ex has passed.
	Expired bool
}

// AddAttachment puts a file on the CDN and returns its attachment object
// as a MESSAGE_CREATE carries it (url is the signed cdn.discordapp.com
// link; the fake's Transport routes it here).
func (s *Server) AddAttachment(channel, name, contentType string, data []byte) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := fmt.Sprintf("1%018d", len(s.files)+1)
	s.files[id] = &File{Channel: channel, ID: id, Name: name, ContentType: contentType, Data: data}
	u := fmt.Sprintf("https://cdn.discordapp.com/attachments/%s/%s/%s?ex=67a1b2c3&is=67a06143&hm=3f1c0d7e9a8b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5&", channel, id, name)
	return map[string]any{"id": id, "filename": name, "size": len(data), "url": u,
		"proxy_url": strings.Replace(u, "cdn.discordapp.com", "media.discordapp.net", 1), "content_type": contentType}
}

// ExpireAttachment makes the attachment's link answer 404.
func (s *Server) ExpireAttachment(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[id]; f != nil {
		f.Expired = true
	}
}

// Downloads lists the attachment ids whose content was served (GET), in
// order.
func (s *Server) Downloads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.downloads...)
}

// serveCDN answers HEAD and GET /attachments/{channel}/{id}/{name}: the
// signed query is required, and a bot token is never expected.
func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/attachments/"), "/")
	s.mu.Lock()
	var f *File
	if len(parts) == 3 {
		f = s.files[parts[1]]
	}
	if f != nil && r.Method == http.MethodGet && !f.Expired {
		s.downloads = append(s.downloads, f.ID)
	}
	s.mu.Unlock()
	switch {
	case r.URL.Query().Get("hm") == "":
		http.Error(w, "This content is no longer available.", http.StatusNotFound)
		return
	case f == nil || f.Expired || f.Channel != parts[0] || f.Name != parts[2]:
		http.Error(w, "This content is no longer available.", http.StatusNotFound)
		return
	case r.Header.Get("Authorization") != "":
		http.Error(w, "a CDN request carries no token", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", f.ContentType)
	w.Header().Set("Content-Length", fmt.Sprint(len(f.Data)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(f.Data)
}
