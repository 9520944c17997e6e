package postgres_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/pgtest"
	"github.com/opsgate/opsgate/store/postgres"
	"github.com/opsgate/opsgate/store/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open opens a store on dsn, migrated, closed at cleanup.
func open(t testing.TB, dsn string) *postgres.Store {
	t.Helper()
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) core.Store { return open(t, pgtest.DSN(t)) })
}

// TestConformanceTransactionalWrites runs the suite again with InboxRecord
// and RunCheckpoint written as transactions (SQLite's path) instead of
// single statements, so each write path passes every rule on Postgres too.
// (The single-statement path is Postgres SQL — data-modifying CTEs — and
// has no SQLite form.)
func TestConformanceTransactionalWrites(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) core.Store {
		ctx := context.Background()
		s, err := postgres.OpenTransactional(ctx, pgtest.DSN(t))
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate: %v", err)
		}
		return s
	})
}

// TestNotifyReachesOtherInstance: a commit through one Store wakes a
// subscriber of another Store on the same database, as another replica's
// would be.
func TestNotifyReachesOtherInstance(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	for _, topic := range []string{core.TopicRuns, core.TopicOutbox, core.TopicEvents} {
		ch, cancel := b.Subscribe(topic)
		defer cancel()
		th := core.Thread{Channel: "console", Key: "notify-" + topic}
		if _, err := a.InboxRecord(context.Background(), core.InboxRecordParams{
			Event:   core.ChannelEvent{Channel: "console", EventID: "ev-" + topic, Thread: th, ReceivedAt: time.Now()},
			Run:     &core.Run{ID: "run-" + topic, Flow: "f", Thread: th, Requester: "console:a"},
			Replies: []core.OutboxMessage{{ID: "msg-" + topic, Thread: th, Kind: core.KindReply, Text: "x"}},
		}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ch:
		case <-time.After(2 * time.Minute): // a hang backstop
			t.Errorf("subscriber of %s on another instance not woken", topic)
		}
	}
}

// TestConcurrentMigrate: replicas starting together migrate once.
func TestConcurrentMigrate(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	var stores []*postgres.Store
	for range 4 {
		s, err := postgres.Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Migrate(context.Background()) }()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	// Each embedded migration applied exactly once, however many raced.
	var n, distinct int
	if err := stores[0].DB().QueryRow(`SELECT count(*), count(DISTINCT version) FROM schema_migrations`).Scan(&n, &distinct); err != nil {
		t.Fatal(err)
	}
	if want := embeddedMigrations(t); n != distinct || n != want {
		t.Errorf("schema_migrations rows = %d (%d distinct), want %d: each migration once", n, distinct, want)
	}
}

// TestClaimersOnTwoInstances: two replicas claiming from one database never
// get the same run.
func TestClaimersOnTwoInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	const runs = 200
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range runs {
		th := core.Thread{Channel: "console", Key: fmt.Sprintf("t%d", i)}
		if _, err := a.InboxRecord(ctx, core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: fmt.Sprintf("e%d", i), Thread: th, ReceivedAt: now},
			Run:   &core.Run{ID: fmt.Sprintf("r%d", i), Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for w := range 8 {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("w%d", w)
			for range 200 {
				got, err := s.RunClaim(ctx, core.RunClaimParams{Owner: owner, Limit: 4, Now: now, LeaseUntil: now.Add(time.Hour)})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					if prev, dup := seen[r.ID]; dup {
						t.Errorf("run %s claimed by %s and %s", r.ID, prev, owner)
					}
					seen[r.ID] = owner
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != runs {
		t.Errorf("claimed %d runs, want %d", len(seen), runs)
	}
}

func BenchmarkInboxRecord(b *testing.B) {
	for _, par := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%dxGOMAXPROCS", par), func(b *testing.B) {
			storetest.BenchmarkInboxRecord(b, open(b, pgtest.DSN(b)), par)
		})
	}
}

// TestListenerReconnects: when the notification connection is killed, the
// store reconnects and wake-ups from another instance flow again (its own
// commits wake it without the listener).
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s, other := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	ch, cancel := s.Subscribe(core.TopicOutbox)
	defer cancel()
	// Kill every LISTEN session (both instances'), then wait for both to
	// come back as new sessions.
	listenerPIDs := func() map[int]bool {
		rows, err := s.DB().QueryContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> pg_backend_pid()`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		pids := map[int]bool{}
		for rows.Next() {
			var pid int
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids[pid] = true
		}
		return pids
	}
	old := listenerPIDs()
	if len(old) != 2 {
		t.Fatalf("LISTEN sessions = %v, want 2", old)
	}
	for pid := range old {
		if _, err := s.DB().ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for {
		fresh := 0
		for pid := range listenerPIDs() {
			if !old[pid] {
				fresh++
			}
		}
		if fresh == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("listeners did not reconnect")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	for len(ch) > 0 { // the reconnect wakes everyone once; start clean
		<-ch
	}
	th := core.Thread{Channel: "console", Key: "reconnect"}
	if _, err := other.InboxRecord(ctx, core.InboxRecordParams{
		Event:   core.ChannelEvent{Channel: "console", EventID: "ev-reconnect", Thread: th, ReceivedAt: time.Now()},
		Replies: []core.OutboxMessage{{ID: "msg-reconnect", Thread: th, Kind: core.KindReply, Text: "x"}},
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Error("no wake-up after the listener reconnected")
	}
}

// embeddedMigrations counts the migration files the binary embeds, so the
// migration tests need no update when one is added.
func embeddedMigrations(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations/*.sql: %d files, %v", len(files), err)
	}
	return len(files)
}
