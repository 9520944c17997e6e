package delivery_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/pace"
)

// TestManyThreadsWithinLimits queues 10,000 messages over 200 threads
// against a fake that enforces a per-conversation and a global limit and
// also answers every 97th request with a 429: every message arrives once,
// in its thread's order, with no request over a limit and none before a
// Retry-After had passed. The outbox is in memory (memStore): the point is
// the pipeline's pacing and ordering, and SQLite under -race would take
// minutes.
//
// Not parallel: it saturates the CPU, and the timing checks of the other
// tests would then measure the machine, not the pipeline.
func TestManyThreadsWithinLimits(t *testing.T) {
	threads, perThread := 200, 50
	if n, err := strconv.Atoi(os.Getenv("DELIVERY_LOAD_PER_THREAD")); err == nil && n > 0 {
		perThread = n
	}
	s := newMemStore()
	conv := limit{Every: 5 * time.Millisecond, Burst: 3}
	global := limit{Every: 250 * time.Microsecond, Burst: 20}
	f := newFakeServer(t, conv, global)
	f.slack = 10 * time.Millisecond
	f.every429 = 97
	f.retryAfter = 30 * time.Millisecond
	p := newFakePlatform(f, delivery.Pacing{
		Conversation: delivery.Rate{Every: conv.Every, Burst: conv.Burst},
		Account:      delivery.Rate{Every: global.Every, Burst: global.Burst},
	}, 1000)
	for th := range threads {
		var msgs []core.OutboxMessage
		for i := range perThread {
			msgs = append(msgs, reply(fmt.Sprintf("c%03d", th), fmt.Sprintf("c%03d #%03d", th, i)))
		}
		for _, m := range msgs {
			s.add(m)
		}
	}
	start := time.Now()
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe,
		Concurrency: 64, Backoff: pace.BackoffPolicy{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}})
	total := threads * perThread
	waitFor(t, "every message to be sent", 5*time.Minute, func() bool {
		return s.count(core.DeliverySent) == total
	})
	elapsed := time.Since(start)
	violations, early, limited := f.stats()
	t.Logf("%d messages over %d threads in %v (%.0f/s); 429s answered: %d", total, threads, elapsed, float64(total)/elapsed.Seconds(), limited)
	if violations != 0 || early != 0 {
		t.Errorf("%d requests over a limit, %d before Retry-After", violations, early)
	}
	got := f.received()
	if len(got) != total {
		t.Errorf("received %d, want %d (duplicates?)", len(got), total)
	}
	next := map[string]int{}
	for _, r := range got {
		var th, i int
		if _, err := fmt.Sscanf(r.Text, "c%03d #%03d", &th, &i); err != nil || !strings.HasPrefix(r.Conv, "c") {
			t.Fatalf("unexpected message %+v", r)
		}
		if r.Conv != fmt.Sprintf("c%03d", th) {
			t.Fatalf("message %q went to %s", r.Text, r.Conv)
		}
		if i != next[r.Conv] {
			t.Fatalf("thread %s: message %d arrived when %d was due", r.Conv, i, next[r.Conv])
		}
		next[r.Conv]++
	}
	if dead := s.count(core.DeliveryDead); dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
}
