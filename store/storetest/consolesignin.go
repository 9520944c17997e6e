package storetest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ConsoleSignins is the web console's store of OpenID Connect sign-ins
// (declared again here as adapters/console/web declares it). Every
// backend must implement it.
type ConsoleSignins interface {
	ConsoleSigninCreate(ctx context.Context, si core.ConsoleSignin, now time.Time) error
	ConsoleSigninGet(ctx context.Context, id string, now time.Time) (*core.ConsoleSignin, error)
	ConsoleSigninEnd(ctx context.Context, id string) error
	ConsoleStateUse(ctx context.Context, state string, expires, now time.Time) error
}

func consoleSignins(t *testing.T, s core.Store) ConsoleSignins {
	t.Helper()
	cs, ok := s.(ConsoleSignins)
	if !ok {
		t.Fatalf("%T does not store console sign-ins (storetest.ConsoleSignins)", s)
	}
	return cs
}

// testConsoleSignin: a stored sign-in reads back whole until it expires,
// then is not found; ending it makes it not found at once; an unknown id
// is not found; ending twice is fine.
func testConsoleSignin(t *testing.T, s core.Store) {
	cs := consoleSignins(t, s)
	id := newID("signin")
	want := core.ConsoleSignin{ID: id, Identity: "console:alice@example.com", Name: "Alice Liddell",
		Groups: []string{"sre", "Ops Leads"}, CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := cs.ConsoleSigninCreate(ctx(t), want, t0); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := cs.ConsoleSigninGet(ctx(t), id, t0.Add(time.Minute))
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.Identity != want.Identity || got.Name != want.Name || !slices.Equal(got.Groups, want.Groups) ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("read back %+v, want %+v", got, want)
	}
	if _, err := cs.ConsoleSigninGet(ctx(t), id, want.ExpiresAt); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("at its expiry: %v, want ErrNotFound", err)
	}
	if _, err := cs.ConsoleSigninGet(ctx(t), newID("signin"), t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
	if err := cs.ConsoleSigninEnd(ctx(t), id); err != nil {
		t.Fatalf("end: %v", err)
	}
	if _, err := cs.ConsoleSigninGet(ctx(t), id, t0); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("after sign-out: %v, want ErrNotFound", err)
	}
	if err := cs.ConsoleSigninEnd(ctx(t), id); err != nil {
		t.Errorf("end twice: %v", err)
	}
	noGroups := core.ConsoleSignin{ID: newID("signin"), Identity: "console:bob", CreatedAt: t0, ExpiresAt: t0.Add(time.Hour)}
	if err := cs.ConsoleSigninCreate(ctx(t), noGroups, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := cs.ConsoleSigninGet(ctx(t), noGroups.ID, t0); err != nil || len(got.Groups) != 0 {
		t.Errorf("no groups read back as %v, %v", got, err)
	}
	if err := cs.ConsoleSigninCreate(ctx(t), core.ConsoleSignin{Identity: "console:x", ExpiresAt: t0.Add(time.Hour)}, t0); err == nil {
		t.Error("an empty id was accepted")
	}
}

// testConsoleStateSingleUse: of many concurrent uses of one sign-in state
// exactly one succeeds and the others conflict; after the state expires it
// is pruned by the next use of another state.
func testConsoleStateSingleUse(t *testing.T, s core.Store) {
	cs := consoleSignins(t, s)
	state := newID("state")
	exp := t0.Add(10 * time.Minute)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cs.ConsoleStateUse(ctx(t), state, exp, t0)
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, core.ErrConflict):
			t.Fatalf("use: %v, want nil or ErrConflict", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d concurrent uses succeeded, want 1", ok, n)
	}
	if err := cs.ConsoleStateUse(ctx(t), state, exp, t0.Add(time.Minute)); !errors.Is(err, core.ErrConflict) {
		t.Fatalf("replay: %v, want ErrConflict", err)
	}
	if err := cs.ConsoleStateUse(ctx(t), "", exp, t0); err == nil {
		t.Error("an empty state was accepted")
	}
	if err := cs.ConsoleStateUse(ctx(t), newID("state"), exp.Add(time.Hour), exp); err != nil {
		t.Fatal(err) // prunes the first
	}
	raw, isRaw := s.(RawDB)
	if !isRaw {
		return
	}
	var rows int
	if err := raw.DB().QueryRowContext(ctx(t), `SELECT COUNT(*) FROM console_oidc_states WHERE state = '`+state+`'`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("an expired state was not pruned: %d rows, %v", rows, err)
	}
}
