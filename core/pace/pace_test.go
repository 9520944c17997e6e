package pace

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock moves only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, fakeTimer{c.now.Add(d), ch})
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

func (c *fakeClock) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// waitBlocked waits (in real time, bounded) until n goroutines sleep on the clock.
func (c *fakeClock) waitBlocked(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute) // a hang backstop
	for c.pending() < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d waiters blocked on the clock", c.pending(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func setup(t *testing.T, spec Spec) (*Limiter, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	l, err := New(spec, WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	return l, clk
}

// waitAsync runs Wait in a goroutine and reports when it returns.
func waitAsync(l *Limiter, k Keys) <-chan error {
	done := make(chan error, 1)
	go func() { done <- l.Wait(context.Background(), k) }()
	return done
}

func mustNotReturn(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s: Wait returned early (err %v)", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

func mustReturn(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Fatalf("%s: Wait did not return", what)
	}
}

func TestNewRejectsBadRate(t *testing.T) {
	t.Parallel()
	for _, r := range []Rate{{Every: 0, Burst: 1}, {Every: time.Second, Burst: 0}} {
		if _, err := New(Spec{Conversation: &r}); err == nil {
			t.Errorf("New accepted %+v", r)
		}
	}
}

func TestBurstThenRate(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 3}})
	k := Keys{Conversation: "c1"}
	for i := 0; i < 3; i++ {
		if err := l.Wait(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	done := waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(999 * time.Millisecond)
	mustNotReturn(t, done, "before 1s")
	clk.Advance(time.Millisecond)
	mustReturn(t, done, "at 1s")
	// another conversation has its own bucket
	if err := l.Wait(context.Background(), Keys{Conversation: "c2"}); err != nil {
		t.Fatal(err)
	}
}

func TestEveryApplicableBucketMustGrant(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{
		Conversation: &Rate{Every: time.Second, Burst: 10},
		Group:        &Rate{Every: 3 * time.Second, Burst: 1},
		Global:       &Rate{Every: time.Millisecond, Burst: 100},
	})
	k := Keys{Conversation: "c", Group: "g"}
	if err := l.Wait(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	done := waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(2 * time.Second)
	mustNotReturn(t, done, "group bucket empty")
	clk.Advance(time.Second)
	mustReturn(t, done, "group refilled")
	// a send without the group key is not held by the group bucket
	if err := l.Wait(context.Background(), Keys{Conversation: "c"}); err != nil {
		t.Fatal(err)
	}
}

func TestDeadlineTakesNoToken(t *testing.T) {
	t.Parallel()
	l, _ := setup(t, Spec{
		Conversation: &Rate{Every: time.Hour, Burst: 1},
		Global:       &Rate{Every: time.Hour, Burst: 1},
	})
	// c1's send empties the global bucket for an hour
	if err := l.Wait(context.Background(), Keys{Conversation: "c1"}); err != nil {
		t.Fatal(err)
	}
	// c2's own bucket is full but the global one is not: the Wait fails by
	// deadline and must leave c2's token in place.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := l.Wait(ctx, Keys{Conversation: "c2"})
	if !errors.Is(err, ErrWouldExceedDeadline) {
		t.Fatalf("Wait = %v, want ErrWouldExceedDeadline", err)
	}
	l.mu.Lock()
	tok := l.buckets[bucketKey{Conversation, "c2"}].lim.TokensAt(l.clock.Now())
	l.mu.Unlock()
	if tok != 1 {
		t.Fatalf("c2 bucket holds %v tokens after a failed Wait, want 1 (token leaked)", tok)
	}
}

func TestCancelledWaitTakesNoToken(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 1}, Global: &Rate{Every: time.Second, Burst: 1}})
	if err := l.Wait(context.Background(), Keys{Conversation: "a"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, Keys{Conversation: "b"}) }()
	clk.waitBlocked(t, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	clk.Advance(time.Second)
	// global refilled; b must still hold its own token
	if err := l.Wait(context.Background(), Keys{Conversation: "b"}); err != nil {
		t.Fatal(err)
	}
	if got := l.buckets[bucketKey{Conversation, "b"}].lim.TokensAt(clk.Now()); got != 0 {
		t.Fatalf("b holds %v tokens, want 0", got)
	}
}

