package core

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opsgate/opsgate/approvals"
)

// Scope is what a bearer token may do (api.tokens[].scopes). Every
// surface that takes tokens — the API, the CLI through it, MCP, the web
// console — checks the scope of each action against the token's.
type Scope string

// The token scopes of CONTRACT.md.
const (
	// ScopeRead reads runs, approvals, threads, grants and the audit log.
	ScopeRead Scope = "read"
	// ScopeRequest sends messages that start runs, and cancels one's own.
	ScopeRequest Scope = "request"
	// ScopeDecide approves, rejects and edits approvals (never for agents)
	// and revokes grants.
	ScopeDecide Scope = "decide"
	// ScopeAdmin cancels anyone's run, requeues dead letters, revokes any
	// grant.
	ScopeAdmin Scope = "admin"
	// ScopeSessionRun drives agent sessions (the Agent API).
	ScopeSessionRun Scope = "session.run"
)

// AllScopes lists every scope, for validation and docs.
var AllScopes = []Scope{ScopeRead, ScopeRequest, ScopeDecide, ScopeAdmin, ScopeSessionRun}

// ParseScope validates one configured scope name.
func ParseScope(s string) (Scope, error) {
	if slices.Contains(AllScopes, Scope(s)) {
		return Scope(s), nil
	}
	names := make([]string, len(AllScopes))
	for i, sc := range AllScopes {
		names[i] = string(sc)
	}
	return "", fmt.Errorf("unknown scope %q; known: %s", s, strings.Join(names, ", "))
}

// Scopes is the set of scopes a token holds.
type Scopes []Scope

// Has reports whether s holds sc.
func (s Scopes) Has(sc Scope) bool { return slices.Contains(s, sc) }

// Any reports whether s holds at least one of scs.
func (s Scopes) Any(scs ...Scope) bool {
	for _, sc := range scs {
		if s.Has(sc) {
			return true
		}
	}
	return false
}

// agentPrefix marks AI agents' identities ("agent:claude").
const agentPrefix = "agent:"

// IsAgent reports whether actor is an AI agent's identity.
func IsAgent(actor string) bool { return strings.HasPrefix(actor, agentPrefix) }

// TokenScopes is the scopes a token acting as actor holds. A token without
// a scopes key (configured nil) keeps what tokens could always do — read,
// request, decide, admin — except an agent's, which defaults to read,
// request and session.run. An agent (or a token acting as a schedule,
// approvals.NeverDecides) never holds decide, whatever its configuration
// says: approvals are decided by humans.
func TokenScopes(actor string, configured []Scope) Scopes {
	var out Scopes
	switch {
	case configured != nil:
		out = slices.Clone(configured)
	case IsAgent(actor):
		out = Scopes{ScopeRead, ScopeRequest, ScopeSessionRun}
	default:
		out = Scopes{ScopeRead, ScopeRequest, ScopeDecide, ScopeAdmin}
	}
	if approvals.NeverDecides(actor) {
		out = slices.DeleteFunc(out, func(s Scope) bool { return s == ScopeDecide })
	}
	return out
}
