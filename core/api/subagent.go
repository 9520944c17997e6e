package api

import (
	"context"
	"fmt"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// Sub-agents (docs/agents.md, "Sub-agents"): a turn that delegates to
// another agent waits while the child's turn runs in a session of its own.
// The child's approvals and questions reach the root session's stream with
// the child's sessionId; an app replies to or answers them naming that
// sessionId, which the token that owns the root session may use.

// subSession is the sub-agent session id under root, for act, when the
// request's token may act on root (an Agent API session): the root's
// session with the child's id and thread. A sub-agent of a chat thread is
// no session of an app: 404 like any session not found.
func (ag *agentServer) subSession(ctx context.Context, act authority.Action, id string, root core.Thread) (*core.AgentSession, error) {
	if root.Channel != core.AgentSessionChannel {
		return nil, errf(404, "not_found", "session %q not found", id)
	}
	s, err := ag.s.auth.Session(ctx, authFrom(ctx), act, root.Key)
	if err != nil {
		return nil, err
	}
	sub := *s
	sub.ID, sub.Thread = id, core.Thread{Channel: core.AgentSessionChannel, Key: id}
	return &sub, nil
}

// rootTurn is, for an answer to a sub-agent's question, the root session
// and its turn that waits on the sub-agent: the turn the answer's stream
// follows.
func (ag *agentServer) rootTurn(ctx context.Context, sub *core.AgentSession) (*core.AgentSession, string, error) {
	root, _ := core.SubSessionRoot(sub.Thread)
	sess, err := ag.ownSession(ctx, root.Key)
	if err != nil {
		return nil, "", err
	}
	runs, _, err := ag.s.o.Store.RunList(ctx, core.RunListParams{Thread: root.String(), Status: core.RunWaitingInput, Limit: 1})
	if err != nil {
		return nil, "", fmt.Errorf("api: answer: %w", err)
	}
	if len(runs) == 0 {
		return nil, "", errf(409, "no_pending_question", "session %s has no turn waiting on a sub-agent", sess.ID)
	}
	return sess, runs[0].ID, nil
}
