package pace

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// grantLoop runs n Waits for k one after another, as a delivery worker does,
// and reports each grant time the limiter recorded.
func grantLoop(t *testing.T, l *Limiter, k Keys, n int) <-chan time.Time {
	t.Helper()
	grants := make(chan time.Time, n)
	l.onGrant = func(at time.Time, _ Keys) { grants <- at }
	go func() {
		for range n {
			if err := l.Wait(context.Background(), k); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	return grants
}

func nextGrant(t *testing.T, grants <-chan time.Time, i int) time.Time {
	t.Helper()
	select {
	case at := <-grants:
		return at
	case <-time.After(2 * time.Minute): // a hang backstop
		t.Fatalf("grant %d did not come", i)
	}
	return time.Time{}
}

// TestBurst1GrantsAtExactIntervals: a burst-1 bucket at 30/s grants every
// 33.333333 ms exactly — not a nanosecond early, not a nanosecond late —
// over 300 grants, so a single sender keeps the whole permitted rate.
func TestBurst1GrantsAtExactIntervals(t *testing.T) {
	t.Parallel()
	every := time.Second / 30
	l, clk := setup(t, Spec{Conversation: &Rate{Every: every, Burst: 1}})
	t0 := clk.Now()
	const n = 300
	grants := grantLoop(t, l, Keys{Conversation: "c"}, n)
	if at := nextGrant(t, grants, 0); !at.Equal(t0) {
		t.Fatalf("first grant at %v, want at once", at.Sub(t0))
	}
	for i := 1; i < n; i++ {
		clk.waitBlocked(t, 1)
		clk.Advance(every - time.Nanosecond)
		if clk.pending() != 1 {
			t.Fatalf("grant %d: the waiter woke %v after the previous grant, before the bucket refilled", i, every-time.Nanosecond)
		}
		select {
		case at := <-grants:
			t.Fatalf("grant %d at +%v, before the bucket refilled", i, at.Sub(t0))
		default:
		}
		clk.Advance(time.Nanosecond)
		if at, want := nextGrant(t, grants, i), t0.Add(time.Duration(i)*every); !at.Equal(want) {
			t.Fatalf("grant %d at +%v, want +%v (drift %v)", i, at.Sub(t0), want.Sub(t0), at.Sub(want))
		}
	}
	if got, want := clk.Now().Sub(t0), (n-1)*every; got != want {
		t.Fatalf("%d grants took %v, want exactly %v", n, got, want)
	}
}

// TestLateWakeIsCredited: a waiter whose timer fires late has its grant
// dated at the moment it was due, as long as it is at most the lateness
// credit late, so the schedule does not slip; a later wake is dated back by
// the credit only, so two returns from Wait are never closer than the
// interval minus the credit.
func TestLateWakeIsCredited(t *testing.T) {
	t.Parallel()
	every := time.Second / 30
	l, clk := setup(t, Spec{Conversation: &Rate{Every: every, Burst: 1}})
	t0 := clk.Now()
	grants := grantLoop(t, l, Keys{Conversation: "c"}, 4)
	nextGrant(t, grants, 0)

	clk.waitBlocked(t, 1)
	clk.Advance(every + maxLateCredit) // woke late by the whole credit: on schedule
	if at := nextGrant(t, grants, 1); !at.Equal(t0.Add(every)) {
		t.Fatalf("grant 1 at +%v, want +%v (dated when due)", at.Sub(t0), every)
	}
	clk.waitBlocked(t, 1)
	clk.Advance(every - maxLateCredit - time.Nanosecond)
	if clk.pending() != 1 {
		t.Fatal("grant 2 came before its schedule")
	}
	clk.Advance(time.Nanosecond) // exactly 2·every after t0
	if at := nextGrant(t, grants, 2); !at.Equal(t0.Add(2 * every)) {
		t.Fatalf("grant 2 at +%v, want +%v (no drift after a late wake)", at.Sub(t0), 2*every)
	}

	clk.waitBlocked(t, 1)
	clk.Advance(every + 10*time.Millisecond) // far later than the credit
	woke := clk.Now()
	if at := nextGrant(t, grants, 3); !at.Equal(woke.Add(-maxLateCredit)) {
		t.Fatalf("grant 3 at +%v, want +%v (the wake minus the credit)", at.Sub(t0), woke.Add(-maxLateCredit).Sub(t0))
	}
}

// TestGrantWithoutSleepIsNotBackdated: a caller that comes back after its
// token was due (its send took long) is granted at once and dated at once:
// the bucket's next token is a whole interval later.
func TestGrantWithoutSleepIsNotBackdated(t *testing.T) {
	t.Parallel()
	every := time.Second / 30
	l, clk := setup(t, Spec{Conversation: &Rate{Every: every, Burst: 1}})
	var at []time.Time
	l.onGrant = func(t time.Time, _ Keys) { at = append(at, t) }
	k := Keys{Conversation: "c"}
	if err := l.Wait(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	clk.Advance(every + 5*time.Millisecond)
	if err := l.Wait(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	if !at[1].Equal(clk.Now()) {
		t.Fatalf("immediate grant dated %v before now", clk.Now().Sub(at[1]))
	}
	done := waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(every - time.Nanosecond)
	mustNotReturn(t, done, "a whole interval has not passed since the last grant")
	clk.Advance(time.Nanosecond)
	mustReturn(t, done, "a whole interval after the last grant")
}

// TestCreditNeverBeatsPause: a grant after a sleep is never dated before a
// pause's end, whatever the credit.
func TestCreditNeverBeatsPause(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 1}})
	var at []time.Time
	l.onGrant = func(t time.Time, _ Keys) { at = append(at, t) }
	k := Keys{Conversation: "c"}
	if err := l.Wait(context.Background(), k); err != nil {
		t.Fatal(err)
	}
	l.Pause(Conversation, "c", 1500*time.Millisecond)
	end := clk.Now().Add(1500 * time.Millisecond)
	done := waitAsync(l, k)
	clk.waitBlocked(t, 1)
	clk.Advance(1500*time.Millisecond + time.Millisecond) // woke 1 ms late
	mustReturn(t, done, "pause over")
	if at[1].Before(end) {
		t.Fatalf("grant dated %v before the pause ended", end.Sub(at[1]))
	}
}

// TestNeverANanosecondEarly: rate.Limiter counts tokens in floating point and
// truncates its delays to whole nanoseconds, so a delay due a fraction of a
// nanosecond past an integer would come a nanosecond early. Over many grants
// at awkward intervals and arrival times, no grant comes before the bucket
// allows, and none more than two nanoseconds after it.
func TestNeverANanosecondEarly(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	for _, every := range []time.Duration{time.Second / 7, time.Second / 30, time.Second / 200, 200 * time.Microsecond, time.Second, 3 * time.Second} {
		l, clk := setup(t, Spec{Conversation: &Rate{Every: every, Burst: 1}})
		k := Keys{Conversation: "c"}
		l.mu.Lock()
		last := clk.Now()
		if at := l.tryTake(last, k, false); !at.IsZero() {
			t.Fatalf("first grant not at once")
		}
		for i := range 5000 {
			// The caller comes back some time before the next token.
			now := last.Add(time.Duration(rnd.Int64N(int64(every))))
			due := l.tryTake(now, k, false)
			if due.IsZero() {
				t.Fatalf("every %v grant %d: granted at +%v after the last, before the bucket refilled", every, i, now.Sub(last))
			}
			// Asked again from another instant, float noise may move the
			// moment by a nanosecond (Wait then sleeps that nanosecond).
			if at := l.tryTake(due, k, true); !at.IsZero() {
				if at.Sub(due) > time.Nanosecond {
					t.Fatalf("every %v grant %d: not granted when due, but %v later", every, i, at.Sub(due))
				}
				if due = at; !l.tryTake(due, k, true).IsZero() {
					t.Fatalf("every %v grant %d: not granted a nanosecond after due", every, i)
				}
			}
			if got := due.Sub(last); got < every || got > every+2*time.Nanosecond {
				t.Fatalf("every %v grant %d: granted %v after the last, want %v", every, i, got, every)
			}
			last = due
		}
		l.mu.Unlock()
	}
}
