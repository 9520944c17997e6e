package api

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/coretest"
)

// Two replicas' Attendance on one store: a stream held on one is seen by
// the other (the replica executing the turn), per stream, until released
// or lapsed.
func TestAttendanceSharedThroughTheStore(t *testing.T) {
	t.Parallel()
	st := coretest.Store(t)
	// One clock for both replicas, moved by the test; a's renewals (on
	// its real ticker) are seen through its store.
	clk := &testClock{t: time.Now()}
	rec := &holdRecorder{AttendanceStore: st}
	a := NewSharedAttendance(AttendanceOptions{Store: rec, Replica: "a", Renew: 200 * time.Millisecond, Now: clk.now})
	b := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "b", Renew: 200 * time.Millisecond, Now: clk.now})
	thread := core.Thread{Channel: core.AgentSessionChannel, Key: "ses-1"}
	if a.Attended(thread) || b.Attended(thread) {
		t.Fatal("attended before any stream")
	}
	ctx := context.Background()
	r1 := a.Hold(ctx, thread.Key)
	r2 := a.Hold(ctx, thread.Key)
	if !b.Attended(thread) {
		t.Fatal("replica b does not see the stream replica a holds")
	}
	if b.Attended(core.Thread{Channel: core.AgentSessionChannel, Key: "ses-2"}) {
		t.Error("another session attended")
	}
	if b.Attended(core.Thread{Channel: "console", Key: thread.Key}) {
		t.Error("a chat thread attended")
	}
	// Renewed while held: still attended well past the first hold's lapse,
	// once both of a's streams renewed after the clock moved there.
	past := clk.advance(2 * AttendanceLapse * 200 * time.Millisecond)
	eventually(t, "both of a's holds renewed", func() bool { return rec.renewedSince(past) >= 2 })
	if !b.Attended(thread) {
		t.Error("the hold lapsed although its stream is open")
	}
	if r1() {
		t.Error("first of two streams released: reported last")
	}
	if !b.Attended(thread) {
		t.Error("one of a's two streams closed: b sees nobody")
	}
	rb := b.Hold(ctx, thread.Key)
	if !r2() {
		t.Error("a's last stream released: not reported last")
	}
	if !a.Attended(thread) {
		t.Error("a's streams closed while b holds one: a sees nobody")
	}
	rb()
	if a.Attended(thread) || b.Attended(thread) {
		t.Error("attended after every stream closed")
	}
	// A replica that died leaves its hold; it lapses once not renewed: b's
	// clock past the lapse sees nobody.
	_ = a.Hold(ctx, thread.Key)
	late := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "c", Now: func() time.Time { return clk.now().Add(time.Hour) }})
	if !b.Attended(thread) || late.Attended(thread) {
		t.Errorf("a held hold: attended %v now, %v an hour later (want true, false)", b.Attended(thread), late.Attended(thread))
	}
}

// The stream of a turn waiting for approval closes on this replica while
// another replica still holds a stream of the session: the wait goes on;
// it is released only once that stream closed too.
func TestAgentStreamDroppedWhileAnotherReplicaHolds(t *testing.T) {
	t.Parallel()
	st := coretest.Store(t)
	rec := &holdRecorder{AttendanceStore: st}
	here := NewSharedAttendance(AttendanceOptions{Store: rec, Replica: "here", Renew: 500 * time.Millisecond})
	there := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "there", Renew: 500 * time.Millisecond})
	b := setupAgentWith(t, here)
	sid := b.newSession(t, appToken)
	releaseThere := there.Hold(context.Background(), sid)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"sessionId": sid, "text": "deploy api"})
	_, p := s.until(t, core.EventPermissionRequested)
	turn := strings.TrimPrefix(p.data["requestId"].(string), "ap-")
	s.cancel()
	// The drain asks the store every PollInterval once no stream is held
	// here; let it be told "attended" several times.
	eventually(t, "the drain asked the store thrice", func() bool { return rec.attendedAnswers() >= 3 })
	b.fa.mu.Lock()
	n := len(b.fa.releases)
	b.fa.mu.Unlock()
	if n != 0 {
		t.Fatal("the wait was released while another replica holds the session's stream")
	}
	releaseThere()
	eventually(t, "the wait released once no replica holds the stream", func() bool {
		b.fa.mu.Lock()
		defer b.fa.mu.Unlock()
		return len(b.fa.releases) == 1 && b.fa.releases[0] == turn
	})
	eventually(t, "the turn ended", func() bool { return b.fa.status(turn) == core.RunSucceeded })
}

// testClock is a clock the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// advance moves the clock by d and returns the new time.
func (c *testClock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// holdRecorder is an AttendanceStore that records, per holder, the clock
// of its latest hold or renewal, and counts "attended" answers.
type holdRecorder struct {
	AttendanceStore
	mu   sync.Mutex
	last map[string]time.Time
	yes  int // AgentAttended answers "attended"
}

func (r *holdRecorder) AgentAttended(ctx context.Context, session string, now time.Time) (bool, error) {
	ok, err := r.AttendanceStore.AgentAttended(ctx, session, now)
	if ok {
		r.mu.Lock()
		r.yes++
		r.mu.Unlock()
	}
	return ok, err
}

// attendedAnswers counts the AgentAttended calls answered "attended".
func (r *holdRecorder) attendedAnswers() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.yes
}

func (r *holdRecorder) AgentAttendHold(ctx context.Context, session, holder string, until, now time.Time) error {
	err := r.AttendanceStore.AgentAttendHold(ctx, session, holder, until, now)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		r.last = map[string]time.Time{}
	}
	if err == nil {
		r.last[holder] = now
	}
	return err
}

// renewedSince counts the holders whose latest hold was recorded at t or
// later.
func (r *holdRecorder) renewedSince(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.last {
		if !at.Before(t) {
			n++
		}
	}
	return n
}
