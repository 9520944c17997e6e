package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func openPostgres(t *testing.T, dsn string) core.Store {
	t.Helper()
	s, err := testkit.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// deadStore is a replica that dies: it never gets to release its lease.
type deadStore struct{ core.Store }

func (deadStore) LeaseRelease(ctx context.Context, name, owner string) error { return nil }

// Two replicas (two Store instances, two owners) run a worker for the same
// channel on one Postgres: only the lease holder sends, so one
// conversation's rate never exceeds its bucket; stopping the owner (or
// killing it, so its lease must lapse) lets the other resume within 10 s
// with nothing lost or sent twice.
func TestPostgresTwoReplicasOneSender(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			t.Parallel()
			twoReplicas(t, crash)
		})
	}
}

func twoReplicas(t *testing.T, crash bool) {
	dsn := pgtest.DSN(t)
	var s1 core.Store = openPostgres(t, dsn)
	s2 := openPostgres(t, dsn)
	if crash {
		s1 = deadStore{s1}
	}
	conv := limit{Every: 40 * time.Millisecond, Burst: 1}
	f := newFakeServer(t, conv, limit{})
	// Arrival jitter under a loaded -race run shifts the fake's schedule;
	// two senders at once would gain 40 ms per message and trip it at once.
	f.slack = 25 * time.Millisecond
	pacing := delivery.Pacing{Conversation: delivery.Rate{Every: conv.Every, Burst: conv.Burst}}
	p1, p2 := newFakePlatform(f, pacing, 1000), newFakePlatform(f, pacing, 1000)
	var mu sync.Mutex
	by := map[string]int{}
	p1.afterSend = func(core.Outbound) { mu.Lock(); by["r1"]++; mu.Unlock() }
	p2.afterSend = func(core.Outbound) { mu.Lock(); by["r2"]++; mu.Unlock() }
	const n = 90
	var msgs []core.OutboxMessage
	for i := range n {
		msgs = append(msgs, reply("hot", fmt.Sprintf("c%03d #%03d", 0, i)))
	}
	queue(t, s1, msgs...)
	ttl := 2 * time.Second
	w1 := startWorker(t, delivery.Options{Store: s1, Cards: &cards{}, Platform: p1, Owner: "r1", Subscribe: s1.Subscribe, LeaseTTL: ttl})
	waitFor(t, "r1 to start sending", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return by["r1"] > 0 })
	startWorker(t, delivery.Options{Store: s2, Cards: &cards{}, Platform: p2, Owner: "r2", Subscribe: s2.Subscribe, LeaseTTL: ttl})
	waitFor(t, "a third of the messages", 20*time.Second, func() bool { return len(f.received()) >= n/3 })
	mu.Lock()
	if by["r2"] != 0 {
		t.Errorf("r2 sent %d messages while r1 held the lease", by["r2"])
	}
	mu.Unlock()
	stopped := time.Now()
	w1.stop()
	waitFor(t, "r2 to take over", 10*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return by["r2"] > 0 })
	t.Logf("r2 resumed %v after r1 stopped (crash=%v)", time.Since(stopped), crash)
	waitFor(t, "every message", 30*time.Second, func() bool { return countStatus(t, s2, core.DeliverySent) == n })
	got := f.received()
	if len(got) != n {
		t.Errorf("received %d, want %d", len(got), n)
	}
	for i, r := range got {
		if want := fmt.Sprintf("c000 #%03d", i); r.Text != want {
			t.Fatalf("message %d is %q, want %q", i, r.Text, want)
		}
	}
	if v, e, _ := f.stats(); v != 0 || e != 0 {
		t.Errorf("%d requests over the conversation limit, %d early", v, e)
		for i := 1; i < len(got); i++ {
			if gap := got[i].At.Sub(got[i-1].At); gap < conv.Every {
				t.Logf("message %d arrived %v after %d", i, gap, i-1)
			}
		}
	}
}
