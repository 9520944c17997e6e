package authority

import (
	"net/http"

	"github.com/opsgate/opsgate/core"
)

// Surface is one way in: each authenticates its own way and asks the
// authority the rest.
type Surface string

// The surfaces, in Surfaces.
const (
	// SurfaceREST is /api/v1/... (scripts, the CLI, the TUI).
	SurfaceREST Surface = "rest"
	// SurfaceAgentAPI is /api/v1/agent/... (apps holding session.run).
	SurfaceAgentAPI Surface = "agent-api"
	// SurfaceMCP is /mcp and /mcp/codex (external agents and IDEs).
	SurfaceMCP Surface = "mcp"
	// SurfaceMCPInternal is /internal/mcp and /internal/mcp/studio.
	SurfaceMCPInternal Surface = "mcp-internal"
	// SurfaceConsole is the web console at /.
	SurfaceConsole Surface = "console"
	// SurfaceLocal is /local/v1/... (`opsgate chat`).
	SurfaceLocal Surface = "local"
	// SurfaceChat is every chat adapter: what a person does in Slack,
	// Telegram, Discord, email, Matrix or Signal reaches the engine as a
	// verified identity (ChatActor).
	SurfaceChat Surface = "chat"
)

// Surfaces is the one list of surfaces. A surface joins the cross-surface
// test table by being here; a route of a surface is a Route.
var Surfaces = []Surface{SurfaceREST, SurfaceAgentAPI, SurfaceMCP, SurfaceMCPInternal, SurfaceConsole, SurfaceLocal, SurfaceChat}

// Accepts reports whether surface s takes actor at all: nil, a refusal
// with CodeUnauthenticated (an internal token anywhere but the internal
// MCP endpoints, any other credential there, a token on a chat surface) or
// CodeMissingScope (the Agent API without session.run).
func (a *Authority) Accepts(s Surface, actor Actor) error {
	isToken := actor.Token != ""
	switch {
	case s == SurfaceChat:
		if isToken {
			return refuse(CodeUnauthenticated, "a chat surface takes the identities its platform verified, not tokens")
		}
		return nil
	case !isToken:
		return refuse(CodeUnauthenticated, "missing or invalid bearer token")
	case (s == SurfaceMCPInternal) != actor.Internal:
		return refuse(CodeUnauthenticated, "missing or invalid bearer token")
	case s == SurfaceAgentAPI && !actor.Scopes.Has(core.ScopeSessionRun):
		return refuse(CodeMissingScope, "the Agent API needs scope session.run")
	}
	return nil
}

// Route is one entry point of a surface and the action it performs: an
// HTTP pattern ("GET /api/v1/runs/{id}") or an MCP tool name.
type Route struct {
	Surface Surface
	Entry   string
	Action  Action
}

// Router is implemented by every surface's handler: the routes it serves
// with their actions, so a test can check each one against the authority's
// table.
type Router interface {
	Guards() []Route
}

// Mux is an http.ServeMux whose every route names its action, and whose
// gate checks it (Authority.Check) for the actor WithActor stored before
// the handler runs. A surface serves through a Mux, so no route can be
// added without saying what it does, and Routes lists them all.
type Mux struct {
	a      *Authority
	mux    *http.ServeMux
	routes []Route
	deny   func(w http.ResponseWriter, r *http.Request, ref *Refusal)
	authn  func(http.HandlerFunc) http.HandlerFunc
}

// NewMux returns a Mux gated by a; deny writes a refusal in the surface's
// own format. A surface that authenticates per route (the console's
// sessions) passes authenticate, which runs before the gate and stores the
// actor with WithActor; one that authenticates every request first passes
// nil.
func NewMux(a *Authority, deny func(w http.ResponseWriter, r *http.Request, ref *Refusal), authenticate func(http.HandlerFunc) http.HandlerFunc) *Mux {
	if authenticate == nil {
		authenticate = func(h http.HandlerFunc) http.HandlerFunc { return h }
	}
	return &Mux{a: a, mux: http.NewServeMux(), deny: deny, authn: authenticate}
}

// Handle registers h for rt.Entry (a ServeMux pattern). Unless rt's action
// is Public, a request without an actor is refused, and one whose actor
// fails Check for rt.Action is refused with the reason; Decide is judged
// with its approval by the handler, so its refusals reach the engine and
// are audited.
func (m *Mux) Handle(rt Route, h http.Handler) {
	m.routes = append(m.routes, rt)
	if rt.Action == Public {
		m.mux.Handle(rt.Entry, h)
		return
	}
	m.mux.Handle(rt.Entry, m.authn(func(w http.ResponseWriter, r *http.Request) {
		actor, ok := ActorFrom(r.Context())
		if !ok {
			m.deny(w, r, refuse(CodeUnauthenticated, "not signed in"))
			return
		}
		if rt.Action != Decide {
			if err := m.a.Check(actor, rt.Action); err != nil {
				m.deny(w, r, err.(*Refusal))
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
}

// HandleFunc is Handle for a function.
func (m *Mux) HandleFunc(rt Route, h http.HandlerFunc) { m.Handle(rt, h) }

// Handler returns the handler and pattern r would be served by, as
// http.ServeMux.Handler does.
func (m *Mux) Handler(r *http.Request) (http.Handler, string) { return m.mux.Handler(r) }

// ServeHTTP serves r.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.mux.ServeHTTP(w, r) }

// Guards lists every registered route, in registration order.
func (m *Mux) Guards() []Route { return append([]Route(nil), m.routes...) }
