package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
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

// Requesters is who may start runs on one channel.
type Requesters struct {
	// Anyone lets every sender start runs ("anyone" in the config).
	Anyone bool
	// Entries are "group:<name>", "person:<name>" or identities. With none
	// (and not Anyone), only identities the configuration knows — listed
	// under people or in an approver group — may start runs.
	Entries []string
}

// trustState is a Trust compiled for use: the directory built once.
type trustState struct {
	policy     *approvals.Policy
	dir        *approvals.Directory
	requesters map[string]Requesters
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
	return &trustState{policy: p, dir: approvals.NewDirectory(t.People, t.Groups), requesters: t.Requesters, groups: t.Groups, sessionTTL: ttl}
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

// mayRequest reports why actor may not start runs on channel, or "".
func (tr *trustState) mayRequest(channel, actor string) string {
	rq, gated := tr.requesters[channel]
	switch {
	case !gated || rq.Anyone:
		return ""
	case len(rq.Entries) == 0:
		if tr.dir.Known(actor) {
			return ""
		}
		return "not known to the configuration (people or approver groups)"
	case slices.Contains(rq.Entries, actor), slices.Contains(tr.dir.Expand(rq.Entries), actor):
		// A machine identity that never decides (a schedule) is named
		// literally: Expand leaves such identities out.
		return ""
	}
	return "not among the requesters of this channel"
}

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

// maxGrantScan bounds how many active grants of one tool the gate reads.
const maxGrantScan = 1000

// grantFor returns an active grant covering the call, or nil.
func (e *Engine) grantFor(ctx context.Context, tr *trustState, c approvals.Call) (*approvals.Grant, error) {
	now := e.now()
	p := approvals.GrantListParams{Tool: c.Tool, ActiveAt: now, Limit: 200}
	for seen := 0; seen < maxGrantScan; {
		gs, next, err := e.store.GrantList(ctx, p)
		if err != nil {
			return nil, err
		}
		for _, g := range gs {
			if g.Covers(c, now, tr.policy.ForeverHighImpact) {
				return g, nil
			}
		}
		seen += len(gs)
		if next == "" {
			break
		}
		p.Cursor = next
	}
	return nil, nil
}

// CancelAllowed reports whether actor may cancel the run without admin
// rights: the run's requester (any identity of the same person) or an
// approver who may decide one of its approvals now. It returns nil,
// core.ErrForbidden (wrapped, saying who may), or the store's error
// (core.ErrNotFound for an unknown run).
func (e *Engine) CancelAllowed(ctx context.Context, runID string, actor core.Actor) error {
	run, err := e.store.RunGet(ctx, runID)
	if err != nil {
		return fmt.Errorf("engine: cancel %s: %w", runID, err)
	}
	tr := e.trust()
	if tr.dir.SamePerson(actor.ID, run.Requester) {
		return nil
	}
	as, _, err := e.store.ApprovalList(ctx, approvals.ApprovalListParams{RunID: runID, Limit: 100})
	if err != nil {
		return fmt.Errorf("engine: cancel %s: list approvals: %w", runID, err)
	}
	for _, a := range as {
		if slices.Contains(a.Eligible, actor.ID) && slices.Contains(tr.dir.Expand(a.Approvers), actor.ID) && !approvals.NeverDecides(actor.ID) {
			return nil
		}
	}
	return fmt.Errorf("engine: cancel %s: only its requester (%s), its approvers or an admin may cancel it: %w", runID, run.Requester, core.ErrForbidden)
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
