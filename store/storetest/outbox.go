package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// queueMsgs queues replies (through the inbox, as a help text would be) and
// returns their ids in order.
func queueMsgs(t *testing.T, s core.Store, msgs ...core.OutboxMessage) []string {
	t.Helper()
	ids := make([]string, len(msgs))
	for i := range msgs {
		if msgs[i].ID == "" {
			msgs[i].ID = newID("msg")
		}
		if msgs[i].Kind == "" {
			msgs[i].Kind = core.KindReply
		}
		if msgs[i].CreatedAt.IsZero() {
			msgs[i].CreatedAt = t0
		}
		ids[i] = msgs[i].ID
	}
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(msgs[0].Thread), Replies: msgs}); err != nil {
		t.Fatalf("queue replies: %v", err)
	}
	return ids
}

func claimOutbox(t *testing.T, s core.Store, channel, owner string, now time.Time) []*core.Delivery {
	t.Helper()
	ds, err := s.OutboxClaim(ctx(t), core.OutboxClaimParams{Channel: channel, Owner: owner, Limit: 10, Now: now,
		LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("OutboxClaim: %v", err)
	}
	return ds
}

func deliveryIDs(ds []*core.Delivery) []string {
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}

func testOutboxThreadOrder(t *testing.T, s core.Store) {
	tt, tu := thread("T"), thread("U")
	slack := core.Thread{Channel: "slack", Key: "C1/1.0"}
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: tt, Text: "1"}, core.OutboxMessage{Thread: tt, Text: "2"},
		core.OutboxMessage{Thread: tu, Text: "3"}, core.OutboxMessage{Thread: slack, Text: "4"})
	got := claimOutbox(t, s, "console", "o1", t0)
	sameIDs(t, "first claim", deliveryIDs(got), ids[0], ids[2])
	if len(got) > 0 && (got[0].Text != "1" || got[0].Thread != tt || got[0].Status != core.DeliveryPending) {
		t.Errorf("delivery = %+v", got[0])
	}
	sameIDs(t, "claim by another owner", deliveryIDs(claimOutbox(t, s, "console", "o2", t0)))
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, core.MessageRef{Channel: "console", ID: "m1"}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.OutboxDone(ctx(t), ids[0], "o1", t0); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "claim after the first was sent", deliveryIDs(claimOutbox(t, s, "console", "o2", t0)), ids[1])
	sameIDs(t, "slack claim", deliveryIDs(claimOutbox(t, s, "slack", "o3", t0)), ids[3])
	sent, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliverySent})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent) != 1 || sent[0].ID != ids[0] || sent[0].SentAt == nil || !sent[0].SentAt.Equal(t0) || sent[0].ChunksSent != 1 {
		t.Errorf("sent = %+v", sent)
	}
}

func testOutboxLeasedAndDue(t *testing.T, s core.Store) {
	th := thread("lease-due")
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: th, Text: "1"}, core.OutboxMessage{Thread: th, Text: "2"})
	sameIDs(t, "claim", deliveryIDs(claimOutbox(t, s, "console", "o1", t0)), ids[0])
	sameIDs(t, "claim while leased", deliveryIDs(claimOutbox(t, s, "console", "o2", t0.Add(30*time.Second))))
	// Its holder does not take it again either: re-claiming a message being
	// sent would lock its row against the send's own update.
	sameIDs(t, "claim by its holder while leased", deliveryIDs(claimOutbox(t, s, "console", "o1", t0.Add(30*time.Second))))
	sameIDs(t, "claim after lease", deliveryIDs(claimOutbox(t, s, "console", "o2", t0.Add(2*time.Minute))), ids[0])
	if err := s.OutboxRetry(ctx(t), core.OutboxRetryParams{ID: ids[0], Owner: "o1", Error: "x", RetryAt: t0}); !errors.Is(err, core.ErrConflict) {
		t.Errorf("retry by the old owner err = %v, want ErrConflict", err)
	}
	if err := s.OutboxRetry(ctx(t), core.OutboxRetryParams{ID: ids[0], Owner: "o2", Error: "503 from platform",
		RetryAt: t0.Add(10 * time.Minute), Now: t0.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "claim before retry is due (thread held back too)",
		deliveryIDs(claimOutbox(t, s, "console", "o2", t0.Add(5*time.Minute))))
	got := claimOutbox(t, s, "console", "o3", t0.Add(10*time.Minute))
	sameIDs(t, "claim when due", deliveryIDs(got), ids[0])
	if len(got) == 1 && (got[0].Attempts != 1 || got[0].LastError != "503 from platform" || !got[0].NextAttemptAt.Equal(t0.Add(10*time.Minute))) {
		t.Errorf("retried delivery = %+v", got[0])
	}
}

