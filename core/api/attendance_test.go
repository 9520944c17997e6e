package api

import (
	"context"
	"strings"
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
	a := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "a", Renew: 200 * time.Millisecond})
	b := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "b", Renew: 200 * time.Millisecond})
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
	// Renewed while held: still attended well past the first hold's lapse.
	time.Sleep(2 * AttendanceLapse * 200 * time.Millisecond)
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
	late := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "c", Now: func() time.Time { return time.Now().Add(time.Hour) }})
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
	here := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "here", Renew: 500 * time.Millisecond})
	there := NewSharedAttendance(AttendanceOptions{Store: st, Replica: "there", Renew: 500 * time.Millisecond})
	b := setupAgentWith(t, here)
	sid := b.newSession(t, appToken)
	releaseThere := there.Hold(context.Background(), sid)
	s := b.post(t, "/api/v1/agent/runs", appToken, map[string]any{"sessionId": sid, "text": "deploy api"})
	_, p := s.until(t, core.EventPermissionRequested)
	turn := strings.TrimPrefix(p.data["requestId"].(string), "ap-")
	s.cancel()
	// The drain polls every PollInterval; give it several rounds.
	time.Sleep(300 * time.Millisecond)
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
