package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

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
