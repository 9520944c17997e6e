package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// BenchmarkInboxRecord measures durable ingestion: each operation records
// one new event that starts a run and queues one reply, in parallel, and
// reports events/s. parallelism multiplies GOMAXPROCS into the number of
// concurrent callers (an HTTP server has many requests in flight).
func BenchmarkInboxRecord(b *testing.B, s core.Store, parallelism int) {
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			th := core.Thread{Channel: "console", Key: fmt.Sprintf("bench-%d", i%64)}
			ev := core.ChannelEvent{Channel: "console", EventID: fmt.Sprintf("bench-ev-%d", i), Actor: core.Actor{ID: "console:alice"},
				Thread: th, Text: "deploy api 1.2.3", Raw: []byte(`{"text":"deploy api 1.2.3"}`), ReceivedAt: t0}
			run := &core.Run{ID: fmt.Sprintf("bench-run-%d", i), Flow: "deploy", Thread: th, Requester: "console:alice",
				Args: map[string]any{"service": "api", "version": "1.2.3"}, Reason: "deploy api 1.2.3", CreatedAt: t0}
			reply := core.OutboxMessage{ID: fmt.Sprintf("bench-msg-%d", i), Thread: th, Kind: core.KindReply, Text: "queued"}
			if _, err := s.InboxRecord(ctx, core.InboxRecordParams{Event: ev, Run: run, Replies: []core.OutboxMessage{reply}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// SeedThreads records events inbound messages, each with one reply, spread
// over threads console threads (and as many again on slack, which the
// console's queries must skip), from 32 concurrent callers. It is the
// data BenchmarkThreads reads.
func SeedThreads(b *testing.B, s core.Store, events, threads int) {
	b.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := n.Add(1)
				if i > int64(events) {
					return
				}
				ch := "console"
				if i%2 == 0 {
					ch = "slack"
				}
				th := core.Thread{Channel: ch, Key: fmt.Sprintf("seed-%d", i%int64(threads))}
				at := t0.Add(time.Duration(i) * time.Millisecond)
				ev := core.ChannelEvent{Channel: ch, EventID: fmt.Sprintf("seed-ev-%d", i), Actor: core.Actor{ID: ch + ":alice"},
					Thread: th, Text: "help", ReceivedAt: at}
				reply := core.OutboxMessage{ID: fmt.Sprintf("seed-msg-%d", i), Thread: th, Kind: core.KindReply, Text: "commands: …", CreatedAt: at}
				if _, err := s.InboxRecord(context.Background(), core.InboxRecordParams{Event: ev, Replies: []core.OutboxMessage{reply}}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// BenchmarkThreads measures the console's reads on a store SeedThreads
// filled: the newest page of one thread, a page deep in its history (by
// cursor), and the channel's thread list.
func BenchmarkThreads(b *testing.B, s core.Store) {
	ctx := context.Background()
	th := core.Thread{Channel: "console", Key: "seed-1"}
	b.Run("ThreadMessages/newest", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: th, Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ThreadMessages/deep", func(b *testing.B) {
		before := ""
		for range 3 {
			_, next, err := s.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: th, Before: before, Limit: 50})
			if err != nil || next == "" {
				b.Fatalf("seek: %v (next %q)", err, next)
			}
			before = next
		}
		for b.Loop() {
			if _, _, err := s.ThreadMessages(ctx, core.ThreadMessagesParams{Thread: th, Before: before, Limit: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ThreadList", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.ThreadList(ctx, core.ThreadListParams{Channel: "console", Limit: 200}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
