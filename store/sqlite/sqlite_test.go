package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/sqlite"
	"github.com/opsgate/opsgate/store/storetest"
)

// openTemp opens a migrated store on a fresh file (in a directory that does
// not exist yet, as ./data does on first start).
func openTemp(t testing.TB) *sqlite.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "data", "opsgate.db"))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return s
}

// TestConformance runs the store suite, each case on a fresh database that
// starts as a copy of one migrated once (testkit.OpenSQLite): migrating
// from nothing is TestMigrateIsIdempotent's and TestPragmas' subject.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		s, err := testkit.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "opsgate.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func TestMigrateIsIdempotent(t *testing.T) {
	s := openTemp(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if files, err := filepath.Glob(filepath.Join("migrations", "*.sql")); err != nil || len(files) == 0 || n != len(files) {
		t.Errorf("schema_migrations rows = %d, want one per embedded migration (%d, %v)", n, len(files), err)
	}
}

func TestPragmas(t *testing.T) {
	s := openTemp(t)
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000"} {
		var got string
		if err := s.DB().QueryRow(`PRAGMA ` + pragma).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %s, want %s", pragma, got, want)
		}
	}
}

func TestInMemory(t *testing.T) {
	storetest.Run(t, func(t *testing.T) core.Store {
		ctx := context.Background()
		s, err := sqlite.Open(ctx, ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// BenchmarkInboxRecord measures ingestion at the default durability
// (synchronous=FULL: every commit fsyncs) and with synchronous=NORMAL, the
// usual WAL trade-off (a power loss may drop the last commits).
func BenchmarkInboxRecord(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/callers=%dxGOMAXPROCS", sync, par), func(b *testing.B) {
				ctx := context.Background()
				s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "opsgate.db")+"?_pragma=synchronous("+sync+")")
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				if err := s.Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				storetest.BenchmarkInboxRecord(b, s, par)
			})
		}
	}
}

// BenchmarkThreads measures the chat's reads (core.ThreadStore) with
// 20,000 messages each way over 200 threads, half of them on another
// channel: cost follows the page, not the table.
func BenchmarkThreads(b *testing.B) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "opsgate.db")+"?_pragma=synchronous(NORMAL)")
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	storetest.SeedThreads(b, s, 20000, 200)
	storetest.BenchmarkThreads(b, s)
}

// FuzzListCursor: list cursors arrive from API clients (?cursor=...); any
// string must give a page or a clean error, never a panic or a SQL error
// from injected text.
func FuzzListCursor(f *testing.F) {
	for _, seed := range []string{"", "1", "-1", "9223372036854775807", "99999999999999999999", "1 OR 1=1", "'; DROP TABLE runs; --", "0x10"} {
		f.Add(seed)
	}
	s := openTemp(f)
	ctx := context.Background()
	th := core.Thread{Channel: "console", Key: "fuzz"}
	if _, err := s.InboxRecord(ctx, core.InboxRecordParams{Event: core.ChannelEvent{Channel: "console", EventID: "e1", Thread: th},
		Run: &core.Run{ID: "r1", Flow: "f", Thread: th, Requester: "console:a"}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		_, errRuns := strconv.ParseInt(cursor, 10, 64)
		valid := cursor == "" || errRuns == nil
		if _, _, err := s.RunList(ctx, core.RunListParams{Cursor: cursor}); (err == nil) != valid {
			t.Errorf("RunList(cursor %q) err = %v, valid cursor: %v", cursor, err, valid)
		}
		if _, _, err := s.ApprovalList(ctx, approvals.ApprovalListParams{Cursor: cursor}); (err == nil) != valid {
			t.Errorf("ApprovalList(cursor %q) err = %v, valid cursor: %v", cursor, err, valid)
		}
		if _, _, err := s.OutboxList(ctx, core.OutboxListParams{Cursor: cursor}); (err == nil) != valid {
			t.Errorf("OutboxList(cursor %q) err = %v, valid cursor: %v", cursor, err, valid)
		}
		var n int
		if err := s.DB().QueryRow(`SELECT count(*) FROM runs`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("runs table changed: %d rows, %v", n, err)
		}
	})
}
