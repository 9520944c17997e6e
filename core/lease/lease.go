// Package lease holds what a pulling adapter (one that reads its platform
// rather than being called: Matrix's /sync, signal-cli's event stream)
// keeps in the store: a lease, so that one replica at a time reads and a
// message starts one run, and the position it has read up to, stored only
// once what came before it was recorded. docs/architecture.md describes
// replicas and leases.
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Store is the part of the store a Reader uses: core.StateStore for the
// position and the named leases. Every opsgate store implements it.
type Store interface {
	StateGet(ctx context.Context, key string) ([]byte, error)
	StatePut(ctx context.Context, key string, value []byte, now time.Time) error
	LeaseAcquire(ctx context.Context, name, owner string, now, until time.Time) (bool, error)
	LeaseRelease(ctx context.Context, name, owner string) error
}

// ErrHeld is another replica holding the lease: not a failure, the caller
// waits (Retry) and asks again.
var ErrHeld = errors.New("another replica holds the lease")

// Options name one Reader's lease and position.
type Options struct {
	// Name is the lease's name, Key the position's; both say whose source
	// it is ("matrix:sync:@bot:example.org"), so two bot accounts on one
	// database never share either.
	Name, Key string
	// Owner names this replica; Owner(prefix) makes one.
	Owner string
	// TTL is how long a hold lasts unless renewed; it must outlast the
	// longest wait between two holds (a long poll).
	TTL time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
}

// Reader is one replica's claim on a pulled source. It is safe for
// concurrent use as far as its Store is.
type Reader struct {
	store Store
	o     Options
}

// New makes a Reader; an empty Owner gets a random one.
func New(store Store, o Options) *Reader {
	if o.Owner == "" {
		o.Owner = Owner("replica")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Reader{store: store, o: o}
}

// Owner is a random replica name with prefix ("matrix-3f9a…"), for a
// process that was not given one.
func Owner(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Hold takes or renews the lease for TTL from now; ErrHeld when another
// replica holds it. Call it before each read, and while a long read goes
// on (a stream's keep-alives), so a replica that stopped renewing loses it.
func (r *Reader) Hold(ctx context.Context) error {
	now := r.o.Now()
	ok, err := r.store.LeaseAcquire(ctx, r.o.Name, r.o.Owner, now, now.Add(r.o.TTL))
	if err != nil {
		return fmt.Errorf("lease %s: %w", r.o.Name, err)
	}
	if !ok {
		return fmt.Errorf("lease %s: %w", r.o.Name, ErrHeld)
	}
	return nil
}

// Release gives the lease up (on shutdown, so another replica need not
// wait out the TTL); it runs even when ctx is already cancelled.
func (r *Reader) Release(ctx context.Context) error {
	if err := r.store.LeaseRelease(context.WithoutCancel(ctx), r.o.Name, r.o.Owner); err != nil {
		return fmt.Errorf("lease %s: release: %w", r.o.Name, err)
	}
	return nil
}

// Retry is how long a replica that found the lease held waits before it
// asks again: a third of the TTL, so a holder that died is replaced well
// within one TTL after its last renewal.
func (r *Reader) Retry() time.Duration { return r.o.TTL / 3 }

// Position is the stored position, "" before the first Advance.
func (r *Reader) Position(ctx context.Context) (string, error) {
	b, err := r.store.StateGet(ctx, r.o.Key)
	if errors.Is(err, core.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read position %s: %w", r.o.Key, err)
	}
	return string(b), nil
}

// Advance stores pos as the position, once everything before it was
// recorded. It is not cut by a shutdown (ctx's cancellation): what was
// recorded must not be read again by the next replica.
func (r *Reader) Advance(ctx context.Context, pos string) error {
	if err := r.store.StatePut(context.WithoutCancel(ctx), r.o.Key, []byte(pos), r.o.Now()); err != nil {
		return fmt.Errorf("store position %s: %w", r.o.Key, err)
	}
	return nil
}
