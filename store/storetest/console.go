package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ConsoleSessions is the web console's session store (declared again here
// as adapters/console/web declares it: storetest imports no adapter).
// Every backend must implement it.
type ConsoleSessions interface {
	ConsoleSessionRevoke(ctx context.Context, id string, expires, now time.Time) error
	ConsoleSessionRevoked(ctx context.Context, id string, now time.Time) (bool, error)
}

func consoleSessions(t *testing.T, s core.Store) ConsoleSessions {
	t.Helper()
	cs, ok := s.(ConsoleSessions)
	if !ok {
		t.Fatalf("%T does not store console sign-outs (storetest.ConsoleSessions)", s)
	}
	return cs
}

// testConsoleSessionRevoke: a revoked id is revoked until its expiry and
// not after; other ids are not; revoking twice is fine and the later
// expiry counts; an empty id is refused.
func testConsoleSessionRevoke(t *testing.T, s core.Store) {
	cs := consoleSessions(t, s)
	id, other := newID("sess"), newID("sess")
	exp := t0.Add(time.Hour)
	if ok, err := cs.ConsoleSessionRevoked(ctx(t), id, t0); err != nil || ok {
		t.Fatalf("a fresh id reads revoked=%v, %v", ok, err)
	}
	if err := cs.ConsoleSessionRevoke(ctx(t), id, exp, t0); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	for _, c := range []struct {
		id   string
		at   time.Time
		want bool
	}{{id, t0, true}, {id, exp.Add(-time.Microsecond), true}, {id, exp, false}, {other, t0, false}} {
		if ok, err := cs.ConsoleSessionRevoked(ctx(t), c.id, c.at); err != nil || ok != c.want {
			t.Errorf("revoked(%s at %s) = %v, %v; want %v", c.id, c.at.Sub(t0), ok, err, c.want)
		}
	}
	if err := cs.ConsoleSessionRevoke(ctx(t), id, exp.Add(time.Hour), t0); err != nil {
		t.Fatalf("revoke again: %v", err)
	}
	if ok, _ := cs.ConsoleSessionRevoked(ctx(t), id, exp.Add(time.Minute)); !ok {
		t.Error("the second revocation's later expiry does not count")
	}
	if err := cs.ConsoleSessionRevoke(ctx(t), "", exp, t0); err == nil {
		t.Error("an empty id was accepted")
	}
}

// testConsoleSessionPrune: a revocation prunes the ones that ended and
// leaves live ones alone, so the table stays as small as the sign-outs of
// one session lifetime.
func testConsoleSessionPrune(t *testing.T, s core.Store) {
	cs := consoleSessions(t, s)
	old, live := newID("sess-old"), newID("sess-live")
	if err := cs.ConsoleSessionRevoke(ctx(t), old, t0.Add(time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if err := cs.ConsoleSessionRevoke(ctx(t), live, t0.Add(3*time.Hour), t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err) // prunes old
	}
	if ok, err := cs.ConsoleSessionRevoked(ctx(t), live, t0.Add(2*time.Hour)); err != nil || !ok {
		t.Fatalf("live revocation lost by the prune: %v, %v", ok, err)
	}
	raw, ok := s.(RawDB)
	if !ok {
		return
	}
	var n int
	if err := raw.DB().QueryRowContext(ctx(t), `SELECT COUNT(*) FROM console_sessions_revoked WHERE session_id = '`+old+`'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("an ended revocation was not pruned: %d rows, %v", n, err)
	}
}
