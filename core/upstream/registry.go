package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/opsgate/opsgate/core/tools"
)

// Registry holds one client per upstream server. It is an
// tools.ToolLookup for the names "<server>.<tool>".
type Registry struct {
	clients map[string]*client
	order   []string
	log     *slog.Logger

	mu      sync.Mutex
	started bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

var _ tools.ToolLookup = (*Registry)(nil)

// New validates servers and builds a Registry; nothing connects before
// Start.
func New(servers []Server, log *slog.Logger) (*Registry, error) {
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{clients: map[string]*client{}, log: log.With("component", "upstream")}
	for _, s := range servers {
		s.Command = append([]string(nil), s.Command...)
		if err := s.validate(); err != nil {
			return nil, err
		}
		if _, dup := r.clients[s.Name]; dup {
			return nil, fmt.Errorf("upstream: two servers named %q", s.Name)
		}
		r.clients[s.Name] = newClient(s, r.log)
		r.order = append(r.order, s.Name)
	}
	return r, nil
}

// Start connects every server in the background and keeps them connected
// until Close; a server that is down is retried with backoff, and its
// tools fail their calls meanwhile.
func (r *Registry) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return
	}
	r.started = true
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	for _, name := range r.order {
		c := r.clients[name]
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			c.run(ctx)
		}()
	}
}

// Close disconnects every server (stdio processes are stopped) and waits.
func (r *Registry) Close() error {
	r.mu.Lock()
	cancel := r.cancel
	r.started = true // a Start after Close does nothing
	r.mu.Unlock()
	for _, c := range r.clients {
		c.setState(func() { c.closed = true })
	}
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
	return nil
}

// LookupTool implements tools.ToolLookup: "<server>.<tool>" as the server
// offers it now. A server still making its first connection is waited
// for (bounded by ctx and its connect timeout).
func (r *Registry) LookupTool(ctx context.Context, name string) (*tools.Tool, error) {
	srv, _, ok := strings.Cut(name, ".")
	c := r.clients[srv]
	if !ok || c == nil {
		return nil, fmt.Errorf("%w %q: no upstream MCP server named %q", tools.ErrUnknownTool, name, srv)
	}
	return c.lookup(ctx, name)
}

// Tools returns every tool the servers offer, sorted by name: what an
// agent's tools globs match against (tools.ToolLister). It waits for each
// server's first connection attempt, bounded by ctx and the server's
// connect timeout, so an agent turn right after a start sees the tools of
// every server that answers; a server that is down adds none.
func (r *Registry) Tools(ctx context.Context) []*tools.Tool {
	var out []*tools.Tool
	for _, name := range r.order {
		c := r.clients[name]
		select {
		case <-c.first:
		case <-ctx.Done():
		}
		c.mu.Lock()
		for _, t := range c.tools {
			out = append(out, t)
		}
		c.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b *tools.Tool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// RequiredDown names each required server (Server.Required) that is not
// connected now, with why, after its first connection attempt (bounded by
// ctx): the engine fails an agent turn that may use such a server's tools
// rather than let it run without them.
func (r *Registry) RequiredDown(ctx context.Context) map[string]error {
	var out map[string]error
	for _, name := range r.order {
		c := r.clients[name]
		if !c.srv.Required {
			continue
		}
		select {
		case <-c.first:
		case <-ctx.Done():
		}
		c.mu.Lock()
		up, why := c.sess != nil, c.lastErr
		c.mu.Unlock()
		if up {
			continue
		}
		if why == nil {
			why = fmt.Errorf("%w: upstream %s is connecting", ErrUnavailable, name)
		}
		if out == nil {
			out = map[string]error{}
		}
		out[name] = fmt.Errorf("%w: upstream %s: %v", ErrUnavailable, name, c.m.Error(why))
	}
	return out
}

// Report is one server as a listing shows it.
type Report struct {
	Name      string
	Transport string
	// Target is the command or URL, credentials masked.
	Target    string
	Connected bool
	// Listed is true once a tools/list succeeded; Tools is that list.
	Listed bool
	Tools  []ToolInfo
	// Err is why the server is not connected, masked ("" when it is).
	Err string
}

// Reports describes every server, waiting for each one's first
// connection attempt (bounded by ctx).
func (r *Registry) Reports(ctx context.Context) []Report {
	out := make([]Report, 0, len(r.order))
	for _, name := range r.order {
		c := r.clients[name]
		select {
		case <-c.first:
		case <-ctx.Done():
		}
		infos, listed, connected, lastErr := c.snapshot()
		rep := Report{Name: name, Transport: c.srv.Transport(), Target: c.srv.describe(c.m), Connected: connected, Listed: listed, Tools: infos}
		if lastErr != nil {
			rep.Err = lastErr.Error()
		} else if !connected {
			rep.Err = "not connected yet"
		}
		out = append(out, rep)
	}
	return out
}
