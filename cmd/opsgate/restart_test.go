package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/pgtest"
	"github.com/opsgate/opsgate/store/postgres"
)

// TestReadyAgainRightAfterPostgresRestart: after Postgres restarts, the
// first /readyz once the server accepts connections again answers 200 —
// the pool's broken connections are dropped, not reported — and a write
// and the wake-ups of other replicas work again. The time from "accepts
// connections" to "ready" is logged (go test -v): a few milliseconds here.
// It restarts the server, so it runs on a private cluster.
func TestReadyAgainRightAfterPostgresRestart(t *testing.T) {
	t.Parallel()
	cl := pgtest.StartCluster(t)
	ctx := context.Background()
	open := func() *postgres.Store {
		s, err := postgres.Open(ctx, cl.DSN())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	st, other := open(), open()
	ready := readyz(st, slog.New(slog.DiscardHandler))
	status := func() int {
		rec := httptest.NewRecorder()
		ready.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code
	}
	// Fill the pool with connections, which the restart will break.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, _, err := st.RunList(ctx, core.RunListParams{Limit: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := status(); got != 200 {
		t.Fatalf("/readyz before the restart: %d", got)
	}
	wake, cancel := st.Subscribe(core.TopicRuns)
	defer cancel()

	if err := cl.Stop(); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != 503 {
		t.Fatalf("/readyz with Postgres down: %d, want 503", got)
	}
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	if got := status(); got != 200 {
		t.Fatalf("/readyz right after Postgres accepts connections again: %d, want 200", got)
	}
	t.Logf("ready %s after Postgres accepted connections again", time.Since(up).Round(time.Microsecond))

	th := core.Thread{Channel: "console", Key: "after-restart"}
	if _, err := st.InboxRecord(ctx, core.InboxRecordParams{
		Event: core.ChannelEvent{Channel: "console", EventID: "ev-after-restart", Thread: th, ReceivedAt: time.Now()},
		Run:   &core.Run{ID: "run-after-restart", Flow: "status", Thread: th, Requester: "console:a"},
	}); err != nil {
		t.Fatalf("first write after the restart: %v", err)
	}
	select { // this store's own commit woke its subscriber directly
	case <-wake:
	default:
	}
	// Another replica's commit wakes this one again once its listener has
	// reconnected (it reconnects with backoff; polling covers the gap).
	deadline := time.After(waitBound)
	for i := 0; ; i++ {
		select {
		case <-wake:
			return
		case <-deadline:
			t.Fatal("no wake-up from another replica after the restart: the listener did not reconnect")
		case <-time.After(200 * time.Millisecond):
		}
		th := core.Thread{Channel: "console", Key: "other-" + time.Now().Format("150405.000000")}
		if _, err := other.InboxRecord(ctx, core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: "ev-" + th.Key, Thread: th, ReceivedAt: time.Now()},
			Run:   &core.Run{ID: "run-" + th.Key, Flow: "status", Thread: th, Requester: "console:a"},
		}); err != nil {
			t.Fatalf("write through the other replica: %v", err)
		}
	}
}