func testOutboxChunkSent(t *testing.T, s core.Store) {
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: thread("chunks"), Text: "long"})
	id := ids[0]
	claimOutbox(t, s, "console", "o1", t0)
	ref := func(i int) core.MessageRef { return core.MessageRef{Channel: "console", ID: fmt.Sprintf("m%d", i)} }
	if err := s.OutboxChunkSent(ctx(t), id, "o2", 0, ref(0), t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("chunk by another owner err = %v, want ErrConflict", err)
	}
	for _, c := range []struct {
		chunk int
		want  error
	}{{0, nil}, {0, nil}, {2, core.ErrConflict}, {1, nil}} {
		if err := s.OutboxChunkSent(ctx(t), id, "o1", c.chunk, ref(c.chunk), t0); !errors.Is(err, c.want) {
			t.Errorf("chunk %d err = %v, want %v", c.chunk, err, c.want)
		}
	}
	if err := s.OutboxChunkSent(ctx(t), "no-such-msg", "o1", 0, ref(0), t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown message err = %v, want ErrNotFound", err)
	}
	if err := s.OutboxDone(ctx(t), id, "o2", t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("done by another owner err = %v, want ErrConflict", err)
	}
	all := allOutbox(t, s)
	if len(all) != 1 || all[0].ChunksSent != 2 || fmt.Sprint(all[0].Refs) != fmt.Sprint([]core.MessageRef{ref(0), ref(1)}) ||
		all[0].Status != core.DeliveryPending {
		t.Errorf("message = %+v, want 2 chunks with refs m0 m1, still pending", all)
	}
}

// testOutboxLastChunkSent: a store that records the last chunk and the
// send in one step (an optional capability of the delivery worker) does
// exactly what OutboxChunkSent then OutboxDone do.
func testOutboxLastChunkSent(t *testing.T, s core.Store) {
	last, ok := s.(interface {
		OutboxLastChunkSent(ctx context.Context, id, owner string, chunk int, ref core.MessageRef, now time.Time) error
	})
	if !ok {
		t.Skip("store has no OutboxLastChunkSent")
	}
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: thread("last-a"), Text: "a"}, core.OutboxMessage{Thread: thread("last-a"), Text: "b"})
	claimOutbox(t, s, "console", "o1", t0)
	ref := func(i int) core.MessageRef { return core.MessageRef{Channel: "console", ID: fmt.Sprintf("m%d", i)} }
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, ref(0), t0); err != nil {
		t.Fatal(err)
	}
	if err := last.OutboxLastChunkSent(ctx(t), ids[0], "o2", 1, ref(1), t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("last chunk by another owner err = %v, want ErrConflict", err)
	}
	if err := last.OutboxLastChunkSent(ctx(t), ids[0], "o1", 1, ref(1), t0); err != nil {
		t.Fatalf("last chunk: %v", err)
	}
	all := allOutbox(t, s)
	if all[0].ID != ids[0] || all[0].ChunksSent != 2 || fmt.Sprint(all[0].Refs) != fmt.Sprint([]core.MessageRef{ref(0), ref(1)}) ||
		all[0].Status != core.DeliverySent || all[0].SentAt.IsZero() {
		t.Errorf("message = %+v, want 2 chunks with refs m0 m1, sent", all[0])
	}
	// The thread's next message is its head now.
	if ds := claimOutbox(t, s, "console", "o1", t0); len(ds) != 1 || ds[0].ID != ids[1] {
		t.Errorf("after the last chunk, claim = %v, want [%s]", deliveryIDs(ds), ids[1])
	}
	// A retry after a lost answer (the chunk is recorded, the message sent)
	// is refused as a conflict, like OutboxDone after the message left the
	// caller: the worker only logs it.
	if err := last.OutboxLastChunkSent(ctx(t), ids[0], "o1", 1, ref(1), t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("repeated last chunk err = %v, want ErrConflict", err)
	}
	if err := last.OutboxLastChunkSent(ctx(t), "no-such-msg", "o1", 0, ref(0), t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown message err = %v, want ErrNotFound", err)
	}
}