func TestPauseHoldsUntilEnd(t *testing.T) {
	t.Parallel()
	for _, scope := range []Scope{Conversation, Account, Global, Route} {
		t.Run(scope.String(), func(t *testing.T) {
			t.Parallel()
			l, clk := setup(t, Spec{
				Conversation: &Rate{Every: time.Millisecond, Burst: 100},
				Account:      &Rate{Every: time.Millisecond, Burst: 100},
				Global:       &Rate{Every: time.Millisecond, Burst: 100},
			})
			k := Keys{Conversation: "c", Account: "bot", Route: "POST /channels/1/messages"}
			key := map[Scope]string{Conversation: "c", Account: "bot", Global: "", Route: k.Route}[scope]
			l.Pause(scope, key, 10*time.Second)
			l.Pause(scope, key, time.Second) // a shorter pause does not shorten it
			done := waitAsync(l, k)
			clk.waitBlocked(t, 1)
			clk.Advance(9*time.Second + 999*time.Millisecond)
			mustNotReturn(t, done, "inside the pause")
			clk.Advance(time.Millisecond)
			mustReturn(t, done, "pause over")
		})
	}
}

func TestObserveRoute(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{})
	k := Keys{Route: "bucket-abc"}
	// unknown route: no limit
	if err := l.Wait(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	l.Observe("bucket-abc", 2, 5*time.Second)
	for i := 0; i < 2; i++ {
		if err := l.Wait(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	done := waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(4 * time.Second)
	mustNotReturn(t, done, "remaining 0 before reset")
	clk.Advance(time.Second)
	mustReturn(t, done, "after reset")

	l.Observe("bucket-abc", 0, 2*time.Second)
	done = waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(1999 * time.Millisecond)
	mustNotReturn(t, done, "remaining 0")
	clk.Advance(time.Millisecond)
	mustReturn(t, done, "reset passed")
}

func TestIdleBucketsEvicted(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 1}, IdleTTL: time.Minute})
	for i := 0; i < 1000; i++ {
		if err := l.Wait(context.Background(), Keys{Conversation: fmt.Sprint("c", i)}); err != nil {
			t.Fatal(err)
		}
	}
	l.Pause(Conversation, "paused", time.Hour)
	if got := l.Len(); got != 1001 {
		t.Fatalf("Len = %d, want 1001", got)
	}
	clk.Advance(2 * time.Minute)
	if err := l.Wait(context.Background(), Keys{Conversation: "fresh"}); err != nil {
		t.Fatal(err)
	}
	// left: the paused bucket and the fresh one
	if got := l.Len(); got != 2 {
		t.Fatalf("after idle TTL Len = %d, want 2", got)
	}
}

