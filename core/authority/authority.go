// Package authority answers, in one place, "may this actor see, request,
// cancel, decide, answer or claim this?" for every surface: the REST API,
// the Agent API, MCP, the web console, the local channel and, through the
// engine, chat adapters. A surface authenticates (a bearer token, a
// console session, a platform's signature) and then asks here; it never
// judges a permission itself, so the same actor gets the same answer
// everywhere. The rules are written out in docs/architecture.md ("One
// authority") and the README's Security model.
//
// The inputs are the actor (its identity, the token it used and the
// token's scopes, whether the token is internal), the object (a run, an
// approval, the audit log, an Agent API session, an agent task, a
// question, an MCP task handle), who owns it (a run's requester — any
// identity of the same person —, the token that owns a session, the
// identity that created an MCP task) and, for approvers, eligibility
// under the live configuration, judged by approvals.MayDecide exactly as a
// decision is. Refusals are *Refusal: not found where the actor may not
// know the object exists, forbidden where it may.
package authority

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// Kind is what sort of actor asks, as the rules and the docs name it.
type Kind string

// The actor kinds.
const (
	// KindPerson is a human: a chat identity or a token acting as one.
	KindPerson Kind = "person"
	// KindAgent is an AI agent ("agent:" identity): it reads and asks,
	// never decides.
	KindAgent Kind = "agent"
	// KindInternal is an internal token, accepted only by the internal MCP
	// endpoints.
	KindInternal Kind = "internal"
	// KindAdmin is a token with scope admin.
	KindAdmin Kind = "admin"
)

// Actor is who asks: an identity and, for a token, the token's name and
// scopes. Build one with TokenActor or ChatActor; the zero Actor may do
// nothing.
type Actor struct {
	// ID is the identity ("console:alice", "agent:claude").
	ID string
	// Token names the API token the actor authenticated with; "" for an
	// identity a chat platform vouched for. Agent API sessions belong to a
	// token.
	Token string
	// Scopes are what the token may do (core.TokenScopes); a chat identity
	// holds request and decide.
	Scopes core.Scopes
	// Internal marks an internal token (/internal/mcp only).
	Internal bool
	// Groups are approver groups the surface vouches the actor belongs to
	// beyond the configuration (the console's sign-in at the identity
	// provider): the actor stands as those groups' configured members do
	// (approvals.MayDecide).
	Groups []string
	// readAll: the token reads every run, not only its own (see
	// TokenActor).
	readAll bool
}

// TokenActor is the actor of a configured token: its scopes are
// core.TokenScopes of the configured ones. It reads every run when it
// holds read, except an agent token without a scopes key, which reads only
// its own runs (and their approvals, and no audit log): scopes that name
// read give it more.
func TokenActor(name, identity string, configured []core.Scope, internal bool) Actor {
	scopes := core.TokenScopes(identity, configured)
	return Actor{ID: identity, Token: name, Scopes: scopes, Internal: internal,
		readAll: scopes.Has(core.ScopeRead) && (configured != nil || !core.IsAgent(identity))}
}

// ChatActor is an identity a chat platform authenticated: it may ask (the
// channel's requesters decide) and decide (eligibility decides), and reads
// nothing through this package. A machine's identity (an agent's or a
// schedule's, approvals.NeverDecides) never decides.
func ChatActor(identity string) Actor {
	sc := core.Scopes{core.ScopeRequest}
	if !approvals.NeverDecides(identity) {
		sc = append(sc, core.ScopeDecide)
	}
	return Actor{ID: identity, Scopes: sc}
}

// SignedInActor is a person signed in to the web console through the
// identity provider: scopes as the console grants them, every run read
// with scope read (as a token acting as a person), and the approver groups
// the provider vouches for.
func SignedInActor(identity string, scopes core.Scopes, groups []string) Actor {
	return Actor{ID: identity, Scopes: scopes, Groups: groups,
		readAll: scopes.Has(core.ScopeRead) && !core.IsAgent(identity)}
}

