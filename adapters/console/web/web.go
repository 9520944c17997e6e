// Package web serves opsgate's web console at "/": sign-in with an API
// token, a home page of what needs attention, the chat view of console
// threads, the approvals queue, run timelines, the audit log and
// dead-lettered deliveries.
//
// Pages are rendered on the server with html/template (so every value from
// outside is escaped once, in one place) and work without JavaScript; a
// small embedded script adds live updates over Server-Sent Events and the
// expiry countdowns. Assets are embedded in the binary: no Node.js at run
// time, no CDN, so the console works offline. docs/console.md explains the
// choice and the security rules.
//
// The console drives the core the way the API does, through two small
// interfaces declared here (Engine and Store); store/sqlite, store/postgres
// and core/engine satisfy them.
package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
)

// Engine is the part of the core engine the console drives: exactly the
// API's, so a console message or decision is handled like one made through
// the API or a chat platform.
type Engine = api.Engine

// Store is the read side the console renders from: the API's Store plus
// the thread list of the chat view, and the sign-outs (SessionStore).
type Store interface {
	api.Store
	ThreadList(ctx context.Context, p core.ThreadListParams) ([]core.ThreadSummary, string, error)
	SessionStore
	// Overview backs the home page.
	core.OverviewStore
}

// SessionStore keeps signed-out sessions in the store, so a signed-out
// cookie stops working on every replica and after a restart
// (store/sqlite and store/postgres implement it; migration 0006).
type SessionStore interface {
	// ConsoleSessionRevoke records the session id as signed out until
	// expires, when its cookie would have expired anyway.
	ConsoleSessionRevoke(ctx context.Context, id string, expires, now time.Time) error
	// ConsoleSessionRevoked reports whether the id is signed out at now.
	ConsoleSessionRevoked(ctx context.Context, id string, now time.Time) (bool, error)
}

// Token is one configured API credential (api.tokens in the README). Signing
// in with it makes the browser act as Actor, so the console's decisions
// and messages name a person, exactly as the same token would on the API.
type Token struct {
	Name  string
	Token string
	Actor string
	// Scopes limit what a session signed in with the token may do (nil:
	// core.TokenScopes' defaults); a token without decide sees approvals
	// but its decisions are refused and audited.
	Scopes []core.Scope
}

// Options configures New. Engine, Store and Tokens are required.
type Options struct {
	Engine Engine
	Store  Store
	Tokens []Token
	// Authority answers who may see and do what (the engine's, so the live
	// configuration applies). nil builds one over Store that knows no
	// people or approver groups.
	Authority *authority.Authority
	// PublicURL is the console's external address (server.public_url). An
	// https URL marks cookies Secure, and its origin is trusted for
	// state-changing requests arriving through a proxy.
	PublicURL string
	// Logger receives request errors; default discards.
	Logger *slog.Logger
	// Now is the clock (tests pin it); default time.Now.
	Now func() time.Time
	// SessionKey signs session cookies. Empty derives it from the tokens,
	// so every replica (and a restart) accepts the same sessions, and
	// rotating the tokens ends every session.
	SessionKey []byte
	// SessionTTL is how long a sign-in lasts; default 12 h.
	SessionTTL time.Duration
	// Channels are the enabled channels, for the home page's channel
	// health; empty lists the channels the store has seen.
	Channels []string
	// Schedules backs the schedules page; nil lists none.
	Schedules Schedules
	// StreamTick is how often the live stream tells an idle page to
	// re-check (a wake-up missed across replicas must not stall a page);
	// default 15 s.
	StreamTick time.Duration
	// OIDC, when set, offers sign-in with the identity provider
	// (channels.console.oidc; idp.go, docs/console.md). People and a Store
	// that is a SigninStore are then required.
	OIDC *oidc.Client
	// People is who the live configuration knows, for sign-ins at the
	// identity provider.
	People People
	// NoTokenLogin turns sign-in with an API token off
	// (channels.console.token_login: false).
	NoTokenLogin bool
}

// Channel is the channel of console messages and decisions: the console and
// the API are the same channel, so a decision made in either shows as
// "console".
const Channel = core.ConsoleChannel

// maxMessageText matches the API's cap on a console message.
const maxMessageText = 16 << 10

type server struct {
	o      Options
	log    *slog.Logger
	key    []byte
	tokens []tokenEntry
	auth   *authority.Authority
	mux    *authority.Mux
	tmpl   map[string]*template.Template
	cop    *http.CrossOriginProtection
	secure bool
	// sessions is o.Store's sign-out record.
	sessions SessionStore
	// idp and signins are set when sign-in at the identity provider is on.
	idp     *oidc.Client
	signins SigninStore
}

