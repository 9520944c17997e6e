package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// EventDecider is what every operator surface (this API, core/mcp) needs
// of the engine: take a message, apply a decision. Declared once here so
// the methods' contract is written once; Engine adds what only the API does.
type EventDecider interface {
	// HandleEvent records an inbound event (deduplicated on channel and
	// event id) and starts its run, if any.
	HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error)
	// Decide applies an approver's decision. Refusals are
	// *core.DecisionError; an unknown approval may also be core.ErrNotFound.
	Decide(ctx context.Context, actor core.Actor, channel string, d core.Decision) (*approvals.Approval, error)
}

// Engine is the part of the core engine the API drives. It is declared here,
// where it is consumed, so the API can be tested against a fake and the
// engine never needs to know about HTTP.
type Engine interface {
	EventDecider
	// Cancel stops a run: core.ErrNotFound for an unknown run,
	// core.ErrConflict when it is already final.
	Cancel(ctx context.Context, runID string, actor core.Actor) (*core.Run, error)
	// RevokeGrant revokes a session or forever grant, audited:
	// core.ErrNotFound for an unknown grant, approvals.ErrGrantRevoked
	// (with the grant) when it was revoked already.
	RevokeGrant(ctx context.Context, id string, actor core.Actor) (*approvals.Grant, error)
}

// Store is the read side the API serves from, plus the two admin writes it
// exposes (requeue) and the wake-ups that drive the event stream. Both
// store/sqlite and store/postgres satisfy it.
type Store interface {
	RunGet(ctx context.Context, id string) (*core.Run, error)
	RunList(ctx context.Context, p core.RunListParams) ([]*core.Run, string, error)
	RunEventList(ctx context.Context, runID string, after int64, limit int) ([]core.RunEvent, error)
	ApprovalGet(ctx context.Context, id string) (*approvals.Approval, error)
	ApprovalList(ctx context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error)
	AuditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error)
	// AuditVerify walks the audit chain and returns the sequence number of
	// the first altered entry, or 0 when the chain is intact. (The web
	// console, which shares this interface, uses it.)
	AuditVerify(ctx context.Context) (badSeq int64, err error)
	// AuditVerifyReport walks the audit chain and returns the first entry
	// that does not link (0 when intact) and the chain's head, which
	// operators record to detect removal of the newest entries.
	AuditVerifyReport(ctx context.Context) (approvals.ChainReport, error)
	GrantList(ctx context.Context, p approvals.GrantListParams) ([]*approvals.Grant, string, error)
	OutboxList(ctx context.Context, p core.OutboxListParams) ([]*core.Delivery, string, error)
	OutboxRequeue(ctx context.Context, id string, now time.Time) error
	ThreadMessages(ctx context.Context, p core.ThreadMessagesParams) ([]core.ThreadMessage, string, error)
	Subscribe(topic string) (ch <-chan struct{}, cancel func())
}

// Answerer is the optional capability of an Engine that takes answers to
// an agent's ask_user questions (the engine does): POST
// /api/v1/runs/{id}/answer. Refusals are *core.DecisionError.
type Answerer interface {
	Answer(ctx context.Context, actor core.Actor, channel, runID, actionID string, answer json.RawMessage) error
}

// QuestionLister is the optional capability of an Engine that lists a
// run's unanswered ask_user questions (the engine does): GET
// /api/v1/runs/{id} then carries them in "pending_actions", so a terminal
// or an app can show the question and answer it.
type QuestionLister interface {
	QuestionCards(ctx context.Context, runID string) ([]core.QuestionCard, error)
}

// ToolSchemas is the optional capability of an Engine that knows each
// tool's input schema (the engine does): GET /api/v1/approvals/{id} then
// carries "input_schema", so a client can build an edit form that
// validates before the server does.
type ToolSchemas interface {
	ToolInputSchema(ctx context.Context, tool string) (map[string]any, error)
}

// Token is one configured API credential (api.tokens in the README). Every
// request made with it acts as Actor, so approvals and audit entries name a
// person or system, never "the API". Scopes limit what it may do; nil
// means the defaults of core.TokenScopes.
type Token struct {
	Name   string
	Token  string
	Actor  string
	Scopes []core.Scope
	// AgentConcurrency bounds the token's Agent API turns at once (1..32);
	// 0 means config's default, 4.
	AgentConcurrency int
}

