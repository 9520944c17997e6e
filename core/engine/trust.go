package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/gate"
)

// Trust is the part of the configuration that says who may do what: the
// policy, who is who (people and approver groups), who may start runs on
// each channel, and how long session grants last. It is read at every
// gate and every decision, and Reload swaps it whole, so a reloaded
// configuration applies to pending approvals at once: an approver removed
// from a group can no longer decide what waits.
type Trust struct {
	Policy *approvals.Policy
	// People maps a person's name to their identities
	// ("alice": ["console:alice", "slack:UALICE"]).
	People map[string][]string
	// Groups maps an approver group to its entries (identities or
	// "person:<name>").
	Groups map[string][]string
	// Requesters says, per channel name, who may start runs there. A
	// channel without an entry lets anyone its adapter authenticated start
	// runs (token surfaces, webhooks signed with their secret).
	Requesters map[string]Requesters
	// SessionTTL is how long a session grant lasts (default 1h).
	SessionTTL time.Duration
}

// Requesters is who may start runs on one channel (core/authority judges
// it).
type Requesters = authority.Requesters

// trustState is a Trust compiled for use: the directory built once.
type trustState struct {
	policy *approvals.Policy
	// policyVersion is policy.Version(), computed once per reload.
	policyVersion string
	dir           *approvals.Directory
	requesters    map[string]Requesters
	// groups are the approver groups as reloaded; who may answer a question
	// is judged against them at answer time, like a decision.
	groups     map[string][]string
	sessionTTL time.Duration
}

func newTrustState(t Trust) *trustState {
	p := t.Policy
	if p == nil {
		p = &approvals.Policy{}
	}
	ttl := t.SessionTTL
	if ttl <= 0 {
		ttl = approvals.DefaultSessionTTL
	}
	return &trustState{policy: p, policyVersion: p.Version(), dir: approvals.NewDirectory(t.People, t.Groups), requesters: t.Requesters, groups: t.Groups, sessionTTL: ttl}
}

// trust returns the current trust configuration.
func (e *Engine) trust() *trustState { return e.trustNow.Load() }

// Reload replaces the policy, people, groups and requesters. It takes
// effect for the next gate and the next decision, on this replica; every
// replica must be reloaded (each reads its own configuration file).
func (e *Engine) Reload(t Trust) {
	e.trustNow.Store(newTrustState(t))
	e.log.Info("trust configuration reloaded", "rules", len(e.trust().policy.Rules), "people", len(t.People), "groups", len(t.Groups))
}

// live is the trust configuration as core/authority reads it.
func (tr *trustState) live() authority.Live {
	return authority.Live{People: tr.dir, Groups: tr.groups, Requesters: tr.requesters}
}

// mayRequest reports why actor may not start runs on channel, or "".
func (tr *trustState) mayRequest(channel, actor string) string {
	return tr.live().MayRequest(channel, actor)
}

// newAuthority builds the engine's authority over its store and its live
// trust configuration; the store's Agent API sessions, when it keeps them,
// tell whose a session's runs are.
func (e *Engine) newAuthority() error {
	sessions, _ := e.store.(authority.Sessions)
	a, err := authority.New(authority.Options{Store: e.store, Sessions: sessions, QuestionAnswerers: e.opts.QuestionAnswerers,
		Live: func() authority.Live { return e.trust().live() }})
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	e.auth = a
	return nil
}

// Authority is the one authority every surface asks who may see, request,
// cancel, decide, answer or claim what, under this engine's live
// configuration (Reload applies to it at once).
func (e *Engine) Authority() *authority.Authority { return e.auth }

// refusedRequest is what an event from someone who may not start runs
// records: the event (so a redelivery is recognised), a polite reply and an
// audit entry, and no run.
func (e *Engine) refusedRequest(ev core.ChannelEvent, why string) core.InboxRecordParams {
	text := fmt.Sprintf("Sorry, %s may not start runs here. If you should, ask an opsgate operator to add you to channels.%s.requesters.",
		ev.Actor.ID, ev.Channel)
	return core.InboxRecordParams{
		Event:   ev,
		Replies: []core.OutboxMessage{{ID: e.opts.NewID(), Thread: ev.Thread, Kind: core.KindReply, Text: text, CreatedAt: e.now()}},
		Audit: []approvals.AuditEntry{e.audit(approvals.AuditRequestRefused, ev.Actor.ID, "", "", "", map[string]any{
			"channel": ev.Channel, "event_id": ev.EventID, "thread": ev.Thread.String(), "why": why,
		})},
	}
}

// gateTrust is the live trust configuration as the gate judges with it.
func (e *Engine) gateTrust() gate.Trust {
	tr := e.trust()
	return gate.Trust{Policy: tr.policy, PolicyVersion: tr.policyVersion, Dir: tr.dir}
}

// CancelAllowed reports whether actor, an identity a chat platform
// verified, may cancel the run: its requester (any identity of the same
// person) or an approver who may decide one of its approvals now
// (authority.Cancel). It returns nil, an error matching core.ErrForbidden
// or core.ErrNotFound (an unknown run, or one the actor may not see), or
// the store's error. Token surfaces ask the authority with their token's
// actor instead.
func (e *Engine) CancelAllowed(ctx context.Context, runID string, actor core.Actor) error {
	_, err := e.auth.Run(ctx, authority.ChatActor(actor.ID), authority.Cancel, runID)
	return err
}

// RevokeGrant revokes a session or forever grant, audited in the same
// transaction ("grant.revoked"). Revoking only ever takes permission away,
// so any approver may do it; the surfaces check the caller's scope.
func (e *Engine) RevokeGrant(ctx context.Context, id string, actor core.Actor) (*approvals.Grant, error) {
	now := e.now()
	g, err := e.store.GrantRevoke(ctx, approvals.GrantRevokeParams{ID: id, Actor: actor.ID, At: now,
		Audit: []approvals.AuditEntry{e.audit(approvals.AuditGrantRevoked, actor.ID, "", "", "", map[string]any{"grant": id})}})
	if err != nil {
		return g, fmt.Errorf("engine: revoke grant %s: %w", id, err)
	}
	e.log.Info("grant revoked", "grant", id, "tool", g.Tool, "scope", g.Scope, "by", actor.ID)
	return g, nil
}

// PolicyInForce is the policy as the gate judges with it now (after the
// last reload): what GET /api/v1/policy, the console and the CLI show.
func (e *Engine) PolicyInForce() *approvals.Policy { return e.trust().policy }