type tokenEntry struct {
	tag    string // hmac(key, token): names the token inside a session
	actor  core.Actor
	scopes core.Scopes
	auth   authority.Actor
}

// New validates o and returns the console handler, to be mounted at "/"
// (it serves absolute paths).
func New(o Options) (http.Handler, error) {
	if o.Engine == nil {
		return nil, errors.New("web: Options.Engine is required")
	}
	if o.Store == nil {
		return nil, errors.New("web: Options.Store is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 12 * time.Hour
	}
	if o.StreamTick <= 0 {
		o.StreamTick = 15 * time.Second
	}
	s := &server{o: o, log: o.Logger, auth: o.Authority, cop: http.NewCrossOriginProtection(), sessions: o.Store}
	if s.auth == nil {
		a, err := authority.New(authority.Options{Store: o.Store})
		if err != nil {
			return nil, fmt.Errorf("web: %w", err)
		}
		s.auth = a
	}
	s.mux = authority.NewMux(s.auth, s.deny, s.authed)
	for i, t := range o.Tokens {
		if t.Token == "" || t.Name == "" {
			return nil, fmt.Errorf("web: token %d (%q): empty token or name", i, t.Name)
		}
		if _, _, ok := strings.Cut(t.Actor, ":"); !ok || strings.HasPrefix(t.Actor, ":") || strings.HasSuffix(t.Actor, ":") {
			return nil, fmt.Errorf("web: token %d (%q): actor %q: want <channel>:<id>", i, t.Name, t.Actor)
		}
	}
	if err := s.setupIDP(); err != nil {
		return nil, err
	}
	s.key = o.SessionKey
	if len(s.key) == 0 {
		s.key = deriveKey(o.Tokens)
	}
	for _, t := range o.Tokens {
		auth := authority.TokenActor(t.Name, t.Actor, t.Scopes, false)
		s.tokens = append(s.tokens, tokenEntry{tag: s.tag("token", t.Token), actor: core.Actor{ID: t.Actor, Name: t.Name},
			scopes: auth.Scopes, auth: auth})
	}
	if len(s.tokens) == 0 {
		s.log.Warn("web: no API tokens configured; nobody can sign in to the console")
	}
	if o.PublicURL != "" {
		u, err := url.Parse(o.PublicURL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("web: public URL %q: want scheme://host", o.PublicURL)
		}
		s.secure = u.Scheme == "https"
		if err := s.cop.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("web: public URL %q: %w", o.PublicURL, err)
		}
	}
	s.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.WarnContext(r.Context(), "web: cross-origin request refused", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		s.plainError(w, http.StatusForbidden, "Forbidden: cross-site request refused.")
	}))
	tm, err := parseTemplates()
	if err != nil {
		return nil, err
	}
	s.tmpl = tm
	s.routes()
	return s, nil
}

