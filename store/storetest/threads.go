package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// say records an inbound message with text in th at at, the run it starts
// (if run) and its replies, and returns the event id.
func say(t *testing.T, s core.Store, th core.Thread, text string, at time.Time, run *core.Run, replies ...core.OutboxMessage) string {
	t.Helper()
	ev := event(th)
	ev.Text, ev.ReceivedAt = text, at
	for i := range replies {
		if replies[i].ID == "" {
			replies[i].ID = newID("msg")
		}
		if replies[i].Thread.IsZero() {
			replies[i].Thread = th
		}
		if replies[i].Kind == "" {
			replies[i].Kind = core.KindReply
		}
	}
	if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: ev, Run: run, Replies: replies}); err != nil {
		t.Fatalf("InboxRecord %q: %v", text, err)
	}
	return ev.EventID
}

// describe renders a page of messages compactly for comparison.
func describe(ms []core.ThreadMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%s:%s", m.Direction, m.Text)
	}
	return out
}

// allThreadMessages walks every page of th with pages of limit.
func allThreadMessages(t *testing.T, s core.Store, th core.Thread, limit int) []core.ThreadMessage {
	t.Helper()
	var out []core.ThreadMessage
	before := ""
	for range 1000 {
		page, next, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: th, Before: before, Limit: limit})
		if err != nil {
			t.Fatalf("ThreadMessages(before %q): %v", before, err)
		}
		if len(page) > limit {
			t.Fatalf("page of %d messages, limit %d", len(page), limit)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		if len(page) != limit {
			t.Fatalf("short page (%d of %d) with a next cursor", len(page), limit)
		}
		before = next
	}
	t.Fatal("ThreadMessages never ended")
	return nil
}

// testThreadMessagesMerged: a thread's inbound events (with their text,
// also those that started no run) and its outbox messages come back merged
// newest first; a reply written with its request sorts after it; other
// threads' messages never appear.
func testThreadMessagesMerged(t *testing.T, s core.Store) {
	th, other := thread("chat"), thread("other")
	slack := core.Thread{Channel: "slack", Key: "C1/1.0"}
	// "help" starts no run; its reply is written in the same transaction.
	helpID := say(t, s, th, "help", t0, nil, core.OutboxMessage{Text: "flows: deploy", CreatedAt: t0})
	say(t, s, other, "elsewhere", t0.Add(time.Second), nil, core.OutboxMessage{Text: "other reply"})
	say(t, s, slack, "slack text", t0.Add(time.Second), nil, core.OutboxMessage{Text: "slack reply"})
	r := newRun(th)
	r.CreatedAt = t0.Add(2 * time.Second)
	say(t, s, th, "deploy api 1.2.3", t0.Add(2*time.Second), r,
		core.OutboxMessage{Kind: core.KindCard, ApprovalID: "appr-1", RunID: r.ID, CreatedAt: t0.Add(3 * time.Second)},
		core.OutboxMessage{Text: "deployed", RunID: r.ID, CreatedAt: t0.Add(4 * time.Second)})

	got, next, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: th, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "next", next, "")
	sameIDs(t, "messages", describe(got), "out:deployed", "out:", "in:deploy api 1.2.3", "out:flows: deploy", "in:help")
	if len(got) != 5 {
		t.FailNow()
	}
	help := got[4]
	if help.ID != helpID || help.Actor != "console:alice" || help.RunID != "" || !help.At.Equal(t0) || help.Kind != "" {
		t.Errorf("help event = %+v", help)
	}
	if req := got[2]; req.RunID != r.ID || !req.At.Equal(t0.Add(2*time.Second)) {
		t.Errorf("request event = %+v, want run %s", req, r.ID)
	}
	card := got[1]
	if card.Kind != core.KindCard || card.ApprovalID != "appr-1" || card.RunID != r.ID ||
		card.Status != core.DeliveryPending || !card.At.Equal(t0.Add(3*time.Second)) || card.Actor != "" {
		t.Errorf("card message = %+v", card)
	}
	if got[3].Kind != core.KindReply || got[3].RunID != "" || got[0].RunID != r.ID {
		t.Errorf("replies = %+v, %+v", got[3], got[0])
	}
	// The slack thread has its own conversation.
	sl, _, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: slack})
	if err != nil {
		t.Fatal(err)
	}
	sameIDs(t, "slack messages", describe(sl), "out:slack reply", "in:slack text")
	none, _, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: thread("empty")})
	if err != nil || len(none) != 0 {
		t.Errorf("empty thread = %v, %v", none, err)
	}
	if _, _, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{}); err == nil {
		t.Error("ThreadMessages without a thread: no error")
	}
	if _, _, err := s.ThreadMessages(ctx(t), core.ThreadMessagesParams{Thread: th, Before: "!!not a cursor"}); err == nil {
		t.Error("ThreadMessages with a bad cursor: no error")
	}
}

