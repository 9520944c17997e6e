package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/pgtest"
)

// TestAuditSealedAcrossInstances: two replicas audit concurrently; their
// sealers (and the reader) chain every entry exactly once, with no gap, and
// nothing stays pending.
func TestAuditSealedAcrossInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const writers, each = 10, 5
	var wg sync.WaitGroup
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		th := core.Thread{Channel: "console", Key: fmt.Sprintf("seal-%d", w)}
		id := fmt.Sprintf("seal-run-%d", w)
		if _, err := s.InboxRecord(ctx, core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: id, Thread: th, ReceivedAt: now},
			Run:   &core.Run{ID: id, Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := s.RunCheckpoint(ctx, core.Checkpoint{RunID: id, Now: now, Audit: []approvals.AuditEntry{
					{At: now, Kind: "test.a", Actor: "w", RunID: id, Detail: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))},
					{At: now, Kind: "test.b", Actor: "w", RunID: id},
				}}); err != nil {
					t.Errorf("checkpoint: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	// The sealers run on their own after each commit: wait for them
	// without reading through AuditList (which would seal itself).
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for {
		var pending, sealed int
		if err := a.DB().QueryRow(`SELECT (SELECT count(*) FROM audit_pending), (SELECT count(*) FROM audit)`).Scan(&pending, &sealed); err != nil {
			t.Fatal(err)
		}
		if pending == 0 && sealed == writers*each*2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %d entries pending, %d sealed; want 0 and %d", pending, sealed, writers*each*2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	entries, err := b.AuditList(ctx, approvals.AuditListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if e.Seq != int64(i+1) {
			t.Fatalf("entry %d has seq %d: the chain has a gap", i, e.Seq)
		}
	}
	if bad := approvals.VerifyChain("", entries); bad != 0 {
		t.Fatalf("chain broken at %d", bad)
	}
}

// TestAuditPendingSealedOnRead: an entry a replica committed but never
// sealed (it died first) is chained by the next reader of the log.
func TestAuditPendingSealedOnRead(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.DSN(t))
	ctx := context.Background()
	if _, err := s.DB().Exec(`INSERT INTO audit_pending (at, kind, actor, detail) VALUES (1, 'orphan', 'console:dead', '{"x":1}')`); err != nil {
		t.Fatal(err)
	}
	entries, err := s.AuditList(ctx, approvals.AuditListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Kind != "orphan" || string(entries[0].Detail) != `{"x":1}` || entries[0].Seq != 1 {
		t.Fatalf("entries = %+v, want the orphan sealed as seq 1", entries)
	}
	if bad, err := s.AuditVerify(ctx); err != nil || bad != 0 {
		t.Fatalf("AuditVerify = %d, %v", bad, err)
	}
}

// A pending entry whose detail is not JSON (a hand edit) is sealed like
// any other: no panic, no leaked transaction holding the audit lock, and
// later appends still chain.
func TestAuditPendingWithInvalidDetailIsSealed(t *testing.T) {
	t.Parallel()
	s := open(t, pgtest.DSN(t))
	ctx := context.Background()
	if _, err := s.DB().Exec(`INSERT INTO audit_pending (at, kind, actor, detail) VALUES (1, 'edited', 'console:dba', 'not json')`); err != nil {
		t.Fatal(err)
	}
	entries, err := s.AuditList(ctx, approvals.AuditListParams{})
	if err != nil || len(entries) != 1 || entries[0].Kind != "edited" {
		t.Fatalf("entries = %+v, %v; want the edited row sealed", entries, err)
	}
	if bad, err := s.AuditVerify(ctx); err != nil || bad != 0 {
		t.Fatalf("AuditVerify = %d, %v", bad, err)
	}
	// The audit lock was released: a second reader gets through at once.
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := s.AuditList(cctx, approvals.AuditListParams{}); err != nil {
		t.Fatalf("second AuditList: %v", err)
	}
}

// TestRunEventsWakeAcrossInstances: the run id travels as the NOTIFY
// payload, so another replica wakes that run's streams only.
func TestRunEventsWakeAcrossInstances(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := open(t, dsn), open(t, dsn)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"wa", "wb", "w0", "w1"} {
		th := core.Thread{Channel: "console", Key: id}
		if _, err := a.InboxRecord(ctx, core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: id, Thread: th, ReceivedAt: now},
			Run:   &core.Run{ID: id, Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
		}); err != nil {
			t.Fatal(err)
		}
	}
	// b hears a's notifications in commit order on one connection, so once
	// a marker commit made after some writes has woken b, b has handled
	// every notification of those writes.
	passed := func(marker string) {
		t.Helper()
		w, cancel := b.SubscribeRunEvents(marker)
		defer cancel()
		if err := a.RunCheckpoint(ctx, core.Checkpoint{RunID: marker, Now: now,
			Events: []core.RunEvent{{Type: core.EventTurnStarted, At: now}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-w:
		case <-time.After(2 * time.Minute): // a hang backstop
			t.Fatalf("marker run %s's subscriber on the other instance not woken", marker)
		}
	}
	passed("w0") // the inbox notifications have reached b
	wa, cancelA := b.SubscribeRunEvents("wa")
	defer cancelA()
	wb, cancelB := b.SubscribeRunEvents("wb")
	defer cancelB()
	if err := a.RunCheckpoint(ctx, core.Checkpoint{RunID: "wa", Now: now,
		Events: []core.RunEvent{{Type: core.EventTurnStarted, At: now}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wa:
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Fatal("run wa's subscriber on the other instance not woken")
	}
	passed("w1") // b has handled everything the commit to wa sent
	select {
	case <-wb:
		t.Error("run wb's subscriber woken by a commit to wa")
	default:
	}
}
