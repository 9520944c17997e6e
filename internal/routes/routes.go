// Package routes is an http.ServeMux that remembers what was registered on
// it. A router built on one can list every route it serves, so a test can
// walk them all — the malformed-input sweep does — and a route added later
// is swept without anyone remembering to add it.
package routes

import (
	"net/http"
	"slices"
	"sync"
)

// Mux is an http.ServeMux that records its patterns.
type Mux struct {
	*http.ServeMux
	mu       sync.Mutex
	patterns []string
	mounted  map[string]http.Handler
}

// New returns an empty Mux.
func New() *Mux { return &Mux{ServeMux: http.NewServeMux(), mounted: map[string]http.Handler{}} }

// Handle registers h for pattern, as http.ServeMux.Handle does.
func (m *Mux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, h)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.patterns = append(m.patterns, pattern)
	m.mounted[pattern] = h
}

// HandleFunc registers f for pattern, as http.ServeMux.HandleFunc does.
func (m *Mux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(f))
}

// Patterns lists the registered patterns, in registration order. A pattern
// whose handler is itself a Lister (a router mounted under a prefix) is
// replaced by that router's patterns.
func (m *Mux) Patterns() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, p := range m.patterns {
		if l, ok := m.mounted[p].(Lister); ok {
			out = append(out, l.Patterns()...)
			continue
		}
		out = append(out, p)
	}
	return slices.Clip(out)
}

// Lister is a handler that can list the patterns it serves.
type Lister interface {
	Patterns() []string
}
