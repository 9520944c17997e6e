package core

import (
	"context"
	"encoding/json"
	"time"
)

// AgentSessionChannel is the thread channel of Agent API sessions: a
// session's turns are the runs of thread "agent:<session id>". No adapter
// serves it and the engine queues no outbox messages for it, so nothing in
// these threads reaches a chat platform; the console lists them.
const AgentSessionChannel = "agent"

// AgentSession is one Agent API session: an app's conversation with one
// agent (docs/agent-api.md). It belongs to the token that created it — only
// that token continues it — and its agent and settings are fixed when it is
// created.
type AgentSession struct {
	ID string `json:"id"`
	// Token is the name of the API token that owns the session.
	Token string `json:"token"`
	// Actor is the token's actor: the requester of every turn.
	Actor string `json:"actor"`
	Agent string `json:"agent"`
	// Settings is the agent's configuration as it was at creation (JSON);
	// a config reload does not change a running session.
	Settings  json.RawMessage `json:"settings"`
	Thread    Thread          `json:"thread"`
	CreatedAt time.Time       `json:"created_at"`
}

// AgentSessionStore persists Agent API sessions. store/sqlite and
// store/postgres implement it.
type AgentSessionStore interface {
	// AgentSessionCreate inserts s; an id already taken is ErrConflict.
	AgentSessionCreate(ctx context.Context, s *AgentSession) error
	// AgentSessionGet returns a session, or ErrNotFound.
	AgentSessionGet(ctx context.Context, id string) (*AgentSession, error)
	// AgentSessionList lists sessions newest first; Token "" lists every
	// token's (the console).
	AgentSessionList(ctx context.Context, p AgentSessionListParams) (items []*AgentSession, next string, err error)
}

// AgentSessionListParams filters AgentSessionList. Cursor is opaque.
type AgentSessionListParams struct {
	Token  string
	Limit  int
	Cursor string
}
