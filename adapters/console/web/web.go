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

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
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
	// StreamTick is how often the live stream tells an idle page to
	// re-check (a wake-up missed across replicas must not stall a page);
	// default 15 s.
	StreamTick time.Duration
}

// Channel is the channel of console messages and decisions: the console and
// the API are the same channel, so a decision made in either shows as
// "console".
const Channel = "console"

// maxMessageText matches the API's cap on a console message.
const maxMessageText = 16 << 10

type server struct {
	o      Options
	log    *slog.Logger
	key    []byte
	tokens []tokenEntry
	mux    *http.ServeMux
	tmpl   map[string]*template.Template
	cop    *http.CrossOriginProtection
	secure bool
	// sessions is o.Store's sign-out record.
	sessions SessionStore
}

type tokenEntry struct {
	tag    string // hmac(key, token): names the token inside a session
	actor  core.Actor
	scopes core.Scopes
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
	s := &server{o: o, log: o.Logger, mux: http.NewServeMux(), cop: http.NewCrossOriginProtection(), sessions: o.Store}
	for i, t := range o.Tokens {
		if t.Token == "" {
			return nil, fmt.Errorf("web: token %d (%q): empty token", i, t.Name)
		}
		if _, _, ok := strings.Cut(t.Actor, ":"); !ok || strings.HasPrefix(t.Actor, ":") || strings.HasSuffix(t.Actor, ":") {
			return nil, fmt.Errorf("web: token %d (%q): actor %q: want <channel>:<id>", i, t.Name, t.Actor)
		}
	}
	s.key = o.SessionKey
	if len(s.key) == 0 {
		s.key = deriveKey(o.Tokens)
	}
	for _, t := range o.Tokens {
		s.tokens = append(s.tokens, tokenEntry{tag: s.tag("token", t.Token), actor: core.Actor{ID: t.Actor, Name: t.Name},
			scopes: core.TokenScopes(t.Actor, t.Scopes)})
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

func (s *server) routes() {
	m := s.mux
	m.Handle("GET /static/", http.StripPrefix("/static/", staticHandler()))
	m.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		// Browsers ask for it on every page; answer without a redirect to
		// sign-in (which would load the sign-in page in the background).
		w.Header().Set("Cache-Control", "max-age=86400")
		w.WriteHeader(http.StatusNoContent)
	})
	m.HandleFunc("GET /signin", s.signinPage)
	m.HandleFunc("POST /signin", s.signin)
	m.HandleFunc("POST /signout", s.authed(s.signout))
	read, request, admin := []core.Scope{core.ScopeRead}, []core.Scope{core.ScopeRequest}, []core.Scope{core.ScopeAdmin}
	m.HandleFunc("GET /{$}", s.authed(s.need(read, s.homePage)))
	m.HandleFunc("GET /chat", s.authed(s.need(read, s.chatPage)))
	m.HandleFunc("POST /chat", s.authed(s.need(request, s.chatSend)))
	m.HandleFunc("GET /approvals", s.authed(s.need(read, s.approvalsPage)))
	m.HandleFunc("GET /approvals/{id}", s.authed(s.need(read, s.approvalPage)))
	// decide checks scope decide itself, so the refusal is audited.
	m.HandleFunc("POST /approvals/{id}/decision", s.authed(s.decide))
	m.HandleFunc("GET /runs", s.authed(s.need(read, s.runsPage)))
	m.HandleFunc("GET /runs/{id}", s.authed(s.need(read, s.runPage)))
	m.HandleFunc("POST /runs/{id}/answer", s.authed(s.need([]core.Scope{core.ScopeRequest, core.ScopeDecide, core.ScopeAdmin}, s.answerRun)))
	m.HandleFunc("POST /runs/{id}/cancel", s.authed(s.need([]core.Scope{core.ScopeRequest, core.ScopeDecide, core.ScopeAdmin}, s.cancelRun)))
	m.HandleFunc("GET /grants", s.authed(s.need(read, s.grantsPage)))
	m.HandleFunc("POST /grants/{id}/revoke", s.authed(s.need([]core.Scope{core.ScopeDecide, core.ScopeAdmin}, s.revokeGrant)))
	m.HandleFunc("GET /audit", s.authed(s.need(read, s.auditPage)))
	m.HandleFunc("GET /audit/export", s.authed(s.need(read, s.auditExport)))
	m.HandleFunc("GET /deliveries", s.authed(s.need(admin, s.deliveriesPage)))
	m.HandleFunc("POST /deliveries/{id}/requeue", s.authed(s.need(admin, s.requeue)))
	m.HandleFunc("GET /events", s.authed(s.need(read, s.events)))
	m.HandleFunc("/", s.authed(func(w http.ResponseWriter, r *http.Request) {
		s.plainError(w, http.StatusNotFound, "Not found.")
	}))
}

// need refuses (403) a request whose session's token holds none of scopes.
func (s *server) need(scopes []core.Scope, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		info := infoFrom(r.Context())
		if !info.scopes.Any(scopes...) {
			names := make([]string, len(scopes))
			for i, sc := range scopes {
				names[i] = string(sc)
			}
			s.log.InfoContext(r.Context(), "web: refused: missing scope", "path", r.URL.Path, "actor", info.actor.ID, "need", names)
			s.plainError(w, http.StatusForbidden, "Forbidden: the token you signed in with does not have scope "+strings.Join(names, " or ")+".")
			return
		}
		h(w, r)
	}
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
	s.cop.Handler(s.mux).ServeHTTP(w, r)
}

// fail logs an unexpected error and shows a generic page; details stay in
// the log.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, core.ErrNotFound) {
		s.plainError(w, http.StatusNotFound, "Not found.")
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
