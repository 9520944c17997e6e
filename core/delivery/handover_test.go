package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// What a new holder of the send lease starts from: no prior holder or a
// hand-over long ago means no wait at all (the refill wait every start used
// to take); a recent hand-over waits until its last send plus a refill; a
// lapsed lease until its end plus a refill; a state that does not parse a
// full refill from now. Pauses pass through.
func TestTakeOverStartsWhereThePriorHolderStopped(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	refill := 3 * time.Second
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, c := range []struct {
		name      string
		lease     core.SendLease
		quiet     time.Time // zero: no hold
		wantPause bool
	}{
		{name: "NoPriorHolder", lease: core.SendLease{Acquired: true}},
		{name: "HandedOverIdle", lease: core.SendLease{Acquired: true, PriorOwner: "r1", PriorState: []byte(`{}`)}},
		{name: "HandedOverLongAgo", lease: core.SendLease{Acquired: true, PriorOwner: "r1",
			PriorState: []byte(`{"last_grant":"` + at(-time.Hour).Format(time.RFC3339Nano) + `"}`)}, quiet: at(-time.Hour + refill)},
		{name: "HandedOverJustNow", lease: core.SendLease{Acquired: true, PriorOwner: "r1",
			PriorState: []byte(`{"last_grant":"` + at(-time.Second).Format(time.RFC3339Nano) + `"}`)}, quiet: at(2 * time.Second)},
		{name: "LapsedLease", lease: core.SendLease{Acquired: true, PriorOwner: "r1", PriorUntil: at(-500 * time.Millisecond),
			PriorState: []byte(`{"last_grant":"` + at(-5*time.Second).Format(time.RFC3339Nano) + `"}`)}, quiet: at(2500 * time.Millisecond)},
		{name: "UnreadableState", lease: core.SendLease{Acquired: true, PriorOwner: "r1", PriorState: []byte(`{"last_grant":`)}, quiet: at(refill)},
		{name: "PausePassesThrough", lease: core.SendLease{Acquired: true, PriorOwner: "r1",
			PriorState: []byte(`{"pauses":[{"scope":"conversation","key":"C1","until":"` + at(time.Minute).Format(time.RFC3339Nano) + `"}]}`)},
			wantPause: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, quiet := delivery.TakeOver(c.lease, now, refill)
			if !quiet.Equal(c.quiet) {
				t.Errorf("quiet = %v, want %v", quiet, c.quiet)
			}
			if got := len(h.Pauses) == 1 && h.Pauses[0].Key == "C1" && h.Pauses[0].Until.Equal(at(time.Minute)); got != c.wantPause {
				t.Errorf("pauses = %+v, want the stored one: %v", h.Pauses, c.wantPause)
			}
		})
	}
}

// stuckRenewals is a store whose lease renewals hang until their context
// ends (a store gone slow or unreachable mid-lease); it records hand-overs.
type stuckRenewals struct {
	*memStore
	mu        sync.Mutex
	acquired  bool
	handedOff chan struct{}
}

func (s *stuckRenewals) SendLeaseAcquire(ctx context.Context, p core.SendLeaseParams) (core.SendLease, error) {
	s.mu.Lock()
	first := !s.acquired
	s.acquired = true
	s.mu.Unlock()
	if first {
		return s.memStore.SendLeaseAcquire(ctx, p)
	}
	<-ctx.Done()
	return core.SendLease{}, ctx.Err()
}

func (s *stuckRenewals) SendLeaseHandOver(ctx context.Context, p core.SendLeaseParams) error {
	select {
	case s.handedOff <- struct{}{}:
	default:
	}
	return s.memStore.SendLeaseHandOver(ctx, p)
}

// A renewal that hangs cannot keep the worker sending past its lease: the
// deadline (TTL/6 before the lease ends) runs on a timer of its own,
// stops the sends and the worker hands the lease over — where it used to
// wait on the hung call for good, sending all the while.
func TestStuckRenewalStopsSending(t *testing.T) {
	t.Parallel()
	s := &stuckRenewals{memStore: newMemStore(), handedOff: make(chan struct{}, 1)}
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{Conversation: delivery.Rate{Every: 20 * time.Millisecond, Burst: 1}}, 1000)
	for i := range 200 {
		s.add(reply("hot", fmt.Sprintf("#%d", i)))
	}
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", LeaseTTL: 600 * time.Millisecond})
	select {
	case <-s.handedOff:
	case <-time.After(eventBound):
		t.Fatal("the worker never stopped sending: a hung renewal held it past its lease")
	}
	t.Logf("%d of 200 sent before the lease lapsed", len(f.received()))
}
