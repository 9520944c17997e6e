package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/markdown"
)

// Escalation (docs/architecture.md, "Escalation"): a pending approval
// climbs its ladder while nobody decides it. The sweeper (Run's, every
// PollInterval) fires the steps due — a reminder, approvers added — each
// claimed in the store by compare-and-set on the approval's step count, so
// a step fires once across replicas and restarts; the terminal default is
// the approval's end, applied by the same sweep as expiry (approvals.Lapse).

// EscalateDue fires every escalation step due now and returns how many
// fired here. Run's sweeper calls it; it is exported for admin tools,
// tests and the benchmark.
func (e *Engine) EscalateDue(ctx context.Context) (int, error) {
	fired := 0
	for {
		now := e.now()
		ids, err := e.store.ApprovalListEscalating(ctx, now, sweepBatch)
		if err != nil {
			return fired, fmt.Errorf("engine: list escalating approvals: %w", err)
		}
		progressed := 0
		for _, id := range ids {
			ok, err := e.escalate(ctx, id, now)
			if err != nil {
				return fired, err
			}
			if ok {
				progressed++
			}
		}
		fired += progressed
		// A step fired may leave the next one due too (after a long
		// outage): look again until a pass fires nothing. Ladders are
		// finite, so this ends.
		if progressed == 0 {
			return fired, nil
		}
	}
}

// escalate fires the step approval id is due for at now, if it still is.
func (e *Engine) escalate(ctx context.Context, id string, now time.Time) (bool, error) {
	quiet, err := e.quietInBatch(ctx, id)
	if err != nil {
		return false, err
	}
	var step approvals.Step
	_, fired, err := e.store.ApprovalEscalate(ctx, core.ApprovalEscalateParams{ID: id, Fire: func(a *approvals.Approval) *core.Escalation {
		f, ok := approvals.Escalate(a, now, e.trust().dir)
		if !ok {
			return nil
		}
		step = f.Step
		var out []core.OutboxMessage
		if !quiet {
			out = e.stepMessages(a, f, now)
		}
		return &core.Escalation{Approval: f.Approval, Outbox: out, Audit: []approvals.AuditEntry{f.Audit}}
	}})
	if errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("engine: escalate approval %s: %w", id, err)
	}
	if fired {
		e.m.escalations.WithLabelValues(step.Kind()).Inc()
		e.log.Info("approval escalated", "approval", id, "step", step.Kind(), "after", step.After)
	}
	return fired, nil
}

// quietInBatch reports whether approval id is a later call of a batch
// whose lead still waits: the batch has one card, so only the lead's
// steps speak (every call's ladder still climbs, and approvers are added
// to each).
func (e *Engine) quietInBatch(ctx context.Context, id string) (bool, error) {
	a, err := e.store.ApprovalGet(ctx, id)
	if errors.Is(err, core.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("engine: escalate approval %s: %w", id, err)
	}
	batch, err := e.Batch(ctx, a)
	if err != nil {
		return false, err
	}
	lead := batch[0]
	return lead.ID != a.ID && lead.Status == approvals.StatusPending, nil
}

// stepMessages are what a fired step says: a line in the request's thread
// (who is awaited or added, what happens next), and to each person it
// concerns a direct message where their platform has them — the reminder's
// text, or, for an approver just added, the card itself (whose thread the
// approval then keeps, so the decision updates it there too).
func (e *Engine) stepMessages(a *approvals.Approval, f *approvals.Fired, now time.Time) []core.OutboxMessage {
	card := e.Card(f.Approval)
	waited := now.Sub(a.CreatedAt).Round(time.Minute)
	what := markdown.Escape(card.Headline())
	next := ""
	if n, ok := f.Approval.NextStep(); ok {
		next = " Next: " + n.Sentence() + "."
	}
	decide := ""
	if card.ConsoleURL != "" {
		decide = " Decide: " + card.ConsoleURL
	}
	var thread, direct string
	if len(f.Step.AddApprovers) > 0 {
		thread = fmt.Sprintf("⏫ Escalated after %s without a decision: %s may now decide approval `%s` (%s) too.%s%s",
			waited, markdown.Escape(strings.Join(f.Step.AddApprovers, ", ")), a.ID, what, next, decide)
	} else {
		awaited := markdown.Escape(strings.Join(a.Entries(), ", "))
		if q := max(a.Quorum, 1); q > 1 {
			awaited += fmt.Sprintf(" (%d of %d approvals so far)", a.CountedApprovals(), q)
		}
		thread = fmt.Sprintf("⏰ Reminder: approval `%s` (%s) has waited %s for %s.%s%s", a.ID, what, waited, awaited, next, decide)
		direct = fmt.Sprintf("⏰ Reminder: approval `%s` waits for you: %s, requested by %s in %s.%s%s",
			a.ID, what, markdown.Escape(a.Requester), markdown.Escape(a.Thread), next, decide)
	}
	var out []core.OutboxMessage
	if th, err := core.ParseThread(a.Thread); err == nil {
		out = e.toThread(th, core.OutboxMessage{ID: e.opts.NewID(), Thread: th, Kind: core.KindReply, Text: thread,
			RunID: a.RunID, CreatedAt: now})
	}
	var sent []core.Thread
	for _, id := range f.Notify {
		th, ok := e.directThread(id)
		if !ok || th.String() == a.Thread || slices.Contains(sent, th) {
			continue
		}
		sent = append(sent, th)
		m := core.OutboxMessage{ID: e.opts.NewID(), Thread: th, RunID: a.RunID, CreatedAt: now}
		if direct == "" {
			m.Kind, m.ApprovalID = core.KindCard, a.ID
			if !slices.Contains(f.Approval.CardThreads, th.String()) {
				f.Approval.CardThreads = append(f.Approval.CardThreads, th.String())
			}
		} else {
			m.Kind, m.Text = core.KindReply, direct
		}
		out = append(out, m)
	}
	return out
}

// directThread is the direct conversation with identity on its platform,
// when the platform has them (Options.Direct).
func (e *Engine) directThread(identity string) (core.Thread, bool) {
	if e.opts.Direct == nil {
		return core.Thread{}, false
	}
	return e.opts.Direct(identity)
}

// lapsed records what the sweep's end of an approval did: a terminal
// default counts as an escalation step and a decision.
func (e *Engine) lapsed(a *approvals.Approval) {
	if a == nil || a.Status == approvals.StatusExpired || a.DecidedAt == nil || len(a.Decisions) == 0 {
		return
	}
	if d := a.Decisions[len(a.Decisions)-1]; d.ByEscalation() {
		kind := approvals.StepDeny
		if d.Action == approvals.ActionApprove {
			kind = approvals.StepApprove
		}
		e.m.escalations.WithLabelValues(kind).Inc()
		e.m.decided(a)
	}
}
