package lease_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/lease"
	"github.com/opsgate/opsgate/internal/testkit"
	"github.com/opsgate/opsgate/store/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// clock is a settable time shared by the readers of one test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestReader runs every rule of a Reader against both stores: two
// replicas (two Readers, one database) of one pulled source.
func TestReader(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) lease.Store{
		"SQLite":   func(t *testing.T) lease.Store { return testkit.SQLite(t) },
		"Postgres": func(t *testing.T) lease.Store { return testkit.Postgres(t) },
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			st := open(t)
			const ttl = time.Minute
			// Each case its own lease and key, so the cases share a store.
			pair := func(t *testing.T) (a, b *lease.Reader, c *clock) {
				c = &clock{t: time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)}
				n := strings.ReplaceAll(t.Name(), "/", ":")
				o := lease.Options{Name: "test:lease:" + n, Key: "test:pos:" + n, TTL: ttl, Now: c.now}
				o.Owner = "replica-a"
				a = lease.New(st, o)
				o.Owner = "replica-b"
				b = lease.New(st, o)
				return a, b, c
			}
			t.Run("OneReplicaHoldsAtATime", func(t *testing.T) {
				t.Parallel()
				a, b, c := pair(t)
				if err := a.Hold(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := b.Hold(t.Context()); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("second replica: %v, want ErrHeld", err)
				}
				c.add(ttl / 2)
				if err := a.Hold(t.Context()); err != nil {
					t.Fatalf("renewal: %v", err)
				}
				c.add(ttl / 2)
				// Renewed half a TTL ago: still a's.
				if err := b.Hold(t.Context()); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("after a's renewal: %v, want ErrHeld", err)
				}
			})
			t.Run("ExpiredHoldIsTakenOver", func(t *testing.T) {
				t.Parallel()
				a, b, c := pair(t)
				if err := a.Hold(t.Context()); err != nil {
					t.Fatal(err)
				}
				c.add(ttl + time.Second) // a stopped renewing
				if err := b.Hold(t.Context()); err != nil {
					t.Fatalf("taking over an expired lease: %v", err)
				}
				if err := a.Hold(t.Context()); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("the old holder came back: %v, want ErrHeld", err)
				}
			})
			t.Run("ReleaseHandsOverAtOnce", func(t *testing.T) {
				t.Parallel()
				a, b, _ := pair(t)
				if err := a.Hold(t.Context()); err != nil {
					t.Fatal(err)
				}
				// Released on shutdown, with the shutdown's context gone.
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if err := a.Release(ctx); err != nil {
					t.Fatal(err)
				}
				if err := b.Hold(t.Context()); err != nil {
					t.Fatalf("after release: %v", err)
				}
			})
			t.Run("ReleaseByANonHolderChangesNothing", func(t *testing.T) {
				t.Parallel()
				a, b, _ := pair(t)
				if err := a.Hold(t.Context()); err != nil {
					t.Fatal(err)
				}
				_ = b.Release(t.Context())
				if err := b.Hold(t.Context()); !errors.Is(err, lease.ErrHeld) {
					t.Fatalf("b released a's lease: %v", err)
				}
			})
			t.Run("PositionIsSharedByReplicas", func(t *testing.T) {
				t.Parallel()
				a, b, _ := pair(t)
				if p, err := a.Position(t.Context()); err != nil || p != "" {
					t.Fatalf("before the first advance: %q, %v", p, err)
				}
				// Stored even when the reader is shutting down: what was
				// recorded must not be read again.
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				if err := a.Advance(ctx, "s42_1"); err != nil {
					t.Fatal(err)
				}
				if err := a.Advance(t.Context(), "s43_7"); err != nil {
					t.Fatal(err)
				}
				if p, err := b.Position(t.Context()); err != nil || p != "s43_7" {
					t.Fatalf("the other replica reads %q, %v; want s43_7", p, err)
				}
			})
			t.Run("SourcesDoNotShare", func(t *testing.T) {
				t.Parallel()
				a, _, _ := pair(t)
				other := lease.New(st, lease.Options{Name: "test:lease:other:" + t.Name(), Key: "test:pos:other:" + t.Name(), Owner: "replica-b", TTL: ttl})
				if err := a.Hold(t.Context()); err != nil {
					t.Fatal(err)
				}
				if err := a.Advance(t.Context(), "x"); err != nil {
					t.Fatal(err)
				}
				if err := other.Hold(t.Context()); err != nil {
					t.Fatalf("another source's lease: %v", err)
				}
				if p, err := other.Position(t.Context()); err != nil || p != "" {
					t.Fatalf("another source's position: %q, %v", p, err)
				}
			})
		})
	}
}

// failing is a store whose every call fails, as a lost database does.
type failing struct{}

var errDown = errors.New("database is down")

func (failing) StateGet(context.Context, string) ([]byte, error) { return nil, errDown }
func (failing) StatePut(context.Context, string, []byte, time.Time) error {
	return errDown
}
func (failing) LeaseAcquire(context.Context, string, string, time.Time, time.Time) (bool, error) {
	return false, errDown
}
func (failing) LeaseRelease(context.Context, string, string) error { return errDown }

// TestStoreErrorsAreNotHeld: a store failure is an error naming the lease
// or key, never mistaken for another replica's hold (which a caller
// waits out quietly) or for an empty position (which would restart the
// read from now, skipping what was missed).
func TestStoreErrorsAreNotHeld(t *testing.T) {
	t.Parallel()
	r := lease.New(failing{}, lease.Options{Name: "matrix:sync:@bot:example.org", Key: "matrix:since:@bot:example.org", TTL: time.Minute})
	for name, err := range map[string]error{
		"Hold":    r.Hold(t.Context()),
		"Release": r.Release(t.Context()),
		"Advance": r.Advance(t.Context(), "x"),
	} {
		if !errors.Is(err, errDown) || errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), "@bot:example.org") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if p, err := r.Position(t.Context()); !errors.Is(err, errDown) || p != "" {
		t.Errorf("Position: %q, %v", p, err)
	}
}

func TestOwnerAndRetry(t *testing.T) {
	t.Parallel()
	a, b := lease.Owner("matrix"), lease.Owner("matrix")
	if a == b || !strings.HasPrefix(a, "matrix-") || len(a) != len("matrix-")+16 {
		t.Fatalf("owners %q, %q: want two distinct matrix-<16 hex>", a, b)
	}
	r := lease.New(failing{}, lease.Options{TTL: 90 * time.Second})
	if r.Retry() != 30*time.Second {
		t.Fatalf("retry %v, want a third of the TTL", r.Retry())
	}
}