// ReadsAll reports whether the actor reads every run (scope admin, or read
// without the agent confinement).
func (a Actor) ReadsAll() bool { return a.readAll || a.Scopes.Has(core.ScopeAdmin) }

// Kind says what sort of actor a is; scope admin wins over the rest.
func (a Actor) Kind() Kind {
	switch {
	case a.Scopes.Has(core.ScopeAdmin):
		return KindAdmin
	case a.Internal:
		return KindInternal
	case core.IsAgent(a.ID):
		return KindAgent
	}
	return KindPerson
}

// decides reports whether a may decide approvals at all: scope decide, and
// not a machine (an agent or a schedule, approvals.NeverDecides).
func (a Actor) decides() bool {
	return a.Scopes.Has(core.ScopeDecide) && !approvals.NeverDecides(a.ID)
}

type actorKey struct{}

// WithActor returns ctx carrying the authenticated actor, for the route
// gate of a Mux and for handlers.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor WithActor stored, and whether there is one.
func ActorFrom(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Code says why a request was refused.
type Code string

// The refusal codes. Surfaces answer with them as they are (the API's
// error code, MCP's structuredContent.error.code).
const (
	// CodeNotFound: no such object, or one the actor may not know of.
	CodeNotFound Code = "not_found"
	// CodeForbidden: the actor sees the object but may not do this to it.
	CodeForbidden Code = "forbidden"
	// CodeMissingScope: the token lacks every scope the action needs.
	CodeMissingScope Code = "missing_scope"
	// CodeHumanRequired: an agent, or a token without scope decide, asked
	// to decide an approval.
	CodeHumanRequired Code = Code(core.DecisionHumanRequired)
	// CodeNotApprover: the actor may not decide this approval (or answer
	// this question) under the live configuration.
	CodeNotApprover Code = Code(core.DecisionNotApprover)
	// CodeUnauthenticated: the surface does not take this actor's kind of
	// credential (an internal token outside /internal/mcp, and the
	// reverse).
	CodeUnauthenticated Code = "unauthorized"
)

// Refusal is a refused request: its code and a message for the caller.
// errors.Is matches core.ErrNotFound for CodeNotFound and core.ErrForbidden
// for every other code.
type Refusal struct {
	Code    Code
	Message string
}

func (r *Refusal) Error() string { return string(r.Code) + ": " + r.Message }

// Is lets callers branch with the core's sentinels.
func (r *Refusal) Is(target error) bool {
	if r.Code == CodeNotFound {
		return target == core.ErrNotFound
	}
	return target == core.ErrForbidden
}

// HTTPStatus is the refusal's status on an HTTP surface.
func (r *Refusal) HTTPStatus() int {
	switch r.Code {
	case CodeNotFound:
		return http.StatusNotFound
	case CodeUnauthenticated:
		return http.StatusUnauthorized
	}
	return http.StatusForbidden
}

// RefusalOf returns the *Refusal in err's chain.
func RefusalOf(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// HumanRequired reports whether err refuses an actor that may decide
// nothing at all (an agent, a token without scope decide): a surface
// still hands such an attempt to the engine, marked unverified, so it is
// audited, and answers human_confirmation_required.
func HumanRequired(err error) bool {
	r, ok := RefusalOf(err)
	return ok && r.Code == CodeHumanRequired
}

func refuse(code Code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Store is what the authority reads to judge ownership; store/sqlite and
// store/postgres satisfy it.
type Store interface {
	RunGet(ctx context.Context, id string) (*core.Run, error)
	ApprovalGet(ctx context.Context, id string) (*approvals.Approval, error)
	ApprovalList(ctx context.Context, p approvals.ApprovalListParams) ([]*approvals.Approval, string, error)
}

// Sessions finds the token that owns an Agent API session.
type Sessions interface {
	AgentSessionGet(ctx context.Context, id string) (*core.AgentSession, error)
}

// Tasks finds the MCP task handles of the Tasks extension (who created
// one); core.MCPTaskStore satisfies it.
type Tasks interface {
	MCPTaskGet(ctx context.Context, id string) (*core.MCPTask, error)
}

// Requesters is who may start runs on one channel (channels.<name>.requesters).
type Requesters struct {
	// Anyone lets every sender start runs ("anyone" in the config).
	Anyone bool
	// Entries are "group:<name>", "person:<name>" or identities (a
	// schedule's "schedule:<name>" among them, matched literally). With
	// none (and not Anyone), only identities the configuration knows —
	// listed under people or in an approver group — may start runs.
	Entries []string
}

// Live is the part of the configuration a reload replaces: who is who and
// who may ask where. The authority reads it at every question, so a
// reload applies at once.
type Live struct {
	// People resolves identities to persons and expands approver entries.
	People *approvals.Directory
	// Groups are the approver groups (anyone in one may answer a question).
	Groups map[string][]string
	// Requesters says, per channel, who may start runs there; a channel
	// without an entry lets anyone its surface authenticated.
	Requesters map[string]Requesters
}

// Who may answer an agent's question (Options.QuestionAnswerers).
const (
	// AnswerRequesterOrApprovers (default): the run's requester, or anyone
	// in an approver group who may decide.
	AnswerRequesterOrApprovers = "requester_or_approvers"
	// AnswerRequester: the run's requester only.
	AnswerRequester = "requester"
)

// Options configures New.
type Options struct {
	// Store is required.
	Store Store
	// Sessions finds session owners; without it a session's runs are
	// visible to admin only.
	Sessions Sessions
	// Tasks finds MCP task handles; nil takes the Store's when it keeps
	// them, else no task is anybody's.
	Tasks Tasks
	// Live returns the live configuration; nil means nobody is anybody's
	// person or approver (every identity is its own person).
	Live func() Live
	// QuestionAnswerers is AnswerRequesterOrApprovers ("" too) or
	// AnswerRequester.
	QuestionAnswerers string
}

// Authority answers the questions. It holds no state of its own besides
// its options; it is safe for concurrent use.
type Authority struct {
	o Options
}

// New returns the authority over o.
func New(o Options) (*Authority, error) {
	if o.Store == nil {
		return nil, errors.New("authority: Options.Store is required")
	}
	switch o.QuestionAnswerers {
	case "", AnswerRequesterOrApprovers, AnswerRequester:
	default:
		return nil, fmt.Errorf("authority: question answerers %q: want %s or %s", o.QuestionAnswerers, AnswerRequesterOrApprovers, AnswerRequester)
	}
	if o.Tasks == nil {
		o.Tasks, _ = o.Store.(Tasks)
	}
	return &Authority{o: o}, nil
}

// live returns the live configuration, never with a nil directory.
func (a *Authority) live() Live {
	var l Live
	if a.o.Live != nil {
		l = a.o.Live()
	}
	if l.People == nil {
		l.People = approvals.NewDirectory(nil, nil)
	}
	return l
}

// MayRequest reports why identity may not start runs on channel, or ""
// (channels.<name>.requesters under the live configuration).
func (a *Authority) MayRequest(channel, identity string) string {
	return a.live().MayRequest(channel, identity)
}

// MayRequest reports why identity may not start runs on channel under l,
// or "".
func (l Live) MayRequest(channel, identity string) string {
	rq, gated := l.Requesters[channel]
	switch {
	case !gated || rq.Anyone:
		return ""
	case len(rq.Entries) == 0:
		if l.People.Known(identity) {
			return ""
		}
		return "not known to the configuration (people or approver groups)"
	case slices.Contains(rq.Entries, identity), slices.Contains(l.People.Expand(rq.Entries), identity):
		// A machine identity that never decides (a schedule) is named
		// literally: Expand leaves such identities out.
		return ""
	}
	return "not among the requesters of this channel"
}

// scopeNames writes scopes as "read or request".
func scopeNames(scs []core.Scope) string {
	parts := make([]string, len(scs))
	for i, sc := range scs {
		parts[i] = string(sc)
	}
	return strings.Join(parts, " or ")
}
