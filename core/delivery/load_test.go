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

// The load tests' platform limits are slow enough that a pacer off by a
// fraction of a token shows: 20 ms per conversation with a burst of 2, and
// 1 ms for the whole account with a burst of 10. With 24 threads sent to at
// once the conversations could carry 1,200 messages/s, more than the
// account's 1,000, so both limits bind at some point of the run.
var (
	loadConv   = limit{Every: 20 * time.Millisecond, Burst: 2}
	loadGlobal = limit{Every: time.Millisecond, Burst: 10}
)

// loadSlack is all the fake forgives beyond the configured burst: half
// the 20 ms conversation interval. A pacer whose conversation burst
// is one token larger than configured sends a request a whole interval
// (20 ms) early at every thread's start and after every pause.
//
// The fake refuses (429) what arrives over a limit by more than loadSlack,
// as a platform would, and the pipeline must cope. But the fake's arrival
// clock also measures loopback and scheduling jitter — on a loaded 2-core
// machine under -race, requests arrive up to ~20 ms off the schedule the
// pacer kept — so the verdict on the pacer is taken on the clients' Sent
// stamps (the moment Send began, right after the pacer's grant), which
// carry only the grant-to-stamp delay. That delay, too, is occasionally
// several ms when the goroutine is descheduled in between, so up to
// jitterShare of the requests may exceed loadSlack; a pacer with a burst
// of 3 instead of 2 exceeds it on ~5% of them (each of those a whole
// 20 ms early), while a correct pacer under CI load (-race, other test
// binaries sharing 2 cores) has stamps up to ~8 ms late, hence half an
// interval of slack.
const (
	loadSlack   = 10 * time.Millisecond
	jitterShare = 0.02
)

// loadCase is one load run: threads × perThread replies queued in thread
// order, sent through one worker against the strict fake.
type loadCase struct {
	threads, perThread int
	store              core.OutboxStore
	subscribe          func(string) (<-chan struct{}, func())
	// add queues one thread's replies.
	add func(msgs []core.OutboxMessage)
	// sent counts the messages the store holds as sent.
	sent func() int
}

