package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/store/pgtest"
)

// TestLeaseWritesSkipTheFlushWait: the run claim, the outbox claim and a
// message's sent mark commit on the lease pool, whose sessions have
// synchronous_commit off; every other write keeps the DSN's setting (on
// here; the test cluster's default is off), so recording an event still
// waits for the WAL flush.
func TestLeaseWritesSkipTheFlushWait(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s := open(t, dsn+sep+"synchronous_commit=on")
	ctx := context.Background()
	var sc string
	if err := s.DB().QueryRowContext(ctx, "SHOW synchronous_commit").Scan(&sc); err != nil || sc != "on" {
		t.Fatalf("main pool synchronous_commit = %q, %v; want on", sc, err)
	}
	now := time.Now().UTC()
	th := core.Thread{Channel: "console", Key: "lease-1"}
	run := &core.Run{ID: "run-lease-1", Flow: "deploy", Thread: th, Requester: "console:alice", Status: core.RunQueued, CreatedAt: now}
	if _, err := s.InboxRecord(ctx, core.InboxRecordParams{
		Event:   core.ChannelEvent{Channel: "console", EventID: "ev-lease-1", Thread: th, Actor: core.Actor{ID: "console:alice"}, ReceivedAt: now},
		Run:     run,
		Replies: []core.OutboxMessage{{ID: "msg-lease-1", Thread: th, Kind: core.KindReply, Text: "on it", CreatedAt: now}},
	}); err != nil {
		t.Fatal(err)
	}
	// ran reports whether a lease session's last statement starts with
	// prefix, and checks every lease session has synchronous_commit off.
	ran := func(prefix string) bool {
		t.Helper()
		ss, err := s.LeaseSessions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, x := range ss {
			if x.SynchronousCommit != "off" {
				t.Fatalf("lease session synchronous_commit = %q, want off", x.SynchronousCommit)
			}
			q := strings.Join(strings.Fields(x.LastQuery), " ")
			if strings.Contains(q, "INSERT INTO events") {
				t.Fatalf("an event was recorded on the lease pool: %s", q)
			}
			found = found || strings.HasPrefix(q, prefix)
		}
		return found
	}
	ds, err := s.OutboxClaim(ctx, core.OutboxClaimParams{Channel: "console", Owner: "w1", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(ds) != 1 {
		t.Fatalf("OutboxClaim = %d, %v; want the reply", len(ds), err)
	}
	if !ran("UPDATE outbox SET owner") {
		t.Error("the outbox claim did not run on the lease pool")
	}
	if err := s.OutboxLastChunkSent(ctx, ds[0].ID, "w1", 0, core.MessageRef{Channel: "console", ID: "m-1"}, now); err != nil {
		t.Fatal(err)
	}
	if !ran("WITH u AS (UPDATE outbox SET refs") {
		t.Error("the sent mark did not run on the lease pool")
	}
	runs, err := s.RunClaim(ctx, core.RunClaimParams{Owner: "e1", Limit: 10, Now: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil || len(runs) != 1 {
		t.Fatalf("RunClaim = %d, %v; want the run", len(runs), err)
	}
	if !ran("WITH q AS (SELECT r.id") {
		t.Error("the run claim did not run on the lease pool")
	}
	// What the lease pool committed is visible to the main pool at once.
	got, err := s.RunGet(ctx, run.ID)
	if err != nil || got.Status != core.RunRunning || got.Owner != "e1" {
		t.Fatalf("after the claim the run is %+v, %v", got, err)
	}
}