// deriveKey makes the session key from every configured token: all
// replicas with the same config agree on it, and nobody without all the
// tokens can forge a session.
func deriveKey(tokens []Token) []byte {
	vals := make([]string, 0, len(tokens))
	for _, t := range tokens {
		vals = append(vals, t.Token)
	}
	sort.Strings(vals)
	m := hmac.New(sha256.New, []byte("opsgate console session key v1"))
	for _, v := range vals {
		m.Write([]byte(v))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// routes registers every page with the action it performs: the
// authority's gate (after the session check, authed) checks the token's
// scopes for it, and each handler asks the authority about its object.
// Decisions judge decide with the approval, so a refusal is audited.
func (s *server) routes() {
	route := func(pattern string, act authority.Action, h http.HandlerFunc) {
		s.mux.HandleFunc(authority.Route{Surface: authority.SurfaceConsole, Entry: pattern, Action: act}, h)
	}
	route("GET /static/", authority.Public, http.StripPrefix("/static/", staticHandler()).ServeHTTP)
	route("GET /favicon.ico", authority.Public, func(w http.ResponseWriter, r *http.Request) {
		// Browsers ask for it on every page; answer without a redirect to
		// sign-in (which would load the sign-in page in the background).
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
	})
	route("GET /signin", authority.Public, s.signinPage)
	route("POST /signin", authority.Public, s.signin)
	route("POST /signout", authority.Self, s.signout)
	if s.idp != nil {
		// Sign-in at the identity provider (idp.go): only when configured.
		route("GET /auth/login", authority.Public, s.idpLogin)
		route("GET /auth/callback", authority.Public, s.idpCallback)
	}
	route("GET /{$}", authority.ListApprovals, s.homePage)
	route("GET /chat", authority.SeeThread, s.chatPage)
	route("POST /chat", authority.Request, s.chatSend)
	route("GET /approvals", authority.ListApprovals, s.approvalsPage)
	route("GET /approvals/{id}", authority.SeeApproval, s.approvalPage)
	route("POST /approvals/{id}/decision", authority.Decide, s.decide)
	route("POST /approvals/{id}/delegate", authority.Decide, s.delegate)
	route("GET /approvals/{id}/receipt", authority.SeeApproval, s.receipt)
	route("GET /policy", authority.Catalog, s.policyPage)
	route("GET /runs", authority.ListRuns, s.runsPage)
	route("GET /runs/{id}", authority.SeeRun, s.runPage)
	route("POST /runs/{id}/answer", authority.Answer, s.answerRun)
	route("POST /runs/{id}/cancel", authority.Cancel, s.cancelRun)
	route("GET /grants", authority.ReadGrants, s.grantsPage)
	route("POST /grants/{id}/revoke", authority.RevokeGrant, s.revokeGrant)
	route("GET /schedules", authority.ListSchedules, s.schedulesPage)
	route("POST /schedules/{name}/{action}", authority.Administer, s.scheduleAction)
	route("GET /audit", authority.ReadAudit, s.auditPage)
	route("GET /audit/export", authority.ReadAudit, s.auditExport)
	route("GET /deliveries", authority.Administer, s.deliveriesPage)
	route("POST /deliveries/{id}/requeue", authority.Administer, s.requeue)
	// The live feed carries no data, only "something changed".
	route("GET /events", authority.Self, s.events)
	route("/", authority.Self, func(w http.ResponseWriter, r *http.Request) {
		s.plainError(w, http.StatusNotFound, "Not found.")
	})
}

// Guards lists the console's pages and the action of each
// (authority.Router).
func (s *server) Guards() []authority.Route { return s.mux.Guards() }

// deny shows the authority's refusal as a page.
func (s *server) deny(w http.ResponseWriter, r *http.Request, ref *authority.Refusal) {
	info := infoFrom(r.Context())
	s.log.InfoContext(r.Context(), "web: refused", "path", r.URL.Path, "actor", info.actor.ID, "code", ref.Code, "why", ref.Message)
	switch ref.Code {
	case authority.CodeNotFound:
		s.plainError(w, http.StatusNotFound, "Not found.")
	case authority.CodeMissingScope:
		s.plainError(w, http.StatusForbidden, "Forbidden: the token you signed in with may not do this: "+ref.Message+".")
	default:
		s.plainError(w, ref.HTTPStatus(), "Forbidden: "+ref.Message+".")
	}
}

// refused answers err: an authority refusal as deny shows it, anything
// else as fail does.
func (s *server) refused(w http.ResponseWriter, r *http.Request, err error) {
	if ref, ok := authority.RefusalOf(err); ok {
		s.deny(w, r, ref)
		return
	}
	s.fail(w, r, err)
}

// ServeHTTP sets the security headers every response carries, refuses
// cross-origin state changes before anything else runs, then routes.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	// No inline script or style is allowed, so even markup that slipped
	// through escaping could not run; images only from here.
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "+
		"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "web: panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			s.plainError(w, http.StatusInternalServerError, "Internal error.")
		}
	}()
	if err := core.CheckRequest(r); err != nil {
		s.plainError(w, http.StatusBadRequest, "Bad request: "+err.Error()+".")
		return
	}
	s.cop.Handler(s.mux).ServeHTTP(w, r)
}

// fail logs an unexpected error and shows a generic page; details stay in
// the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, core.ErrNotFound) {
		s.plainError(w, http.StatusNotFound, "Not found.")
		return
	}
	if status := core.IngressStatus(err); status != http.StatusInternalServerError {
		if status == http.StatusServiceUnavailable {
			s.log.ErrorContext(r.Context(), "web: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
			w.Header().Set("Retry-After", core.StoreRetryAfter)
		}
		s.plainError(w, status, core.IngressMessage(err)+".")
		return
	}
	if r.Context().Err() == nil {
		s.log.ErrorContext(r.Context(), "web: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	s.plainError(w, http.StatusInternalServerError, "Internal error; see the server log.")
}

func (s *server) plainError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = s.tmpl["error"].ExecuteTemplate(w, "error", map[string]any{"Status": status, "Message": msg})
}

// localPath accepts only a same-site path for redirects after sign-in or a
// decision, so a crafted link cannot bounce the user to another site.
func localPath(p, def string) string {
	if p == "" || !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/\\") ||
		strings.ContainsAny(p, "\r\n\t") {
		return def
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" {
		return def
	}
	return p
}
