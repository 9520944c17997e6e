package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// WaitTimeout bounds every Wait helper: a hang backstop, never a latency
// bound — a loaded CI machine running -race (load 60 on 2 cores) has
// taken longer than 15 s for a correct answer.
const WaitTimeout = 2 * time.Minute

// Eventually polls cond every 10 ms until it returns true, failing the test
// with what after WaitTimeout.
func (h *Harness) Eventually(what string, cond func() bool) {
	h.T.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			h.T.Fatalf("adaptertest: timed out after %v waiting for %s", WaitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Send hands the engine a chat message from actor in thread, as if the
// adapter had received and normalized it, and returns the receipt. Adapter
// tests that exercise their own inbound path post to their handler instead.
func (h *Harness) Send(actor string, thread core.Thread, text string) core.Receipt {
	h.T.Helper()
	rc, err := h.Engine.HandleEvent(context.Background(), core.ChannelEvent{
		Channel: thread.Channel, EventID: fmt.Sprintf("adaptertest-%d", h.events.Add(1)),
		Actor: core.Actor{ID: actor}, Thread: thread, Text: text, ReceivedAt: time.Now(),
	})
	if err != nil {
		h.T.Fatalf("adaptertest: handle %q: %v", text, err)
	}
	return rc
}

// WaitRun waits until run runID has status and returns it.
func (h *Harness) WaitRun(runID string, status core.RunStatus) *core.Run {
	h.T.Helper()
	var run *core.Run
	h.Eventually(fmt.Sprintf("run %s to be %s", runID, status), func() bool {
		r, err := h.Store.RunGet(context.Background(), runID)
		if err != nil && !errors.Is(err, core.ErrNotFound) {
			h.T.Fatalf("adaptertest: get run %s: %v", runID, err)
		}
		run = r
		if r != nil && r.Status.Final() && r.Status != status {
			h.T.Fatalf("adaptertest: run %s ended %s (%s: %s), want %s", runID, r.Status, r.ErrorCode, r.ErrorMessage, status)
		}
		return r != nil && r.Status == status
	})
	return run
}

// WaitApprovalPending waits until run runID waits for approval and returns
// the pending approval.
func (h *Harness) WaitApprovalPending(runID string) *approvals.Approval {
	h.T.Helper()
	h.WaitRun(runID, core.RunWaitingApproval)
	var found *approvals.Approval
	h.Eventually("a pending approval of run "+runID, func() bool {
		items, _, err := h.Store.ApprovalList(context.Background(), approvals.ApprovalListParams{
			RunID: runID, Status: approvals.StatusPending, Limit: 10,
		})
		if err != nil {
			h.T.Fatalf("adaptertest: list approvals of %s: %v", runID, err)
		}
		if len(items) > 0 {
			found = items[0]
		}
		return found != nil
	})
	return found
}

// Dispatches returns every call of the default deploy tool, in order.
func (h *Harness) Dispatches() []Call { return h.Deploy.Calls() }

// Decide decides an approval through the engine, as the console or the API
// would: the way to test that "a decision from another surface updates
// this card".
func (h *Harness) Decide(actor, approvalID, action, reason string) (*approvals.Approval, error) {
	ch, _, _ := cutChannel(actor)
	return h.Engine.Decide(context.Background(), core.Actor{ID: actor}, ch,
		core.Decision{ApprovalID: approvalID, Action: approvals.Action(action), Reason: reason})
}

func cutChannel(actor string) (string, string, bool) {
	for i := range len(actor) {
		if actor[i] == ':' {
			return actor[:i], actor[i+1:], true
		}
	}
	return actor, "", false
}

// QueueReply puts a reply to thread straight into the outbox (recorded with
// a synthetic inbound event, the way the engine queues help text) and
// returns its outbox id, so a test can push text of any size through the
// real pipeline without a tool producing it.
func (h *Harness) QueueReply(thread core.Thread, text string) string {
	h.T.Helper()
	id := fmt.Sprintf("adaptertest-reply-%d-%d", time.Now().UnixNano(), h.events.Add(1))
	_, err := h.Store.InboxRecord(context.Background(), core.InboxRecordParams{
		Event: core.ChannelEvent{
			Channel: thread.Channel, EventID: id, Actor: core.Actor{ID: thread.Channel + ":adaptertest"},
			Thread: thread, ReceivedAt: time.Now(),
		},
		Replies: []core.OutboxMessage{{ID: id, Thread: thread, Kind: core.KindReply, Text: text}},
	})
	if err != nil {
		h.T.Fatalf("adaptertest: queue reply: %v", err)
	}
	return id
}

// Deliveries returns every outbox message (any status), oldest first.
func (h *Harness) Deliveries() []*core.Delivery {
	h.T.Helper()
	var out []*core.Delivery
	cursor := ""
	for {
		items, next, err := h.Store.OutboxList(context.Background(), core.OutboxListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			h.T.Fatalf("adaptertest: list outbox: %v", err)
		}
		out = append(out, items...)
		if next == "" || len(items) == 0 {
			return out
		}
		cursor = next
	}
}

// Delivery returns the outbox message id, or nil.
func (h *Harness) Delivery(id string) *core.Delivery {
	h.T.Helper()
	for _, d := range h.Deliveries() {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// WaitDelivered waits until outbox message id is sent and returns it; a
// dead-lettered message fails the test with its last error.
func (h *Harness) WaitDelivered(id string) *core.Delivery {
	h.T.Helper()
	var d *core.Delivery
	h.Eventually("outbox message "+id+" to be sent", func() bool {
		d = h.Delivery(id)
		if d != nil && d.Status == core.DeliveryDead {
			h.T.Fatalf("adaptertest: outbox message %s dead after %d attempts: %s", id, d.Attempts, d.LastError)
		}
		return d != nil && d.Status == core.DeliverySent
	})
	return d
}

// WaitIdle waits until no outbox message is pending: everything queued so
// far has been delivered (or dead-lettered).
func (h *Harness) WaitIdle() {
	h.T.Helper()
	h.Eventually("the outbox to drain", func() bool {
		for _, d := range h.Deliveries() {
			if d.Status == core.DeliveryPending {
				return false
			}
		}
		return true
	})
}

// Counts is how much the store holds, for asserting that bad input changed
// nothing.
type Counts struct {
	Runs, Approvals, Outbox, Audit int
}

// Counts returns what the store holds now.
func (h *Harness) Counts() Counts {
	h.T.Helper()
	ctx := context.Background()
	var c Counts
	cursor := ""
	for {
		runs, next, err := h.Store.RunList(ctx, core.RunListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			h.T.Fatalf("adaptertest: list runs: %v", err)
		}
		c.Runs += len(runs)
		if next == "" || len(runs) == 0 {
			break
		}
		cursor = next
	}
	cursor = ""
	for {
		aps, next, err := h.Store.ApprovalList(ctx, approvals.ApprovalListParams{Limit: 500, Cursor: cursor})
		if err != nil {
			h.T.Fatalf("adaptertest: list approvals: %v", err)
		}
		c.Approvals += len(aps)
		if next == "" || len(aps) == 0 {
			break
		}
		cursor = next
	}
	c.Outbox = len(h.Deliveries())
	var after int64
	for {
		es, err := h.Store.AuditList(ctx, approvals.AuditListParams{After: after, Limit: 500})
		if err != nil {
			h.T.Fatalf("adaptertest: list audit: %v", err)
		}
		c.Audit += len(es)
		if len(es) == 0 {
			break
		}
		after = es[len(es)-1].Seq
	}
	return c
}

// StoreEmpty fails t unless the store holds no run, approval, outbox
// message or audit entry: what a test of forged or malformed requests
// checks after posting them to a fresh harness.
func (h *Harness) StoreEmpty(t testing.TB) {
	t.Helper()
	if c := h.Counts(); c != (Counts{}) {
		t.Errorf("adaptertest: store recorded %+v, want nothing", c)
	}
}

// Unchanged fails t if the store's counts differ from before.
func (h *Harness) Unchanged(t testing.TB, before Counts) {
	t.Helper()
	if c := h.Counts(); c != before {
		t.Errorf("adaptertest: store changed from %+v to %+v, want no change", before, c)
	}
}

// RefusedActions counts actor's refused decision attempts in the audit log
// (kind approval.refused) by the action they asked for, so an adapter test
// can check that every refused click or reply was audited, whatever surface
// it came from.
func (h *Harness) RefusedActions(actor string) map[string]int {
	h.T.Helper()
	entries, err := h.Store.AuditList(context.Background(), approvals.AuditListParams{Actor: actor, Limit: 1000})
	if err != nil {
		h.T.Fatalf("adaptertest: audit list: %v", err)
	}
	out := map[string]int{}
	for _, en := range entries {
		if en.Kind != "approval.refused" {
			continue
		}
		var d struct{ Action string }
		if err := json.Unmarshal(en.Detail, &d); err != nil {
			h.T.Fatalf("adaptertest: audit detail %s: %v", en.Detail, err)
		}
		out[d.Action]++
	}
	return out
}
