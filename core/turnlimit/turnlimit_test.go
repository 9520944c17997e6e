package turnlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

func TestAdmitsUpToLimitThenQueuesInOrder(t *testing.T) {
	t.Parallel()
	l := New(2, 3)
	var tickets []*Ticket
	for i := range 5 {
		tk, err := l.Enter(fmt.Sprint("s", i))
		if err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
		tickets = append(tickets, tk)
	}
	for i, want := range []int{0, 0, 1, 2, 3} {
		if got := tickets[i].Position(); got != want {
			t.Errorf("ticket %d position = %d, want %d", i, got, want)
		}
	}
	if _, err := l.Enter("s5"); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("enter beyond the queue: %v, want ErrQueueFull", err)
	}
	tickets[0].Release()
	for i, want := range []int{0, 0, 0, 1, 2} {
		if i == 0 {
			continue
		}
		if got := tickets[i].Position(); got != want {
			t.Errorf("after release: ticket %d position = %d, want %d", i, got, want)
		}
	}
	// The queue has room again.
	tk, err := l.Enter("s6")
	if err != nil || tk.Position() != 3 {
		t.Fatalf("enter after a release: %v, position %v", err, tk)
	}
	if st := l.Stats(); st != (Stats{Running: 2, Waiting: 3}) {
		t.Errorf("stats = %+v", st)
	}
}

func TestOneTurnPerSession(t *testing.T) {
	t.Parallel()
	l := New(4, 16)
	tk, err := l.Enter("s")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Enter("s"); !errors.Is(err, ErrSessionBusy) {
		t.Fatalf("second turn of one session: %v, want ErrSessionBusy", err)
	}
	tk.Release()
	tk.Release() // twice is harmless
	if _, err := l.Enter("s"); err != nil {
		t.Fatalf("after release: %v", err)
	}
	if st := l.Stats(); st.Running != 1 {
		t.Errorf("double release changed the count: %+v", st)
	}
}

func TestWaitingTicketLeavingMovesOthersUp(t *testing.T) {
	t.Parallel()
	l := New(1, 4)
	run, _ := l.Enter("a")
	b, _ := l.Enter("b")
	c, _ := l.Enter("c")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Wait(ctx, nil) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait after cancel: %v", err)
	}
	if c.Position() != 1 {
		t.Errorf("c position = %d after b left, want 1", c.Position())
	}
	var moves []int
	admitted := make(chan error, 1)
	go func() { admitted <- c.Wait(context.Background(), func(p int) { moves = append(moves, p) }) }()
	run.Release()
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	if c.Position() != 0 || len(moves) != 0 {
		t.Errorf("c position %d, moves %v", c.Position(), moves)
	}
}

func TestWaitReportsEachMove(t *testing.T) {
	t.Parallel()
	l := New(1, 4)
	first, _ := l.Enter("a")
	second, _ := l.Enter("b")
	third, _ := l.Enter("c")
	var moves []int
	done := make(chan error, 1)
	go func() { done <- third.Wait(context.Background(), func(p int) { moves = append(moves, p) }) }()
	ch := third.Changed()
	first.Release() // second runs, third is next
	<-ch
	if p := third.Position(); p != 1 {
		t.Fatalf("position %d after the first release, want 1", p)
	}
	second.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The waiter may have started after the first move; whatever it saw is
	// a queue position, never 0 (admission ends the wait instead).
	for _, p := range moves {
		if p != 1 {
			t.Errorf("moves %v, want only 1", moves)
		}
	}
}

// Many goroutines entering, waiting and releasing never exceed the limit,
// and every admitted turn is eventually admitted (no lost wake-up).
func TestConcurrentNeverExceedsLimit(t *testing.T) {
	t.Parallel()
	const limit, queue, n = 4, 16, 400
	l := New(limit, queue)
	var running, peak, full atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := l.Enter(fmt.Sprint("s", i))
			if errors.Is(err, ErrQueueFull) {
				full.Add(1)
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			if err := tk.Wait(context.Background(), nil); err != nil {
				t.Error(err)
				return
			}
			now := running.Add(1)
			for {
				p := peak.Load()
				if now <= p || peak.CompareAndSwap(p, now) {
					break
				}
			}
			running.Add(-1)
			tk.Release()
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("peak %d turns at once, limit %d", p, limit)
	}
	if st := l.Stats(); st != (Stats{}) {
		t.Errorf("left over: %+v", st)
	}
	t.Logf("%d of %d refused as queue_full", full.Load(), n)
}

func TestSetKeepsOneLimiterPerToken(t *testing.T) {
	t.Parallel()
	var s Set
	a := s.For("app", 1, 4)
	if s.For("app", 8, 8) != a {
		t.Error("a second For made a new limiter")
	}
	if s.For("other", 1, 4) == a {
		t.Error("two tokens share a limiter")
	}
}