func testOutboxRetryDead(t *testing.T, s core.Store) {
	th := thread("dead")
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: th, Text: "1"}, core.OutboxMessage{Thread: th, Text: "2"})
	claimOutbox(t, s, "console", "o1", t0)
	outbox, cancel := s.Subscribe(core.TopicOutbox)
	defer cancel()
	if err := s.OutboxRetry(ctx(t), core.OutboxRetryParams{ID: ids[0], Owner: "o1", Error: "400 bad request", Dead: true, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if !waitWake(outbox, 5*time.Second) {
		t.Error("dead-lettering did not wake the outbox (the thread's next message is free)")
	}
	dead, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliveryDead})
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].ID != ids[0] || dead[0].Attempts != 1 || dead[0].LastError != "400 bad request" {
		t.Errorf("dead = %+v", dead)
	}
	sameIDs(t, "claim after dead-letter", deliveryIDs(claimOutbox(t, s, "console", "o1", t0)), ids[1])
	if err := s.OutboxRequeue(ctx(t), ids[1], t0); !errors.Is(err, core.ErrConflict) {
		t.Errorf("requeue a pending message err = %v, want ErrConflict", err)
	}
	if err := s.OutboxRequeue(ctx(t), "no-such-msg", t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("requeue unknown err = %v, want ErrNotFound", err)
	}
	later := t0.Add(time.Hour)
	if err := s.OutboxRequeue(ctx(t), ids[0], later); err != nil {
		t.Fatal(err)
	}
	pending, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 1 || pending[0].ID != ids[0] || pending[0].Attempts != 0 || !pending[0].NextAttemptAt.Equal(later) {
		t.Errorf("requeued = %+v", pending)
	}
	_, next, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1})
	if err != nil || next == "" {
		t.Fatalf("first page cursor = %q, %v", next, err)
	}
	rest, _, err := s.OutboxList(ctx(t), core.OutboxListParams{Status: core.DeliveryPending, Limit: 1, Cursor: next})
	if err != nil || len(rest) != 1 || rest[0].ID != ids[1] {
		t.Errorf("second page = %+v, %v", rest, err)
	}
}

func testOutboxCardRef(t *testing.T, s core.Store) {
	th, other := thread("card"), thread("card-other")
	if _, err := s.OutboxCardRef(ctx(t), "ap-x", th); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("CardRef with no card err = %v, want ErrNotFound", err)
	}
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: th, Kind: core.KindCard, ApprovalID: "ap-x"},
		core.OutboxMessage{Thread: other, Kind: core.KindCard, ApprovalID: "ap-x"})
	if _, err := s.OutboxCardRef(ctx(t), "ap-x", th); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("CardRef of an unsent card err = %v, want ErrNotFound", err)
	}
	claimOutbox(t, s, "console", "o1", t0)
	want := core.MessageRef{Channel: "console", ID: "card-msg-1"}
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, want, t0); err != nil {
		t.Fatal(err)
	}
	got, err := s.OutboxCardRef(ctx(t), "ap-x", th)
	if err != nil || got == nil || *got != want {
		t.Errorf("CardRef = %+v, %v; want %+v", got, err, want)
	}
	if _, err := s.OutboxCardRef(ctx(t), "ap-x", other); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("CardRef in a thread where it was not sent err = %v, want ErrNotFound", err)
	}
}

