package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// TestGroupCommitIsolatesUnits: concurrent writers share commits, but a
// unit that fails after writing (here, an inbox record whose reply has no
// channel) leaves nothing behind and does not undo the units committed
// beside it.
func TestGroupCommitIsolatesUnits(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const good, bad = 60, 30
	var wg sync.WaitGroup
	errs := make(chan error, good+bad)
	for i := range good {
		wg.Add(1)
		go func() {
			defer wg.Done()
			th := core.Thread{Channel: "console", Key: fmt.Sprintf("g%d", i)}
			_, err := s.InboxRecord(ctx, core.InboxRecordParams{
				Event:   core.ChannelEvent{Channel: "console", EventID: fmt.Sprintf("g%d", i), Thread: th, ReceivedAt: now},
				Run:     &core.Run{ID: fmt.Sprintf("g%d", i), Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
				Replies: []core.OutboxMessage{{Thread: th, Kind: core.KindReply, Text: "queued"}},
			})
			if err != nil {
				errs <- fmt.Errorf("inbox %d: %w", i, err)
			}
		}()
	}
	for i := range bad {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The event and the run are written, then the reply without a
			// channel fails the unit: its savepoint must undo both.
			th := core.Thread{Channel: "console", Key: fmt.Sprintf("b%d", i)}
			_, err := s.InboxRecord(ctx, core.InboxRecordParams{
				Event:   core.ChannelEvent{Channel: "console", EventID: fmt.Sprintf("b%d", i), Thread: th, ReceivedAt: now},
				Run:     &core.Run{ID: fmt.Sprintf("b%d", i), Flow: "f", Thread: th, Requester: "console:a", CreatedAt: now},
				Replies: []core.OutboxMessage{{Kind: core.KindReply, Text: "nowhere"}},
			})
			if err == nil {
				errs <- fmt.Errorf("bad inbox %d succeeded", i)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range good {
		r, err := s.RunGet(ctx, fmt.Sprintf("g%d", i))
		if err != nil {
			t.Fatalf("run g%d: %v", i, err)
		}
		evs, err := s.RunEventList(ctx, r.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Type != core.EventRunQueued {
			t.Errorf("run %s events = %+v, want only run.queued", r.ID, evs)
		}
	}
	for i := range bad {
		if _, err := s.RunGet(ctx, fmt.Sprintf("b%d", i)); !errors.Is(err, core.ErrNotFound) {
			t.Errorf("run b%d of a failed unit: err = %v, want not found (its savepoint was not rolled back)", i, err)
		}
	}
	out, _, err := s.OutboxList(ctx, core.OutboxListParams{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != good {
		t.Errorf("outbox holds %d messages, want %d", len(out), good)
	}
}

// TestGroupCommitAfterClose: a write after Close fails instead of hanging.
func TestGroupCommitAfterClose(t *testing.T) {
	s := openTemp(t)
	s.Close()
	done := make(chan error, 1)
	go func() {
		_, err := s.InboxRecord(context.Background(), core.InboxRecordParams{
			Event: core.ChannelEvent{Channel: "console", EventID: "late", Thread: core.Thread{Channel: "console", Key: "x"}},
		})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("write after Close succeeded")
		}
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Fatal("write after Close hung")
	}
}
