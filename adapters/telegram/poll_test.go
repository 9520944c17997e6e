package telegram

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
)

func TestPollingDeletesWebhookThenReceives(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{mode: ModePolling})
	e.fake.SetWebhookActive("https://old.example.test/hook")
	e.run()
	e.fake.Push(e.msg(requester, requester, 0, "deploy api 1.2.3"))
	e.waitCard(requester)
	calls := e.fake.Calls("")
	first := map[string]int{}
	for i, c := range calls {
		if _, seen := first[c.Method]; !seen {
			first[c.Method] = i
		}
	}
	if first["deleteWebhook"] > first["getUpdates"] {
		t.Errorf("getUpdates before deleteWebhook: %v", calls)
	}
}

func TestPollingSameUpdateTwiceIsOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{mode: ModePolling})
	u := e.msg(requester, requester, 0, "/ops deploy api 1.2.3")
	raw, _ := json.Marshal(u)
	id := u["update_id"].(int64)
	e.fake.PushRaw(id, raw)
	e.fake.PushRaw(id, raw) // Telegram delivering it again
	e.run()
	e.waitCard(requester)
	e.h.Eventually("both deliveries confirmed", func() bool { return e.fake.Unconfirmed() == 0 })
	if c := e.h.Counts(); c.Runs != 1 {
		t.Errorf("runs = %d, want 1", c.Runs)
	}
}

// cutAfter is a sink that stops the poller right after the n-th update is
// recorded, before the next getUpdates could confirm it: a crash at the
// worst moment.
type cutAfter struct {
	core.Sink
	n      int64
	seen   atomic.Int64
	cancel atomic.Value // func()
}

func (c *cutAfter) HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	rc, err := c.Sink.HandleEvent(ctx, ev)
	if err == nil && c.seen.Add(1) == c.n {
		if f, ok := c.cancel.Load().(func()); ok {
			f()
		}
	}
	return rc, err
}

func TestPollingRestartLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	var cut *cutAfter
	e := newEnv(t, envOpts{mode: ModePolling, sink: func(s core.Sink) core.Sink {
		cut = &cutAfter{Sink: s, n: 2}
		return cut
	}})
	for _, svc := range []string{"a", "b", "c"} {
		e.fake.Push(e.msg(requester, requester, 0, "deploy "+svc+" 1.0.0"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cut.cancel.Store(func() { cancel() })
	done := make(chan struct{})
	go func() { defer close(done); _ = e.ad.Run(ctx) }()
	<-done
	if got := e.h.Counts().Runs; got < 2 {
		t.Fatalf("runs after the cut = %d, want at least 2", got)
	}
	if e.fake.Unconfirmed() == 0 {
		t.Fatal("every update was confirmed before the cut; the test proves nothing")
	}

	// Restart: the unconfirmed updates come again; none is lost, none runs twice.
	cut.cancel.Store(func() {})
	e.run()
	e.h.Eventually("all updates confirmed", func() bool { return e.fake.Unconfirmed() == 0 })
	e.h.Eventually("three runs", func() bool { return e.h.Counts().Runs == 3 })
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		svc, _ := r.Args["service"].(string)
		if seen[svc] {
			t.Errorf("service %s ran twice", svc)
		}
		seen[svc] = true
	}
	if len(seen) != 3 {
		t.Errorf("runs for %v, want a, b and c", seen)
	}
}

// failing is a sink that fails until told otherwise, like a store that is
// briefly down.
type failing struct {
	core.Sink
	down atomic.Bool
}

func (f *failing) HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	if f.down.Load() {
		return core.Receipt{}, context.DeadlineExceeded
	}
	return f.Sink.HandleEvent(ctx, ev)
}

func TestPollingKeepsUnrecordedUpdatesUnconfirmed(t *testing.T) {
	t.Parallel()
	var f *failing
	e := newEnv(t, envOpts{mode: ModePolling, sink: func(s core.Sink) core.Sink {
		f = &failing{Sink: s}
		f.down.Store(true)
		return f
	}})
	e.fake.Push(e.msg(requester, requester, 0, "deploy api 1.2.3"))
	e.run()
	e.h.Eventually("the update was attempted", func() bool { return strings.Contains(e.logs.String(), "not recorded") })
	for _, c := range e.fake.Calls("getUpdates") {
		if c.Params["offset"] != "" {
			t.Fatalf("offset %s sent while the update was not recorded", c.Params["offset"])
		}
	}
	f.down.Store(false)
	e.waitCard(requester)
	e.h.Eventually("confirmed once recorded", func() bool { return e.fake.Unconfirmed() == 0 })
}

func TestPollingHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{mode: ModePolling})
	e.fake.FailNext("getUpdates", faketelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: 1})
	e.run()
	e.h.Eventually("two getUpdates", func() bool { return len(e.fake.Calls("getUpdates")) >= 2 })
	cs := e.fake.Calls("getUpdates")
	if gap := cs[1].At.Sub(cs[0].At); gap < time.Second {
		t.Errorf("getUpdates retried after %s, before retry_after (1s)", gap)
	}
}