func testLease(t *testing.T, s core.Store) {
	acquire := func(owner string, now time.Time, until time.Duration) bool {
		t.Helper()
		ok, err := s.LeaseAcquire(ctx(t), "slack:T1", owner, now, now.Add(until))
		if err != nil {
			t.Fatalf("LeaseAcquire: %v", err)
		}
		return ok
	}
	steps := []struct {
		owner string
		at    time.Duration
		want  bool
	}{
		{"o1", 0, true},
		{"o2", 30 * time.Second, false},
		{"o1", 30 * time.Second, true}, // renew to 1m30s
		{"o2", 89 * time.Second, false},
		{"o2", 90 * time.Second, true}, // expired: takeover
		{"o1", 91 * time.Second, false},
	}
	for i, st := range steps {
		if got := acquire(st.owner, t0.Add(st.at), time.Minute); got != st.want {
			t.Errorf("step %d: %s at +%s = %v, want %v", i, st.owner, st.at, got, st.want)
		}
	}
	if err := s.LeaseRelease(ctx(t), "slack:T1", "o1"); err != nil { // not the holder: no effect
		t.Fatal(err)
	}
	if acquire("o1", t0.Add(100*time.Second), time.Minute) {
		t.Error("a release by a non-holder freed the lease")
	}
	if err := s.LeaseRelease(ctx(t), "slack:T1", "o2"); err != nil {
		t.Fatal(err)
	}
	if !acquire("o1", t0.Add(100*time.Second), time.Minute) {
		t.Error("lease not free after its holder released it")
	}
	ok, err := s.LeaseAcquire(ctx(t), "other", "o2", t0, t0.Add(time.Minute))
	if err != nil || !ok {
		t.Errorf("independent lease = %v, %v", ok, err)
	}
}