// Options configures New. Engine, Store and at least a valid Token list are
// needed; the rest have defaults.
type Options struct {
	Engine Engine
	Store  Store
	Tokens []Token
	// Authority answers who may see and do what (the engine's, so the live
	// configuration applies). nil builds one over Store that knows no
	// people or approver groups: every identity is its own person and
	// nobody stands as an approver.
	Authority *authority.Authority
	// MaxBodyBytes caps request bodies (413 beyond); default 1 MiB.
	MaxBodyBytes int64
	// Now is the clock (tests pin it); default time.Now.
	Now func() time.Time
	// Logger receives request errors; default discards.
	Logger *slog.Logger
	// PollInterval is how often the event stream re-reads the store when no
	// wake-up arrives (a missed NOTIFY must not stall a client); default 1 s.
	PollInterval time.Duration
	// PingInterval is how often an idle event stream sends a ": ping"
	// comment so proxies keep the connection open; default 15 s.
	PingInterval time.Duration
	// Agent serves the Agent API (/api/v1/agent/...); nil answers its
	// paths with 404 agent_api_off.
	Agent *AgentOptions
	// ReceiptKey is the JWK receipts verify with (GET
	// /api/v1/receipts/key); empty answers 404 receipts_off.
	ReceiptKey json.RawMessage
	// Schedules serves /api/v1/schedules (schedules.go); nil lists none.
	Schedules Schedules
}

// The limits of the API that are not configurable.
const (
	// DefaultMaxBodyBytes is the body cap when Options.MaxBodyBytes is 0.
	DefaultMaxBodyBytes = 1 << 20
	// MaxMessageText caps POST /api/v1/messages text (413 beyond): a chat
	// message, not a file upload.
	MaxMessageText = 16 << 10
	// DecisionChannel is the channel recorded for decisions made through
	// the API (the CLI, scripts), so the audit tells them apart from clicks
	// in the web console and from chat platforms.
	DecisionChannel = "api"
)

type server struct {
	o      Options
	log    *slog.Logger
	tokens *TokenSet
	auth   *authority.Authority
	mux    *authority.Mux
	agent  *agentServer
}

// TokenSet is the configured tokens, kept as digests and matched in
// constant time; core/mcp authenticates with the same set and code.
type TokenSet struct {
	entries []tokenEntry
}

type tokenEntry struct {
	digest [sha256.Size]byte
	actor  core.Actor
	scopes core.Scopes
	// auth is the token as core/authority judges it.
	auth authority.Actor
	// agentConcurrency is the token's Agent API bound (Token.AgentConcurrency).
	agentConcurrency int
}

// NewTokenSet validates ts (a non-empty token and name, an actor "<channel>:<id>")
// and keeps each token's SHA-256 digest: comparing fixed-size digests keeps
// the comparison constant-time even when token lengths differ.
func NewTokenSet(ts []Token) (*TokenSet, error) {
	set := &TokenSet{}
	for i, t := range ts {
		if t.Token == "" {
			return nil, fmt.Errorf("token %d (%q): empty token", i, t.Name)
		}
		if t.Name == "" {
			// Agent API sessions belong to a token by its name.
			return nil, fmt.Errorf("token %d: empty name", i)
		}
		if _, _, ok := strings.Cut(t.Actor, ":"); !ok || strings.HasPrefix(t.Actor, ":") || strings.HasSuffix(t.Actor, ":") {
			return nil, fmt.Errorf("token %d (%q): actor %q: want <channel>:<id>", i, t.Name, t.Actor)
		}
		for _, sc := range t.Scopes {
			if _, err := core.ParseScope(string(sc)); err != nil {
				return nil, fmt.Errorf("token %d (%q): %w", i, t.Name, err)
			}
		}
		if t.AgentConcurrency < 0 || t.AgentConcurrency > MaxAgentConcurrency {
			return nil, fmt.Errorf("token %d (%q): agent concurrency %d: want 1..%d", i, t.Name, t.AgentConcurrency, MaxAgentConcurrency)
		}
		conc := t.AgentConcurrency
		if conc == 0 {
			conc = DefaultAgentConcurrency
		}
		auth := authority.TokenActor(t.Name, t.Actor, t.Scopes, false)
		set.entries = append(set.entries, tokenEntry{digest: sha256.Sum256([]byte(t.Token)), actor: core.Actor{ID: t.Actor, Name: t.Name},
			scopes: auth.Scopes, auth: auth, agentConcurrency: conc})
	}
	return set, nil
}

// Len is the number of tokens; with none, every request is refused.
func (ts *TokenSet) Len() int { return len(ts.entries) }

