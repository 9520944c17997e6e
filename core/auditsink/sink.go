package auditsink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core/lease"
)

// Store is what delivery needs of the store: the audit chain in order, and
// what a lease.Reader keeps per sink — a lease, so one replica delivers
// for a sink at a time, and the durable cursor.
type Store interface {
	AuditList(ctx context.Context, p approvals.AuditListParams) ([]approvals.AuditEntry, error)
	lease.Store
}

// Destination is where one sink's entries go. Deliver sends entries in
// order and returns how many the destination took (a prefix); an error
// says why it stopped there: a *PermanentError when retrying cannot help,
// a *RetryError (or any other error) when it may.
type Destination interface {
	Deliver(ctx context.Context, entries []approvals.AuditEntry) (int, error)
	Close() error
}

// PermanentError is a refusal retrying will not change.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// RetryError is a failure worth retrying, no sooner than After (0: the
// backoff decides).
type RetryError struct {
	Err   error
	After time.Duration
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// Options configure Run. Store and Owner are required.
type Options struct {
	Store Store
	// Owner names this replica in the sinks' leases.
	Owner string
	// Logger receives delivery failures and dead letters; default discards.
	Logger *slog.Logger
	// Registerer, when set, receives the metrics (metrics.go).
	Registerer prometheus.Registerer
	// HTTPClient sends to http sinks; default a client with a 30 s timeout.
	HTTPClient *http.Client
	// Poll is how often an idle sink looks for new entries; default 1 s.
	Poll time.Duration
	// Lease is how long a sink's lease lasts without renewal; default 1 min.
	Lease time.Duration
	// MinBackoff and MaxBackoff bound the wait between failed attempts;
	// default 1 s and 5 min (doubling).
	MinBackoff, MaxBackoff time.Duration
	// Batch bounds the entries sent at once; default 100.
	Batch int
	// Now is the clock of leases; default time.Now.
	Now func() time.Time
}

// Sinks delivers to every configured sink.
type Sinks struct {
	o     Options
	sinks []*sink
}

type sink struct {
	cfg  Config
	dest Destination
	m    sinkMetrics
	// lease is this replica's claim on the sink and its cursor.
	lease *lease.Reader
}

// New validates every sink and returns them, ready to Run.
func New(cfgs []Config, o Options) (*Sinks, error) {
	if o.Store == nil || o.Owner == "" {
		return nil, errors.New("audit sink: Options.Store and Owner are required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = time.Second
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = max(5*time.Minute, o.MinBackoff)
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Sinks{o: o}
	seen := map[string]bool{}
	for i, c := range cfgs {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("audit sink %d (%q): %w", i, c.Name, err)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("audit sink %d: name %q is used twice", i, c.Name)
		}
		seen[c.Name] = true
		var d Destination
		switch c.Type {
		case TypeSyslog:
			sd, err := newSyslog(c.Addr)
			if err != nil {
				return nil, fmt.Errorf("audit sink %q: %w", c.Name, err)
			}
			d = sd
		case TypeHTTP:
			d = newHTTP(c.URL, c.Headers, o.HTTPClient)
		}
		s.sinks = append(s.sinks, &sink{cfg: c, dest: d, m: m.of(c.Name),
			lease: lease.New(o.Store, lease.Options{Name: leaseName(c.Name), Key: CursorKey(c.Name), Owner: o.Owner, TTL: o.Lease, Now: o.Now})})
	}
	return s, nil
}

// Run delivers until ctx ends; each sink runs on its own.
func (s *Sinks) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, k := range s.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(ctx, k)
		}()
	}
	wg.Wait()
}

// CursorKey is where a sink's position (the seq of the last entry the
// destination took) is kept in the store.
func CursorKey(name string) string { return "auditsink:cursor:" + name }

func leaseName(name string) string { return "auditsink:" + name }