func testSubscribe(t *testing.T, s core.Store) {
	a, cancelA := s.Subscribe(core.TopicOutbox)
	defer cancelA()
	b, cancelB := s.Subscribe(core.TopicOutbox)
	runs, cancelRuns := s.Subscribe(core.TopicRuns)
	defer cancelRuns()
	for range 5 {
		queueMsgs(t, s, core.OutboxMessage{Thread: thread("sub"), Text: "x"})
	}
	for name, ch := range map[string]<-chan struct{}{"a": a, "b": b} {
		if !waitWake(ch, 5*time.Second) {
			t.Fatalf("subscriber %s not woken", name)
		}
	}
	// Five commits coalesce: once drained, nothing more is pending locally.
	// (Postgres may still deliver a late notification, so give it a moment
	// and drain again before asserting quiet.)
	time.Sleep(200 * time.Millisecond)
	drain(a)
	if waitWake(a, 100*time.Millisecond) {
		t.Error("subscriber woken with nothing new")
	}
	if waitWake(runs, 100*time.Millisecond) {
		t.Error("runs subscriber woken by outbox-only commits")
	}
	cancelB()
	cancelB() // idempotent
	drain(b)
	queueMsgs(t, s, core.OutboxMessage{Thread: thread("sub"), Text: "y"})
	if !waitWake(a, 5*time.Second) {
		t.Error("remaining subscriber not woken")
	}
	if waitWake(b, 300*time.Millisecond) {
		t.Error("cancelled subscriber woken")
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

func testPing(t *testing.T, s core.Store) {
	if err := s.Ping(ctx(t)); err != nil {
		t.Errorf("Ping: %v", err)
	}
}

// testSendLease: the send lease carries its holder's state to the next
// holder. A fresh lease has no prior holder; a live one is refused to
// others; a hand-over ends it at once (PriorUntil zero, the state complete)
// and frees the holder's claims on its channel's pending messages, and only
// those; a lapsed lease reports when it lapsed, with the state of its last
// renewal; a hand-over by a non-holder changes nothing.
func testSendLease(t *testing.T, s core.Store) {
	acquire := func(owner string, at time.Duration, state string) core.SendLease {
		t.Helper()
		now := t0.Add(at)
		l, err := s.SendLeaseAcquire(ctx(t), core.SendLeaseParams{Name: "delivery:console", Owner: owner, Channel: "console",
			Now: now, Until: now.Add(time.Minute), State: []byte(state)})
		if err != nil {
			t.Fatalf("SendLeaseAcquire: %v", err)
		}
		return l
	}
	handOver := func(owner, state string) {
		t.Helper()
		if err := s.SendLeaseHandOver(ctx(t), core.SendLeaseParams{Name: "delivery:console", Owner: owner, Channel: "console",
			State: []byte(state)}); err != nil {
			t.Fatalf("SendLeaseHandOver: %v", err)
		}
	}
	if l := acquire("o1", 0, `{"n":1}`); !l.Acquired || l.PriorOwner != "" || !l.PriorUntil.IsZero() || len(l.PriorState) != 0 {
		t.Fatalf("fresh lease = %+v, want acquired with no prior holder", l)
	}
	if l := acquire("o2", 10*time.Second, `{}`); l.Acquired {
		t.Fatalf("o2 acquired a lease o1 holds: %+v", l)
	}
	if l := acquire("o1", 20*time.Second, `{"n":2}`); !l.Acquired || l.PriorOwner != "o1" || string(l.PriorState) != `{"n":1}` {
		t.Fatalf("renewal = %+v, want acquired, prior o1 {\"n\":1}", l)
	}
	// o1 holds claims on two console messages and another channel's one.
	ids := queueMsgs(t, s, core.OutboxMessage{Thread: thread("sl-a"), Text: "a"}, core.OutboxMessage{Thread: thread("sl-b"), Text: "b"})
	other := queueMsgs(t, s, core.OutboxMessage{Thread: core.Thread{Channel: "slack", Key: "C1"}, Text: "c"})
	if got := claimOutbox(t, s, "console", "o1", t0.Add(20*time.Second)); len(got) != 2 {
		t.Fatalf("o1 claimed %v, want both console messages", deliveryIDs(got))
	}
	if got := claimOutbox(t, s, "slack", "o1", t0.Add(20*time.Second)); len(got) != 1 {
		t.Fatalf("o1 claimed %v on slack, want %v", deliveryIDs(got), other)
	}
	handOver("o2", `{"forged":true}`) // not the holder: no effect
	if l := acquire("o2", 30*time.Second, `{}`); l.Acquired {
		t.Fatalf("a hand-over by a non-holder freed the lease: %+v", l)
	}
	if got := claimOutbox(t, s, "console", "o2", t0.Add(30*time.Second)); len(got) != 0 {
		t.Fatalf("a hand-over by a non-holder freed claims: o2 claimed %v", deliveryIDs(got))
	}
	handOver("o1", `{"last":"x"}`)
	l := acquire("o2", 30*time.Second, `{"o2":1}`)
	if !l.Acquired || l.PriorOwner != "o1" || !l.PriorUntil.IsZero() || string(l.PriorState) != `{"last":"x"}` {
		t.Fatalf("after hand-over = %+v, want acquired at once, prior o1, PriorUntil zero, its state", l)
	}
	if got := deliveryIDs(claimOutbox(t, s, "console", "o2", t0.Add(30*time.Second))); len(got) != 2 || got[0] != ids[0] || got[1] != ids[1] {
		t.Errorf("after hand-over o2 claimed %v, want o1's console messages %v", got, ids)
	}
	if got := claimOutbox(t, s, "slack", "o3", t0.Add(30*time.Second)); len(got) != 0 {
		t.Errorf("the hand-over freed another channel's claim: o3 claimed %v", deliveryIDs(got))
	}
	// o2 lapses (acquired at 30 s until 90 s): o3 learns when, and the
	// state of o2's last renewal.
	if l := acquire("o3", 89*time.Second, `{}`); l.Acquired {
		t.Fatalf("o3 acquired before o2's lease lapsed: %+v", l)
	}
	l = acquire("o3", 90*time.Second, `{}`)
	if want := t0.Add(90 * time.Second); !l.Acquired || l.PriorOwner != "o2" || !l.PriorUntil.Equal(want) || string(l.PriorState) != `{"o2":1}` {
		t.Errorf("after lapse = %+v, want acquired, prior o2 until %v with its state", l, want)
	}
}
