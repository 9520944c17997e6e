package web

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core/markdown"
	"github.com/opsgate/opsgate/core/shortid"
)

// The console's markup, script and style are compiled into the binary: no
// file to deploy next to it, no CDN to reach, nothing to build with Node.
//
//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

var pages = []string{"signin", "home", "chat", "approvals", "approval", "runs", "run", "grants", "schedules", "audit", "deliveries", "policy", "error"}

var funcs = template.FuncMap{
	"join": strings.Join,
	// markdown renders opsgate's own replies (authored in its Markdown
	// subset) as HTML. The renderer escapes every character of text and
	// allows only http, https and mailto links, so tool output quoted in a
	// reply stays inert; people's messages are never passed through it.
	"markdown": func(s string) template.HTML {
		return template.HTML(markdown.ConvertHTML(s)) //nolint:gosec // escaped by the renderer (core/markdown tests hostile input)
	},
	// human renders an RFC 3339 time for people; the machine form stays in
	// the <time datetime> attribute.
	"human": func(s string) string {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return s
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	// rel is the relative form of an RFC 3339 time ("3 min ago"); the
	// script keeps it current, the title attribute holds the absolute one.
	"rel": func(s string) string {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return s
		}
		return relTime(t, time.Now())
	},
	// short is an id as people see and type it: a prefix of its random
	// part (core/shortid; the UUIDv7's leading digits are a timestamp a
	// run and its card share). Lists pass their own Shortest forms.
	"short": shortid.Of,
	"add":   func(a, b int) int { return a + b },
	// dict passes several values to a partial template.
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, fmt.Errorf("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
}

// parseTemplates builds one template set per page: the shared layout and
// partials plus that page's "content".
func parseTemplates() (map[string]*template.Template, error) {
	out := map[string]*template.Template{}
	for _, p := range pages {
		t, err := template.New(p).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+p+".html")
		if err != nil {
			return nil, fmt.Errorf("web: parse template %s: %w", p, err)
		}
		out[p] = t
	}
	return out, nil
}

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic("web: embedded static folder missing: " + err.Error()) // a build error, not a runtime one
	}
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		fsrv.ServeHTTP(w, r)
	})
}

// here is the current page's address for "come back here" links and the
// live refresh, without the one-time notices (?done=, ?sent=).
func here(r *http.Request) string {
	if r.Method != http.MethodGet {
		return ""
	}
	q := r.URL.Query()
	q.Del("done")
	q.Del("sent")
	if len(q) == 0 {
		return r.URL.Path
	}
	return r.URL.Path + "?" + q.Encode()
}

// render executes a page into a buffer first, so a template error becomes
// a clean 500 instead of half a page.
func (s *server) render(w http.ResponseWriter, r *http.Request, status int, page string, data map[string]any) {
	info := infoFrom(r.Context())
	data["Actor"] = info.actor.ID
	data["ActorName"] = info.actor.Name
	data["CSRF"] = info.csrf
	data["Path"] = r.URL.Path
	data["Page"] = page
	if _, ok := data["Here"]; !ok {
		data["Here"] = here(r)
	}
	if _, ok := data["Refresh"]; !ok {
		data["Refresh"] = data["Here"]
	}
	var buf bytes.Buffer
	if err := s.tmpl[page].ExecuteTemplate(&buf, page, data); err != nil {
		s.log.ErrorContext(r.Context(), "web: render", "page", page, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("internal error\n"))
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}