// testThreadMessagesPaginate: walking a thread page by page, whatever the
// page size, yields the one-page order exactly, with no message twice, also
// when many events and messages share one instant.
func testThreadMessagesPaginate(t *testing.T, s core.Store) {
	th := thread("pages")
	for i := range 6 {
		at := t0.Add(time.Duration(i/3) * time.Second) // three per instant
		say(t, s, th, fmt.Sprintf("q%d", i), at, nil,
			core.OutboxMessage{Text: fmt.Sprintf("a%d", i), CreatedAt: at},
			core.OutboxMessage{Text: fmt.Sprintf("b%d", i), CreatedAt: at.Add(time.Duration(i%2) * time.Second)})
	}
	say(t, s, thread("noise"), "noise", t0, nil, core.OutboxMessage{Text: "noise"})
	whole := allThreadMessages(t, s, th, 100)
	if len(whole) != 18 {
		t.Fatalf("one page: %d messages, want 18: %v", len(whole), describe(whole))
	}
	for i := 1; i < len(whole); i++ {
		a, b := whole[i-1], whole[i]
		if a.At.Before(b.At) {
			t.Errorf("not newest first at %d: %v then %v", i, a, b)
		}
		if a.At.Equal(b.At) && a.Direction == core.MessageIn && b.Direction == core.MessageOut {
			t.Errorf("at one instant an inbound event is listed before an outbox message: %v then %v", a, b)
		}
	}
	seen := map[string]bool{}
	for _, m := range whole {
		k := string(m.Direction) + m.ID
		if seen[k] {
			t.Errorf("message %s listed twice", k)
		}
		seen[k] = true
	}
	for _, limit := range []int{1, 2, 4, 5, 17} {
		got := allThreadMessages(t, s, th, limit)
		sameIDs(t, fmt.Sprintf("pages of %d", limit), describe(got), describe(whole)...)
	}
}

// testThreadList: the threads of one channel, most recently active first,
// with their message counts; other channels are left out; pages join up.
func testThreadList(t *testing.T, s core.Store) {
	a, b, c := thread("a"), thread("b"), thread("c")
	say(t, s, a, "one", t0, nil, core.OutboxMessage{Text: "r1", CreatedAt: t0})
	say(t, s, b, "two", t0.Add(time.Second), nil)
	say(t, s, c, "three", t0.Add(2*time.Second), nil)
	// a's newest activity is an outbound message, later than everything.
	say(t, s, a, "four", t0.Add(3*time.Second), nil, core.OutboxMessage{Text: "r4", CreatedAt: t0.Add(5 * time.Second)})
	say(t, s, core.Thread{Channel: "slack", Key: "C1/9.0"}, "slack", t0.Add(9*time.Second), nil, core.OutboxMessage{Text: "s"})

	got, next, err := s.ThreadList(ctx(t), core.ThreadListParams{Channel: "console", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "next", next, "")
	var desc []string
	for _, x := range got {
		desc = append(desc, fmt.Sprintf("%s/%d/%s", x.Thread, x.Messages, x.LastAt.Sub(t0)))
	}
	sameIDs(t, "threads", desc, "console:a/4/5s", "console:c/1/2s", "console:b/1/1s")

	var paged []string
	cursor := ""
	for range 10 {
		page, next, err := s.ThreadList(ctx(t), core.ThreadListParams{Channel: "console", Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			paged = append(paged, x.Thread.String())
		}
		if next == "" {
			break
		}
		cursor = next
	}
	sameIDs(t, "paged threads", paged, "console:a", "console:c", "console:b")

	sl, _, err := s.ThreadList(ctx(t), core.ThreadListParams{Channel: "slack"})
	if err != nil || len(sl) != 1 || sl[0].Thread.Key != "C1/9.0" || sl[0].Messages != 2 {
		t.Errorf("slack threads = %+v, %v", sl, err)
	}
	if _, _, err := s.ThreadList(ctx(t), core.ThreadListParams{}); err == nil {
		t.Error("ThreadList without a channel: no error")
	}
	if _, _, err := s.ThreadList(ctx(t), core.ThreadListParams{Channel: "console", Cursor: "%%"}); err == nil {
		t.Error("ThreadList with a bad cursor: no error")
	}
}

// testThreadListSameInstant: threads whose last activity shares one
// instant are ordered by thread and split across pages without loss.
func testThreadListSameInstant(t *testing.T, s core.Store) {
	var want []string
	for i := range 5 {
		th := thread(fmt.Sprintf("t%d", i))
		say(t, s, th, "x", t0, nil)
		want = append([]string{th.String()}, want...)
	}
	var got []string
	cursor := ""
	for range 10 {
		page, next, err := s.ThreadList(ctx(t), core.ThreadListParams{Channel: "console", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page {
			got = append(got, x.Thread.String())
		}
		if next == "" {
			break
		}
		cursor = next
	}
	sameIDs(t, "threads at one instant", got, want...)
}