// run is one sink's loop: hold the lease, read from the cursor, deliver,
// move the cursor; on failure back off and send the same entries again.
func (s *Sinks) run(ctx context.Context, k *sink) {
	log := s.o.Logger.With("sink", k.cfg.Name)
	defer func() {
		_ = k.dest.Close()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = k.lease.Release(rctx)
	}()
	backoff, batch := time.Duration(0), s.o.Batch
	cursor, haveCursor := int64(0), false
	for ctx.Err() == nil {
		wait := s.o.Poll
		err := k.lease.Hold(ctx)
		switch {
		case errors.Is(err, lease.ErrHeld):
			// Another replica delivers; read the cursor again when we take over.
			haveCursor = false
		case err != nil:
			log.WarnContext(ctx, "audit sink: lease", "err", err)
		default:
			if !haveCursor {
				if cursor, err = readCursor(ctx, k); err != nil {
					log.WarnContext(ctx, "audit sink: read cursor", "err", err)
					break
				}
				haveCursor = true
			}
			var more bool
			cursor, more, backoff, batch = s.step(ctx, log, k, cursor, backoff, batch)
			switch {
			case backoff > 0:
				wait = backoff
			case more:
				wait = 0
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// step delivers one batch after cursor. It returns the new cursor, whether
// more entries may be waiting, the backoff before the next attempt (0 after
// a success) and the next batch size.
func (s *Sinks) step(ctx context.Context, log *slog.Logger, k *sink, cursor int64, backoff time.Duration, batch int) (int64, bool, time.Duration, int) {
	entries, err := s.o.Store.AuditList(ctx, approvals.AuditListParams{After: cursor, Limit: batch})
	if err != nil {
		log.WarnContext(ctx, "audit sink: read the audit log", "err", err)
		return cursor, false, s.next(backoff, 0), batch
	}
	if len(entries) == 0 {
		return cursor, false, 0, batch
	}
	n, derr := k.dest.Deliver(ctx, entries)
	if n > 0 {
		cursor = entries[n-1].Seq
		k.m.delivered.Add(float64(n))
		if err := saveCursor(ctx, k, cursor); err != nil {
			// Delivered but not recorded: they go again after a restart
			// (at least once).
			log.WarnContext(ctx, "audit sink: save cursor", "seq", cursor, "err", err)
		}
		k.m.position.Set(float64(cursor))
	}
	if derr == nil {
		return cursor, len(entries) == batch, 0, s.o.Batch
	}
	if ctx.Err() != nil {
		return cursor, false, 0, batch
	}
	var perm *PermanentError
	if errors.As(derr, &perm) {
		if n == 0 && batch > 1 {
			// Find the entry it refuses: one at a time from here.
			log.WarnContext(ctx, "audit sink: batch refused; sending one entry at a time", "after_seq", cursor, "err", derr)
			return cursor, true, 0, 1
		}
		if n == 0 {
			dead := entries[0]
			cursor = dead.Seq
			k.m.dead.Inc()
			log.ErrorContext(ctx, "audit sink: entry refused for good; skipped (dead letter)", "seq", dead.Seq, "kind", dead.Kind, "err", derr)
			if err := saveCursor(ctx, k, cursor); err != nil {
				log.WarnContext(ctx, "audit sink: save cursor", "seq", cursor, "err", err)
			}
			k.m.position.Set(float64(cursor))
		}
		return cursor, true, 0, batch
	}
	k.m.retries.Inc()
	var after time.Duration
	var re *RetryError
	if errors.As(derr, &re) {
		after = re.After
	}
	wait := s.next(backoff, after)
	log.WarnContext(ctx, "audit sink: delivery failed; will retry", "after_seq", cursor, "retry_in", wait, "err", derr)
	return cursor, false, wait, batch
}

// maxRetryAfter caps a destination's Retry-After.
const maxRetryAfter = time.Hour

// next is the backoff after one more failure: doubled, within the bounds,
// and no shorter than the destination asked.
func (s *Sinks) next(prev, after time.Duration) time.Duration {
	d := min(max(prev*2, s.o.MinBackoff), s.o.MaxBackoff)
	return max(d, min(after, maxRetryAfter))
}

func readCursor(ctx context.Context, k *sink) (int64, error) {
	pos, err := k.lease.Position(ctx)
	if err != nil || pos == "" {
		return 0, err
	}
	n, err := strconv.ParseInt(pos, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("audit sink %q: cursor %q is not a sequence number", k.cfg.Name, pos)
	}
	return n, nil
}

// saveCursor records what was delivered even while shutting down, so a
// stop right after a delivery does not send it again.
func saveCursor(ctx context.Context, k *sink, seq int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return k.lease.Advance(ctx, strconv.FormatInt(seq, 10))
}
