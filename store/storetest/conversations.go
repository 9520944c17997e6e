package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// testMessageThreads: every chunk's platform reference leads back to the
// thread its message went to (a reply to the bot continues that thread),
// whichever way the chunk was recorded; a reference reused by an edit in
// another thread keeps its first thread; a channel's references are its
// own; OutboxRefs reads a message's references in order, and Replaces
// survives the queue.
func testMessageThreads(t *testing.T, s core.Store) {
	th1, th2 := thread("conv-1"), thread("conv-2")
	a := core.MessageRef{Channel: "console", ID: "m-a"}
	if _, err := s.ThreadOfMessage(ctx(t), a); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("ThreadOfMessage of an unknown message err = %v, want ErrNotFound", err)
	}
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: th1, Text: "first"},
		core.OutboxMessage{Thread: th2, Text: "second", Kind: core.KindQuestionUpdate, Replaces: "q-1"})
	claimOutbox(t, s, "console", "o1", t0)
	b, c := core.MessageRef{Channel: "console", ID: "m-b"}, core.MessageRef{Channel: "console", ID: "m-c"}
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, a, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 1, c, t0); err != nil {
		t.Fatal(err)
	}
	if last, ok := s.(interface {
		OutboxLastChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error
	}); ok {
		if err := last.OutboxLastChunkSent(ctx(t), ids[1], "o1", 0, b, t0); err != nil {
			t.Fatal(err)
		}
	} else if err := s.OutboxChunkSent(ctx(t), ids[1], "o1", 0, b, t0); err != nil {
		t.Fatal(err)
	}
	// Recording a chunk again (a retry after a lost answer) changes nothing.
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, a, t0); err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[core.MessageRef]core.Thread{a: th1, c: th1, b: th2} {
		got, err := s.ThreadOfMessage(ctx(t), ref)
		if err != nil || got != want {
			t.Errorf("ThreadOfMessage(%s) = %v, %v; want %v", ref.ID, got, err, want)
		}
	}
	if _, err := s.ThreadOfMessage(ctx(t), core.MessageRef{Channel: "slack", ID: "m-a"}); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another channel's message with the same id err = %v, want ErrNotFound", err)
	}
	// A card update edits the card in place and returns its reference: the
	// reference keeps the thread it was first sent to.
	ids3 := queueMsgs(t, s, core.OutboxMessage{Thread: thread("conv-3"), Text: "edit"})
	claimOutbox(t, s, "console", "o2", t0.Add(time.Second))
	if err := s.OutboxChunkSent(ctx(t), ids3[0], "o2", 0, a, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ThreadOfMessage(ctx(t), a); err != nil || got != th1 {
		t.Errorf("after an edit elsewhere ThreadOfMessage = %v, %v; want %v", got, err, th1)
	}
	rs, ok := s.(core.OutboxRefStore)
	if !ok {
		t.Fatal("the store is no core.OutboxRefStore")
	}
	got, err := rs.OutboxRefs(ctx(t), ids[0])
	if err != nil || !slices.Equal(got, []core.MessageRef{a, c}) {
		t.Errorf("OutboxRefs = %v, %v; want [a c]", got, err)
	}
	if _, err := rs.OutboxRefs(ctx(t), "no-such-msg"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("OutboxRefs of an unknown message err = %v, want ErrNotFound", err)
	}
	ds, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliverySent, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ds, func(d *core.Delivery) bool { return d.ID == ids[1] })
	if i < 0 || ds[i].Replaces != "q-1" || ds[i].Kind != core.KindQuestionUpdate {
		t.Errorf("queued update read back as %+v; want kind %s replacing q-1", ds, core.KindQuestionUpdate)
	}
	// The checkpoint's write path keeps it too.
	th4 := thread("conv-4")
	runID := queueRun(t, s, th4)
	upd := core.OutboxMessage{ID: newID("msg"), Thread: th4, Kind: core.KindQuestionUpdate, Text: "answered", Replaces: "q-2", CreatedAt: t0}
	if err := s.RunCheckpoint(ctx(t), core.Checkpoint{RunID: runID, Now: t0, ExpectStatus: []core.RunStatus{core.RunQueued},
		Outbox: []core.OutboxMessage{upd}}); err != nil {
		t.Fatal(err)
	}
	pend, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliveryPending, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	i = slices.IndexFunc(pend, func(d *core.Delivery) bool { return d.ID == upd.ID })
	if i < 0 || pend[i].Replaces != "q-2" || pend[i].RunID != runID {
		t.Errorf("checkpointed update read back as %+v; want it replacing q-2 in run %s", pend, runID)
	}
}

// testThreadSeen: a thread is seen once it holds a recorded inbound event
// or a queued outbox message (a card sent to an approver's DM thread, say),
// and only that thread: another thread, or the same key on another
// channel, is not.
func testThreadSeen(t *testing.T, s core.Store) {
	seen := func(th core.Thread) bool {
		t.Helper()
		ok, err := s.ThreadSeen(ctx(t), th)
		if err != nil {
			t.Fatalf("ThreadSeen(%s): %v", th, err)
		}
		return ok
	}
	in, out := thread(newID("seen-in")), thread(newID("seen-out"))
	if seen(in) || seen(out) {
		t.Fatal("a thread nothing was recorded in is seen")
	}
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(in),
		Replies: []core.OutboxMessage{{Thread: out, Kind: core.KindReply, Text: "elsewhere", CreatedAt: t0}}}); err != nil {
		t.Fatal(err)
	}
	if !seen(in) {
		t.Error("the thread of a recorded event is not seen")
	}
	if !seen(out) {
		t.Error("the thread of a queued message is not seen")
	}
	if seen(core.Thread{Channel: "slack", Key: in.Key}) {
		t.Error("the same key on another channel is seen")
	}
	if seen(thread(newID("seen-other"))) {
		t.Error("another thread is seen")
	}
}
