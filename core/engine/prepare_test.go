package engine

import (
	"context"
	"errors"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// TestPrepareEventWritesNothing: PrepareEvent routes like HandleEvent — a
// flow command makes a queued run of the sender, a sender the channel's
// requesters leave out gets the refusal — and writes nothing; what it
// cannot prepare (a decision, an answer, an unknown agent, a missing
// field) is refused.
func TestPrepareEventWritesNothing(t *testing.T) {
	t.Parallel()
	h := setup(t, backends[0], func(o *Options) {
		o.Requesters = map[string]Requesters{"slack": {Entries: []string{"schedule:nightly"}}}
	})
	ctx := context.Background()
	th := core.Thread{Channel: "console", Key: "prep"}
	ev := core.ChannelEvent{Channel: "console", EventID: "schedule:nightly:2030-01-02T03:00:00Z",
		Actor: core.Actor{ID: "schedule:nightly"}, Thread: th, Text: "deploy api 1.2.3"}
	p, refused, err := h.eng.PrepareEvent(ev, "")
	if err != nil || refused || p.Run == nil || p.Run.Flow != "deploy" || p.Run.Requester != "schedule:nightly" ||
		p.Run.Status != core.RunQueued || p.Event.EventID != ev.EventID || p.Event.ReceivedAt.IsZero() {
		t.Fatalf("PrepareEvent = %+v, %v, %v", p, refused, err)
	}
	// Named literally among slack's requesters, the schedule may start
	// runs there; another schedule may not.
	sl := ev
	sl.Channel, sl.Thread = "slack", core.Thread{Channel: "slack", Key: "T/C/1"}
	if _, refused, err := h.eng.PrepareEvent(sl, ""); err != nil || refused {
		t.Errorf("named requester: refused %v, %v", refused, err)
	}
	sl.Actor.ID = "schedule:other"
	p, refused, err = h.eng.PrepareEvent(sl, "")
	if err != nil || !refused || p.Run != nil || len(p.Replies) != 1 || len(p.Audit) != 1 || p.Audit[0].Kind != approvals.AuditRequestRefused {
		t.Errorf("refused requester = %+v, %v, %v", p, refused, err)
	}
	for name, bad := range map[string]core.ChannelEvent{
		"NoEventID":  {Channel: "console", Actor: ev.Actor, Thread: th, Text: "x"},
		"NoThread":   {Channel: "console", EventID: "e", Actor: ev.Actor, Text: "x"},
		"NoActor":    {Channel: "console", EventID: "e", Thread: th, Text: "x"},
		"Decision":   {Channel: "console", EventID: "e", Actor: ev.Actor, Thread: th, Decision: &core.Decision{ApprovalID: "a", Action: approvals.ActionApprove}},
		"AnswerSent": {Channel: "console", EventID: "e", Actor: ev.Actor, Thread: th, Answer: &core.AnswerEvent{}},
	} {
		if _, _, err := h.eng.PrepareEvent(bad, ""); err == nil {
			t.Errorf("%s: prepared", name)
		}
	}
	if _, _, err := h.eng.PrepareEvent(ev, "nobody"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown agent: %v, want ErrNotFound", err)
	}
	if runs, _, err := h.store.RunList(ctx, core.RunListParams{Limit: 10}); err != nil || len(runs) != 0 {
		t.Errorf("PrepareEvent wrote %d runs (%v)", len(runs), err)
	}
	if ms, _, err := h.store.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: th}); err != nil || len(ms) != 0 {
		t.Errorf("PrepareEvent wrote %d thread messages (%v)", len(ms), err)
	}
}
