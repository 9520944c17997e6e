package sqlite_test

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// TestRunEventsWakeOnlyTheirRun: a commit appending to one run's events
// wakes that run's stream subscribers and the general events topic, not
// another run's streams.
func TestRunEventsWakeOnlyTheirRun(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"ra", "rb"} {
		th := core.Thread{Channel: "console", Key: id}
		if _, err := s.InboxRecord(ctx, core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: id, Thread: th, ReceivedAt: now},
			Run:   &core.Run{ID: id, Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
	}
	a, cancelA := s.SubscribeRunEvents("ra")
	defer cancelA()
	b, cancelB := s.SubscribeRunEvents("rb")
	defer cancelB()
	all, cancelAll := s.Subscribe(core.TopicEvents)
	defer cancelAll()
	if err := s.RunCheckpoint(ctx, core.Checkpoint{RunID: "ra", Now: now,
		Events: []core.RunEvent{{Type: core.EventTurnStarted, At: now}}}); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan struct{}{"run ra": a, "events": all} {
		select {
		case <-ch:
		case <-time.After(2 * time.Minute): // a hang backstop
			t.Errorf("%s subscriber not woken", name)
		}
	}
	select {
	case <-b:
		t.Error("run rb's subscriber woken by a commit to ra")
	case <-time.After(50 * time.Millisecond):
	}
}