// Match returns the actor of the token equal to tok. It compares tok with
// every token without stopping at the first match, and selects the match
// without branching on a comparison, so the time taken reveals neither a
// match nor its position. An empty tok never matches.
func (ts *TokenSet) Match(tok string) (core.Actor, bool) {
	a, _, ok := ts.MatchScopes(tok)
	return a, ok
}

// MatchScopes is Match that also returns the token's scopes.
func (ts *TokenSet) MatchScopes(tok string) (core.Actor, core.Scopes, bool) {
	e, ok := ts.match(tok)
	return e.actor, e.scopes, ok
}

// MatchAuthority is Match that also returns the token as core/authority
// judges it.
func (ts *TokenSet) MatchAuthority(tok string) (core.Actor, authority.Actor, bool) {
	e, ok := ts.match(tok)
	return e.actor, e.auth, ok
}

// match finds tok's entry in constant time (see Match).
func (ts *TokenSet) match(tok string) (tokenEntry, bool) {
	if tok == "" {
		return tokenEntry{}, false
	}
	d := sha256.Sum256([]byte(tok))
	idx := -1
	for i := range ts.entries {
		eq := subtle.ConstantTimeCompare(d[:], ts.entries[i].digest[:])
		idx = subtle.ConstantTimeSelect(eq, i, idx)
	}
	if idx < 0 {
		return tokenEntry{}, false
	}
	return ts.entries[idx], true
}

