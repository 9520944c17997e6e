package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opsgate/opsgate/core"
)

// testAgentHistory: a session's history is the agent.message events of its
// thread's runs, oldest first, other threads' and other event types left out,
// and a limit keeps the newest.
func testAgentHistory(t *testing.T, s core.Store) {
	h, ok := s.(core.AgentHistoryStore)
	if !ok {
		t.Fatal("the store does not implement core.AgentHistoryStore")
	}
	th, other := thread("session"), thread("other-session")
	msg := func(text string) core.RunEvent {
		return core.RunEvent{Type: core.EventAgentMessage, Data: json.RawMessage(`{"text":"` + text + `"}`), At: t0}
	}
	var runs []string
	for i, tt := range []core.Thread{th, other, th} {
		r := newRun(tt)
		r.Flow = core.AgentFlow("ops")
		evs := []core.RunEvent{msg("m" + string(rune('a'+i)) + "1"), {Type: core.EventTurnStarted, At: t0}, msg("m" + string(rune('a'+i)) + "2")}
		if _, err := s.InboxRecord(ctx(t), core.InboxRecordParams{Event: event(tt), Run: r, Events: evs}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	recs, err := h.AgentHistory(ctx(t), th, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Message))
	}
	sameIDs(t, "history", got, `{"text":"ma1"}`, `{"text":"ma2"}`, `{"text":"mc1"}`, `{"text":"mc2"}`)
	if len(recs) == 4 {
		mustEqual(t, "first run", recs[0].RunID, runs[0])
		mustEqual(t, "last run", recs[3].RunID, runs[2])
	}
	recs, err = h.AgentHistory(ctx(t), th, 3)
	if err != nil {
		t.Fatal(err)
	}
	got = got[:0]
	for _, r := range recs {
		got = append(got, string(r.Message))
	}
	sameIDs(t, "newest three", got, `{"text":"ma2"}`, `{"text":"mc1"}`, `{"text":"mc2"}`)
	if got := getRun(t, s, runs[0]); got.Kind() != core.RunKindAgent {
		t.Errorf("kind = %q", got.Kind())
	}
}

// testOutboxStreamRef: the reference of a run's first sent stream (or
// progress) message in a thread; none before it is sent, none for another
// run or thread or kind.
func testOutboxStreamRef(t *testing.T, s core.Store) {
	rs, ok := s.(core.StreamRefStore)
	if !ok {
		t.Fatal("the store does not implement core.StreamRefStore")
	}
	th := thread("stream")
	ids := queueMsgs(t, s,
		core.OutboxMessage{Thread: th, Kind: core.KindStream, RunID: "run-s", Text: "a …"},
		core.OutboxMessage{Thread: th, Kind: core.KindStream, RunID: "run-s", Text: "a b …"})
	if _, err := rs.OutboxStreamRef(ctx(t), "run-s", th, core.KindStream); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("before any was sent: %v, want ErrNotFound", err)
	}
	claimOutbox(t, s, "console", "o1", t0)
	want := core.MessageRef{Channel: "console", ID: "stream-msg-1"}
	if err := s.OutboxChunkSent(ctx(t), ids[0], "o1", 0, want, t0); err != nil {
		t.Fatal(err)
	}
	got, err := rs.OutboxStreamRef(ctx(t), "run-s", th, core.KindStream)
	if err != nil || got == nil || *got != want {
		t.Errorf("ref = %+v, %v; want %+v", got, err, want)
	}
	if _, err := rs.OutboxStreamRef(ctx(t), "run-other", th, core.KindStream); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("another run: %v, want ErrNotFound", err)
	}
	// A run's status message (KindProgress) is its own message.
	if _, err := rs.OutboxStreamRef(ctx(t), "run-s", th, core.KindProgress); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("no progress message sent: %v, want ErrNotFound", err)
	}
	pids := queueMsgs(t, s, core.OutboxMessage{Thread: th, Kind: core.KindProgress, RunID: "run-s", Text: "⏳ deploy"})
	// A thread's messages go out in order: the streamed ones first.
	if err := s.OutboxDone(ctx(t), ids[0], "o1", t0); err != nil {
		t.Fatal(err)
	}
	if ds := claimOutbox(t, s, "console", "o1", t0); len(ds) != 1 || ds[0].ID != ids[1] {
		t.Fatalf("claimed %v, want the second stream message", deliveryIDs(ds))
	}
	if err := s.OutboxDone(ctx(t), ids[1], "o1", t0); err != nil {
		t.Fatal(err)
	}
	if ds := claimOutbox(t, s, "console", "o1", t0); len(ds) != 1 || ds[0].ID != pids[0] {
		t.Fatalf("claimed %v, want the progress message", deliveryIDs(ds))
	}
	status := core.MessageRef{Channel: "console", ID: "status-msg-1"}
	if err := s.OutboxChunkSent(ctx(t), pids[0], "o1", 0, status, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.OutboxStreamRef(ctx(t), "run-s", th, core.KindProgress); err != nil || *got != status {
		t.Errorf("progress ref = %+v, %v; want %+v", got, err, status)
	}
	if got, err := rs.OutboxStreamRef(ctx(t), "run-s", th, core.KindStream); err != nil || *got != want {
		t.Errorf("stream ref after a progress message = %+v, %v; want %+v", got, err, want)
	}
}