// runLoad queues, sends and checks: every message arrives once, in its
// thread's order; the pacer kept both limits within loadSlack (see there);
// no request left before a Retry-After had passed.
func runLoad(t *testing.T, lc loadCase) {
	f := newFakeServer(t, loadConv, loadGlobal)
	f.slack = loadSlack
	f.every429 = 97
	f.retryAfter = 30 * time.Millisecond
	p := newFakePlatform(f, delivery.Pacing{
		Conversation: delivery.Rate{Every: loadConv.Every, Burst: loadConv.Burst},
		Account:      delivery.Rate{Every: loadGlobal.Every, Burst: loadGlobal.Burst},
	}, 1000)
	for th := range lc.threads {
		msgs := make([]core.OutboxMessage, 0, lc.perThread)
		for i := range lc.perThread {
			msgs = append(msgs, reply(fmt.Sprintf("c%03d", th), fmt.Sprintf("c%03d #%03d", th, i)))
		}
		lc.add(msgs)
	}
	total := lc.threads * lc.perThread
	start := time.Now()
	startWorker(t, delivery.Options{Store: lc.store, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: lc.subscribe,
		Concurrency: 24, Backoff: pace.BackoffPolicy{Base: 5 * time.Millisecond, Cap: 50 * time.Millisecond}})
	waitFor(t, "every message to reach the platform", 5*time.Minute, func() bool { return len(f.received()) >= total })
	elapsed := time.Since(start)
	waitFor(t, "every message to be recorded as sent", time.Minute, func() bool { return lc.sent() >= total })

	violations, early, limited := f.stats()
	c := f.conformance(loadSlack)
	t.Logf("%d messages over %d threads in %v (%.0f/s; the account allows %.0f/s); %d requests, 429s answered: %d (every %dth on purpose, %d over a limit on arrival)",
		total, lc.threads, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(),
		float64(time.Second)/float64(loadGlobal.Every), c.Requests, limited, f.every429, violations)
	t.Logf("Sent stamps: worst %s early on a conversation, %s on the account; %d requests more than %v early (allowed %d). Arrivals: worst %s / %s, %d more than %v early",
		fmtSlack(c.SentConv), fmtSlack(c.SentGlobal), c.OverSent, loadSlack, int(jitterShare*float64(c.Requests)),
		fmtSlack(c.ArrivalConv), fmtSlack(c.ArrivalGlobal), c.OverArrival, loadSlack)
	if early != 0 {
		t.Errorf("%d requests before Retry-After had passed", early)
	}
	if float64(c.OverSent) > jitterShare*float64(c.Requests) {
		t.Errorf("the pacer let %d of %d requests go more than %v before their buckets allowed (worst: %v on a conversation, %v on the account)",
			c.OverSent, c.Requests, loadSlack, c.SentConv, c.SentGlobal)
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
	for th := range lc.threads {
		if conv := fmt.Sprintf("c%03d", th); next[conv] != lc.perThread {
			t.Errorf("thread %s: %d of %d messages arrived", conv, next[conv], lc.perThread)
		}
	}
	if n := lc.sent(); n != total {
		t.Errorf("%d recorded as sent, want %d", n, total)
	}
}

// fmtSlack prints an excess; negative means every request had room to spare.
func fmtSlack(d time.Duration) string {
	if d == noExcess {
		return "n/a"
	}
	if d <= 0 {
		return "none"
	}
	return d.String()
}

// TestManyThreadsWithinLimits queues 3,000 messages over 200 threads
// against a fake that enforces a per-conversation and an account limit with
// only loadSlack of tolerance and also answers every 97th request with a
// 429: every message arrives once, in its thread's order, with no request
// over a limit (see loadSlack for how that is judged) and none before a
// Retry-After had passed. The outbox is in
// memory (memStore): the point is the pipeline's pacing and ordering, and
// SQLite under -race would take minutes (TestManyThreadsDurable runs a
// smaller load on SQLite).
//
// Not parallel: it saturates the CPU, and the timing checks of the other
// tests would then measure the machine, not the pipeline. Its length is
// the messages over the account's rate (1,000/s): 15 a thread is three
// seconds at that limit, with 200 threads contending for it, the
// conversations' bursts at the start and a 429 every 97th request — what
// the 10,000-message run checks, in a third of the time under -race.
// DELIVERY_LOAD_PER_THREAD=50 is that run.
func TestManyThreadsWithinLimits(t *testing.T) {
	threads, perThread := 200, 15
	if n, err := strconv.Atoi(os.Getenv("DELIVERY_LOAD_PER_THREAD")); err == nil && n > 0 {
		perThread = n
	}
	s := newMemStore()
	runLoad(t, loadCase{
		threads: threads, perThread: perThread, store: s, subscribe: s.Subscribe,
		add: func(msgs []core.OutboxMessage) {
			for _, m := range msgs {
				s.add(m)
			}
		},
		sent: func() int { return s.count(core.DeliverySent) },
	})
	if dead := s.count(core.DeliveryDead); dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
}

// TestManyThreadsDurable is the same load, smaller, on the real SQLite
// outbox: 1,000 messages over 50 threads, each thread's replies queued in
// one transaction as the engine does.
func TestManyThreadsDurable(t *testing.T) {
	s := openStore(t)
	runLoad(t, loadCase{
		threads: 50, perThread: 20, store: s, subscribe: s.Subscribe,
		add:  func(msgs []core.OutboxMessage) { queue(t, s, msgs...) },
		sent: func() int { return countStatus(t, s, core.DeliverySent) },
	})
	if dead := countStatus(t, s, core.DeliveryDead); dead != 0 {
		t.Errorf("%d dead letters", dead)
	}
}