// New validates o and returns the API handler. It serves absolute
// /api/v1/... paths: mount it at "/api/v1/" without stripping the prefix.
func New(o Options) (http.Handler, error) {
	if o.Engine == nil {
		return nil, errors.New("api: Options.Engine is required")
	}
	if o.Store == nil {
		return nil, errors.New("api: Options.Store is required")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.PingInterval <= 0 {
		o.PingInterval = 15 * time.Second
	}
	tokens, err := NewTokenSet(o.Tokens)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &server{o: o, log: o.Logger, tokens: tokens, auth: o.Authority}
	if s.auth == nil {
		var sessions authority.Sessions
		if o.Agent != nil && o.Agent.Sessions != nil {
			sessions = o.Agent.Sessions
		}
		if s.auth, err = authority.New(authority.Options{Store: o.Store, Sessions: sessions}); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	s.mux = authority.NewMux(s.auth, s.deny, nil)
	if tokens.Len() == 0 {
		s.log.Warn("api: no tokens configured; every API request will be refused")
	}
	if o.Agent != nil {
		ag, err := newAgentServer(s, *o.Agent)
		if err != nil {
			return nil, err
		}
		s.agent = ag
	}
	s.routes()
	return s, nil
}

// routes registers every endpoint with the action it performs: the
// authority's gate checks the token's scopes for it before the handler,
// which asks the authority about the object. The decision endpoint judges
// decide with the approval, so a refusal is audited like every other.
func (s *server) routes() {
	route := func(pattern string, h http.HandlerFunc, act authority.Action) {
		s.mux.HandleFunc(authority.Route{Surface: authority.SurfaceREST, Entry: pattern, Action: act}, h)
	}
	route("POST /api/v1/messages", s.postMessage, authority.Request)
	route("GET /api/v1/messages", s.listMessages, authority.SeeThread)
	route("GET /api/v1/runs", s.listRuns, authority.ListRuns)
	// {id} of a run or an approval may be a short id (fullID, core/shortid).
	route("GET /api/v1/runs/{id}", s.fullID(kindRun, s.getRun), authority.SeeRun)
	route("POST /api/v1/runs/{id}/cancel", s.fullID(kindRun, s.cancelRun), authority.Cancel)
	route("GET /api/v1/runs/{id}/events", s.fullID(kindRun, s.runEvents), authority.SeeRun)
	route("POST /api/v1/runs/{id}/answer", s.fullID(kindRun, s.answerRun), authority.Answer)
	route("GET /api/v1/approvals", s.listApprovals, authority.ListApprovals)
	route("GET /api/v1/approvals/{id}", s.fullID(kindApproval, s.getApproval), authority.SeeApproval)
	route("POST /api/v1/approvals/{id}/decision", s.fullID(kindApproval, s.decide), authority.Decide)
	route("POST /api/v1/approvals/{id}/delegate", s.fullID(kindApproval, s.delegate), authority.Decide)
	route("GET /api/v1/approvals/{id}/receipt", s.fullID(kindApproval, s.getReceipt), authority.SeeApproval)
	route("GET /api/v1/receipts/key", s.receiptKey, authority.Catalog)
	route("GET /api/v1/policy", s.policy, authority.Catalog)
	route("GET /api/v1/grants", s.listGrants, authority.ReadGrants)
	route("DELETE /api/v1/grants/{id}", s.revokeGrant, authority.RevokeGrant)
	route("GET /api/v1/events", s.changes, authority.ListApprovals)
	route("GET /api/v1/me", s.me, authority.Self)
	route("GET /api/v1/audit", s.listAudit, authority.ReadAudit)
	route("GET /api/v1/audit/verify", s.verifyAudit, authority.ReadAudit)
	route("GET /api/v1/deliveries", s.listDeliveries, authority.Administer)
	route("POST /api/v1/deliveries/{id}/requeue", s.requeueDelivery, authority.Administer)
	s.agentRoutes()
	s.scheduleRoutes(route)
}

// Guards lists the API's routes and the action of each (authority.Router).
func (s *server) Guards() []authority.Route { return s.mux.Guards() }

type actorKey struct{}

type scopesKey struct{}

type tokenKey struct{}

// actorFrom returns the authenticated actor; the auth step always sets it
// before a route handler runs.
func actorFrom(ctx context.Context) core.Actor {
	a, _ := ctx.Value(actorKey{}).(core.Actor)
	return a
}

// scopesFrom returns the authenticated token's scopes.
func scopesFrom(ctx context.Context) core.Scopes {
	sc, _ := ctx.Value(scopesKey{}).(core.Scopes)
	return sc
}

// authFrom returns the authenticated token as core/authority judges it.
func authFrom(ctx context.Context) authority.Actor {
	a, _ := authority.ActorFrom(ctx)
	return a
}

// deny answers a refusal of the authority: its status, its code, and for
// a missing scope which request needed what.
func (s *server) deny(w http.ResponseWriter, r *http.Request, ref *authority.Refusal) {
	msg := ref.Message
	if ref.Code == authority.CodeMissingScope {
		msg = fmt.Sprintf("this token may not %s %s: %s", r.Method, r.URL.Path, ref.Message)
	}
	writeError(w, ref.HTTPStatus(), string(ref.Code), msg)
}

// ServeHTTP authenticates, then routes; unmatched routes and wrong methods
// get the same JSON error shape as everything else.
func (s *server) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	start := time.Now()
	w := &loggingWriter{ResponseWriter: rw}
	who := ""
	defer func() {
		s.log.DebugContext(r.Context(), "api: request", "method", r.Method, "path", r.URL.Path,
			"status", w.status, "actor", who, "duration", time.Since(start))
	}()
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "api: panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			writeError(w, http.StatusInternalServerError, "internal", "internal error")
		}
	}()
	if err := core.CheckRequest(r); err != nil {
		s.fail(w, r, err)
		return
	}
	tok, ok := s.authenticate(r)
	actor, scopes := tok.actor, tok.scopes
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="opsgate"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing or invalid bearer token")
		return
	}
	who = actor.ID
	ctx := context.WithValue(r.Context(), actorKey{}, actor)
	ctx = context.WithValue(ctx, tokenKey{}, tok)
	ctx = authority.WithActor(ctx, tok.auth)
	r = r.WithContext(context.WithValue(ctx, scopesKey{}, scopes))
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
	}
	if h, pattern := s.mux.Handler(r); pattern == "" {
		// The mux's own 404/405 handlers write plain text; run one into a
		// recorder to learn which it is (and the Allow header), then
		// answer in JSON.
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		switch rec.status {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path)
		default:
			writeError(w, http.StatusNotFound, "not_found", "no such endpoint: "+r.Method+" "+r.URL.Path)
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authenticate checks the request's bearer token with TokenSet.match.
func (s *server) authenticate(r *http.Request) (tokenEntry, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return tokenEntry{}, false
	}
	return s.tokens.match(strings.TrimSpace(tok))
}

// tokenFrom returns the authenticated token's entry.
func tokenFrom(ctx context.Context) tokenEntry {
	t, _ := ctx.Value(tokenKey{}).(tokenEntry)
	return t
}

// statusRecorder captures what the mux's fallback handlers write.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// loggingWriter remembers the status for the access log. Flush and Unwrap
// keep streaming (http.Flusher, http.ResponseController) working through it.
type loggingWriter struct {
	http.ResponseWriter
	status int
}

func (w *loggingWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *loggingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *loggingWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *loggingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
