package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// attendStore is the store's side of Agent API attendance across replicas
// (core/api.AttendanceStore); every backend must have it.
type attendStore interface {
	AgentAttendHold(ctx context.Context, session, holder string, until, now time.Time) error
	AgentAttendRelease(ctx context.Context, session, holder string) error
	AgentAttended(ctx context.Context, session string, now time.Time) (bool, error)
}

func attendance(t *testing.T, s core.Store) attendStore {
	t.Helper()
	as, ok := s.(attendStore)
	if !ok {
		t.Fatalf("%T does not implement the agent attendance methods", s)
	}
	return as
}

func wantAttended(t *testing.T, as attendStore, session string, now time.Time, want bool, what string) {
	t.Helper()
	got, err := as.AgentAttended(ctx(t), session, now)
	if err != nil {
		t.Fatalf("%s: AgentAttended: %v", what, err)
	}
	if got != want {
		t.Errorf("%s: attended = %v, want %v", what, got, want)
	}
}

// A hold attends its session until held_until; a renewal moves it on; a
// hold that was not renewed lapses on its own (a crashed replica).
func testAgentAttendanceHoldRenewLapse(t *testing.T, s core.Store) {
	as := attendance(t, s)
	ses, other := newID("ses"), newID("ses")
	wantAttended(t, as, ses, t0, false, "before any hold")
	if err := as.AgentAttendHold(ctx(t), ses, "replica-a", t0.Add(15*time.Second), t0); err != nil {
		t.Fatalf("AgentAttendHold: %v", err)
	}
	wantAttended(t, as, ses, t0, true, "held")
	wantAttended(t, as, ses, t0.Add(14*time.Second), true, "held, not yet lapsed")
	wantAttended(t, as, other, t0, false, "another session")
	wantAttended(t, as, ses, t0.Add(15*time.Second), false, "at held_until")
	// Renewed before it lapsed: attended until the new held_until.
	if err := as.AgentAttendHold(ctx(t), ses, "replica-a", t0.Add(20*time.Second), t0.Add(5*time.Second)); err != nil {
		t.Fatalf("renew: %v", err)
	}
	wantAttended(t, as, ses, t0.Add(19*time.Second), true, "renewed")
	wantAttended(t, as, ses, t0.Add(21*time.Second), false, "renewal lapsed")
	// A lapsed hold is pruned by the next hold of the session and does not
	// come back.
	if err := as.AgentAttendHold(ctx(t), ses, "replica-b", t0.Add(40*time.Second), t0.Add(30*time.Second)); err != nil {
		t.Fatalf("hold b: %v", err)
	}
	if err := as.AgentAttendRelease(ctx(t), ses, "replica-b"); err != nil {
		t.Fatalf("release b: %v", err)
	}
	wantAttended(t, as, ses, t0.Add(10*time.Second), false, "lapsed hold pruned")
}

// Holds are per holder: the session stays attended until every replica
// holding it released (or let lapse) its hold; releasing twice, or what was
// never held, is no error.
func testAgentAttendanceReleasePerHolder(t *testing.T, s core.Store) {
	as := attendance(t, s)
	ses, other := newID("ses"), newID("ses")
	until := t0.Add(15 * time.Second)
	for _, h := range []string{"replica-a", "replica-b"} {
		if err := as.AgentAttendHold(ctx(t), ses, h, until, t0); err != nil {
			t.Fatalf("hold %s: %v", h, err)
		}
	}
	if err := as.AgentAttendHold(ctx(t), other, "replica-a", until, t0); err != nil {
		t.Fatalf("hold other: %v", err)
	}
	if err := as.AgentAttendRelease(ctx(t), ses, "replica-a"); err != nil {
		t.Fatalf("release a: %v", err)
	}
	wantAttended(t, as, ses, t0, true, "b still holds")
	wantAttended(t, as, other, t0, true, "a's hold of another session")
	if err := as.AgentAttendRelease(ctx(t), ses, "replica-a"); err != nil {
		t.Fatalf("release a twice: %v", err)
	}
	wantAttended(t, as, ses, t0, true, "b still holds after a released twice")
	if err := as.AgentAttendRelease(ctx(t), ses, "replica-b"); err != nil {
		t.Fatalf("release b: %v", err)
	}
	wantAttended(t, as, ses, t0, false, "every holder released")
	if err := as.AgentAttendRelease(ctx(t), newID("ses"), "replica-c"); err != nil {
		t.Errorf("release of what was never held: %v", err)
	}
}