// TestDefaultIdleTTLBoundsMemory: with no IdleTTL configured, a platform's
// conversations (every Slack thread in its own channel, say) cost memory
// only while they were active in the last DefaultIdleTTL and a half, not
// the ten minutes that let a sustained load hold 300,000 buckets.
func TestDefaultIdleTTLBoundsMemory(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 3}})
	for i := range 500 {
		if err := l.Wait(context.Background(), Keys{Conversation: fmt.Sprint("old", i)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(DefaultIdleTTL / 2)
	if err := l.Wait(context.Background(), Keys{Conversation: "recent"}); err != nil {
		t.Fatal(err)
	}
	if got := l.Len(); got != 501 {
		t.Fatalf("before the TTL: Len = %d, want 501 (nothing idle long enough)", got)
	}
	clk.Advance(DefaultIdleTTL)
	if err := l.Wait(context.Background(), Keys{Conversation: "new"}); err != nil {
		t.Fatal(err)
	}
	// "old…" idle 1.5 TTL: gone; "recent" idle 1 TTL: gone too; "new" stays.
	if got := l.Len(); got != 1 {
		t.Fatalf("after 1.5 × DefaultIdleTTL: Len = %d, want 1", got)
	}
}

func TestEvictionKeepsUnrefilledBucket(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Hour, Burst: 1}, IdleTTL: time.Minute})
	if err := l.Wait(context.Background(), Keys{Conversation: "slow"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// evicting "slow" would hand out a fresh full bucket: it must wait instead
	if err := l.Wait(ctx, Keys{Conversation: "slow"}); !errors.Is(err, ErrWouldExceedDeadline) {
		t.Fatalf("Wait = %v, want ErrWouldExceedDeadline", err)
	}
}

// TestConcurrentWaitersNeverExceedBucket runs 1,000 waiters over 10
// conversations sharing a global bucket, on the real clock, and checks every
// grant time (recorded by the limiter as it grants) against each bucket.
func TestConcurrentWaitersNeverExceedBucket(t *testing.T) {
	t.Parallel()
	conv := Rate{Every: 2 * time.Millisecond, Burst: 3}
	glob := Rate{Every: 200 * time.Microsecond, Burst: 5}
	l, err := New(Spec{Conversation: &conv, Global: &glob})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	grants := map[string][]time.Time{}
	l.onGrant = func(at time.Time, k Keys) {
		mu.Lock()
		grants[k.Conversation] = append(grants[k.Conversation], at)
		grants["*global*"] = append(grants["*global*"], at)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	var ok atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Wait(ctx, Keys{Conversation: fmt.Sprint("c", i%10)}); err != nil {
				t.Error(err)
				return
			}
			ok.Add(1)
		}()
	}
	wg.Wait()
	if ok.Load() != 1000 {
		t.Fatalf("%d of 1000 waiters granted", ok.Load())
	}
	for key, ts := range grants {
		r := conv
		if key == "*global*" {
			r = glob
		}
		if err := checkBucket(ts, r); err != nil {
			t.Fatalf("bucket %s: %v", key, err)
		}
	}
	if len(grants["*global*"]) != 1000 {
		t.Fatalf("global saw %d grants", len(grants["*global*"]))
	}
}

// checkBucket verifies that in every window [ts[i], ts[j]] the grants number
// at most Burst plus what the rate refills in the window.
func checkBucket(ts []time.Time, r Rate) error {
	sort.Slice(ts, func(a, b int) bool { return ts[a].Before(ts[b]) })
	for i := range ts {
		for j := i + r.Burst; j < len(ts) && j < i+r.Burst+20; j++ {
			events := j - i + 1
			allowed := r.Burst + int(ts[j].Sub(ts[i])/r.Every)
			if events > allowed {
				return fmt.Errorf("%d grants in %v (allowed %d)", events, ts[j].Sub(ts[i]), allowed)
			}
		}
	}
	return nil
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	top := BackoffPolicy{Base: 100 * time.Millisecond, Cap: 5 * time.Second, Rand: func(n int64) int64 { return n - 1 }}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i, w := range want {
		if got := top.Backoff(i); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) with max jitter = %v, want %v", i, got, w*time.Millisecond)
		}
	}
	if got := top.Backoff(1000); got != 5*time.Second {
		t.Errorf("Backoff(1000) = %v, want the cap", got)
	}
	zero := BackoffPolicy{Base: time.Second, Cap: time.Minute, Rand: func(int64) int64 { return 0 }}
	if got := zero.Backoff(3); got != 0 {
		t.Errorf("full jitter can reach 0, got %v", got)
	}
	def := BackoffPolicy{}
	for i := 0; i < 100; i++ {
		if d := def.Backoff(i); d < 0 || d > time.Minute {
			t.Fatalf("default Backoff(%d) = %v out of [0, 1m]", i, d)
		}
	}
}
