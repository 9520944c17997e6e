package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/pace"
)

// Defaults applied by New for zero Options fields.
const (
	// DefaultMaxAttempts is how many failed attempts (network errors, 5xx)
	// a message gets before it is dead-lettered.
	DefaultMaxAttempts = 8
	// DefaultLeaseTTL is how long the account lease lasts without renewal:
	// a dead owner is replaced within it (plus one poll), inside the 10 s
	// the design promises.
	DefaultLeaseTTL = 9 * time.Second
	// DefaultConcurrency is how many threads are sent to in parallel.
	DefaultConcurrency = 8
	// DefaultPollInterval is the fallback wake-up when no notification
	// arrives (and how often a non-owner tries to take the lease over).
	DefaultPollInterval = time.Second
	// DefaultMaxRateLimited caps the 429s one message may meet in a row.
	// 429s do not consume attempts (the platform asked us to wait, nothing
	// failed), but a platform that answers 429 forever must not pin a
	// sender forever either: past the cap the 429 counts as a failure.
	DefaultMaxRateLimited = 50
	// DefaultSendTimeout bounds one platform call.
	DefaultSendTimeout = 10 * time.Second
)

// Options configures a Worker. Store, Platform and Cards are required.
type Options struct {
	Store core.OutboxStore
	// Cards renders approval cards at send time, so a card shows the
	// approval's state when it leaves, not when it was queued.
	Cards core.CardSource
	// Questions, when set and the platform is a core.QuestionRenderer,
	// attaches an agent's pending question to the reply that asks it.
	Questions core.QuestionSource
	Platform  Platform
	// Owner identifies this replica in leases; it must differ between
	// replicas (and between a crashed worker and its successor).
	Owner string

	MaxAttempts    int
	MaxRateLimited int
	LeaseTTL       time.Duration
	Concurrency    int
	PollInterval   time.Duration
	// SendTimeout bounds one Platform.Send (default 10 s).
	SendTimeout time.Duration
	// Backoff spaces retries of failed sends; the zero value is pace's
	// default (500 ms doubling to 1 min, full jitter).
	Backoff pace.BackoffPolicy

	Now    func() time.Time
	Logger *slog.Logger
	// Registerer, when set, receives the delivery metrics.
	Registerer prometheus.Registerer
	// Subscribe is usually core.Store.Subscribe: it wakes the worker when
	// a message is queued. Nil means poll only.
	Subscribe func(topic string) (<-chan struct{}, func())
}

// claimBatchDelay is the longest a free slot waits for others before the
// next claim while most slots are busy.
const claimBatchDelay = 10 * time.Millisecond

// Worker drains the outbox of one channel (one platform account). Several
// replicas may run a Worker for the same channel: only the holder of the
// lease "delivery:<channel>" sends, so the token buckets it keeps in memory
// are the only ones spending the account's budget, and the lease carries
// what a successor needs to go on spending it exactly (see takeOver).
type Worker struct {
	o       Options
	channel string
	lim     *pace.Limiter
	// refill is how long the fullest bucket takes to fill from empty.
	refill time.Duration
	m      *metrics
	log    *slog.Logger

	// kick wakes the dispatcher when a send finishes (a slot is free, the
	// thread's next message may be due).
	kick chan struct{}
	// paused wakes the lease renewal after a 429 paused a bucket, so the
	// pause is stored for a successor at once.
	paused chan struct{}

	mu sync.Mutex
	// retries are the retry times this worker scheduled and not yet
	// passed, so it wakes for them without waiting for the poll.
	retries []time.Time
}

// New validates the options and builds a Worker.
func New(o Options) (*Worker, error) {
	if o.Store == nil || o.Platform == nil || o.Cards == nil {
		return nil, errors.New("delivery: new worker: Store, Platform and Cards are required")
	}
	if o.Owner == "" {
		return nil, errors.New("delivery: new worker: Owner is required")
	}
	ch := o.Platform.Channel()
	if ch == "" {
		return nil, errors.New("delivery: new worker: platform has no channel name")
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.MaxRateLimited <= 0 {
		o.MaxRateLimited = DefaultMaxRateLimited
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PollInterval <= 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	pc := o.Platform.Pacing()
	lim, err := pace.New(specOf(pc))
	if err != nil {
		return nil, fmt.Errorf("delivery: new worker for %s: %w", ch, err)
	}
	m, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, fmt.Errorf("delivery: new worker for %s: %w", ch, err)
	}
	return &Worker{
		o: o, channel: ch, lim: lim, m: m, refill: specOf(pc).Refill(),
		log:  o.Logger.With("channel", ch, "owner", o.Owner),
		kick: make(chan struct{}, 1), paused: make(chan struct{}, 1),
	}, nil
}

// specOf turns a platform's Pacing into limiter buckets; zero rates mean
// unlimited. Account is one bucket for everything this worker sends.
func specOf(p Pacing) pace.Spec {
	conv := func(r Rate) *pace.Rate {
		if r.Every <= 0 {
			return nil
		}
		return &pace.Rate{Every: r.Every, Burst: max(r.Burst, 1)}
	}
	return pace.Spec{Conversation: conv(p.Conversation), Group: conv(p.Group), Account: conv(p.Account)}
}

// LeaseName is the lease that makes one replica at a time the sender for
// channel's account.
func LeaseName(channel string) string { return "delivery:" + channel }

// Run sends until ctx is done. It takes the account lease when it is free,
// renews it every LeaseTTL/3 and sends only while it holds it; when ctx
// ends it stops sending, waits for sends in flight and hands the lease
// over (with its pacing state) so another replica can take over at once.
func (w *Worker) Run(ctx context.Context) error {
	var wake <-chan struct{}
	if w.o.Subscribe != nil {
		ch, cancel := w.o.Subscribe(core.TopicOutbox)
		defer cancel()
		wake = ch
	}
	for {
		now := w.o.Now()
		until := now.Add(w.o.LeaseTTL)
		l, err := w.o.Store.SendLeaseAcquire(ctx, w.leaseParams(now, until))
		if err != nil && ctx.Err() == nil {
			w.log.Warn("delivery: acquire lease", "err", err)
		}
		if err == nil && l.Acquired {
			h, quiet := takeOver(l, now, w.refill)
			w.log.Debug("delivery: lease acquired", "prior_owner", l.PriorOwner, "quiet_until", quiet, "pauses", len(h.Pauses))
			w.lim.TakeOver(h, quiet)
			w.lead(ctx, until, wake)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := w.o.Store.SendLeaseHandOver(rctx, w.leaseParams(w.o.Now(), time.Time{})); err != nil {
				w.log.Warn("delivery: hand the lease over", "err", err)
			}
			cancel()
		}
		if ctx.Err() != nil {
			return nil
		}
		// Not the owner (or just lost it): try again soon. A holder that
		// died is replaced within LeaseTTL plus this wait.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(min(w.o.PollInterval, w.o.LeaseTTL/3)):
		}
	}
}

// leaseParams are the send lease's parameters, carrying the pacing state
// as it is now for a successor.
func (w *Worker) leaseParams(now, until time.Time) core.SendLeaseParams {
	state, err := json.Marshal(w.lim.Handover())
	if err != nil { // a Handover always marshals; say so if it ever does not
		w.log.Error("delivery: encode pacing state", "err", err)
		state = nil
	}
	return core.SendLeaseParams{Name: LeaseName(w.channel), Owner: w.o.Owner, Channel: w.channel, Now: now, Until: until, State: state}
}

// takeOver derives, from what the send lease held before we took it, the
// pacing state to start from and the instant before which nothing may be
// sent: once every bucket the previous holders drew from is full again, as
// ours start. A holder that handed over said when it last sent; one whose
// lease lapsed (a crash, a lost store) may have sent until its lease ran
// out; a state that does not parse says nothing, so we wait a full refill
// from now. Nobody having sent for a refill means no wait at all.
func takeOver(l core.SendLease, now time.Time, refill time.Duration) (pace.Handover, time.Time) {
	var h pace.Handover
	if len(l.PriorState) > 0 {
		if err := json.Unmarshal(l.PriorState, &h); err != nil {
			return pace.Handover{}, now.Add(refill)
		}
	}
	var quiet time.Time
	if !h.LastGrant.IsZero() {
		quiet = h.LastGrant.Add(refill)
	}
	if !l.PriorUntil.IsZero() && l.PriorUntil.Add(refill).After(quiet) {
		quiet = l.PriorUntil.Add(refill)
	}
	return h, quiet
}

// lead sends while the lease is ours: a renewal goroutine cancels lctx when
// the lease cannot be renewed before it would lapse, so no send starts after
// another replica may have taken over.
func (w *Worker) lead(ctx context.Context, until time.Time, wake <-chan struct{}) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease := &leaseState{until: until}
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renew(lctx, cancel, lease)
	}()
	w.dispatch(lctx, lease, wake)
	cancel()
	<-renewDone
}

// leaseState is the current expiry of the account lease.
type leaseState struct {
	mu    sync.Mutex
	until time.Time
}

func (l *leaseState) get() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *leaseState) set(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.until = t
}

// renew extends the lease every TTL/3, and at once after a 429 paused a
// bucket, storing the pacing state with it: a successor taking over after
// a crash still honours the pause. A failed renewal is retried at the next
// tick; if the lease would lapse within TTL/6 without one, sending stops
// (stop) before another replica can acquire it. That deadline runs on its
// own timer, so a renewal stuck on a slow store cannot outlast it.
func (w *Worker) renew(ctx context.Context, stop func(), lease *leaseState) {
	tick := time.NewTicker(w.o.LeaseTTL / 3)
	defer tick.Stop()
	margin := w.o.LeaseTTL / 6
	deadline := time.AfterFunc(time.Until(lease.get().Add(-margin)), func() {
		w.log.Warn("delivery: lease lapsing without renewal; stopping sends")
		stop()
	})
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-w.paused:
		}
		now := w.o.Now()
		until := now.Add(w.o.LeaseTTL)
		l, err := w.o.Store.SendLeaseAcquire(ctx, w.leaseParams(now, until))
		switch {
		case err != nil:
			if ctx.Err() == nil {
				w.log.Warn("delivery: renew lease", "err", err)
			}
		case !l.Acquired:
			w.log.Warn("delivery: lease taken by another owner; stopping sends")
			stop()
			return
		default:
			if !deadline.Stop() {
				return // the deadline passed first: sending has stopped
			}
			lease.set(until)
			deadline.Reset(time.Until(until.Add(-margin)))
		}
	}
}

// dispatch claims due messages and hands each to a sender goroutine, at
// most Concurrency at once and never two of one thread (the store hands out
// only the oldest unsent message of a thread, and the one in flight is it).
func (w *Worker) dispatch(ctx context.Context, lease *leaseState, wake <-chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var (
		imu      sync.Mutex
		inflight = map[string]bool{} // message ids being sent
		// finished maps a message this worker finished (sent, retried,
		// dead) to the moment it did, counted by seq: a claim that began
		// before that moment may return the message as it was (pending,
		// owned by us) and must not send it again.
		finished = map[string]int64{}
		seq      int64
	)
	var lastClaim time.Time
	for ctx.Err() == nil {
		imu.Lock()
		n, claimSeq := len(inflight), seq
		imu.Unlock()
		free := w.o.Concurrency - n
		// A claim costs a write transaction that scans the due messages:
		// under load, gather a few finished sends (up to half the slots,
		// at most claimBatchDelay) instead of claiming after each one.
		if free > 0 && free*2 < w.o.Concurrency {
			if d := time.Until(lastClaim.Add(claimBatchDelay)); d > 0 {
				timer := time.NewTimer(d)
				select {
				case <-ctx.Done():
				case <-w.kick:
				case <-timer.C:
				}
				timer.Stop()
				continue
			}
		}
		if free > 0 {
			lastClaim = time.Now()
			now := w.o.Now()
			// Messages in flight keep their leases (the account lease's
			// end when claimed) and are not claimed again, not even by us:
			// ask for the free slots.
			ds, err := w.o.Store.OutboxClaim(ctx, core.OutboxClaimParams{
				Channel: w.channel, Owner: w.o.Owner, Limit: free, Now: now, LeaseUntil: lease.get(),
			})
			if err != nil && ctx.Err() == nil {
				w.log.Warn("delivery: claim", "err", err)
			}
			var start []*core.Delivery
			imu.Lock()
			for _, d := range ds {
				if inflight[d.ID] || finished[d.ID] > claimSeq || len(inflight) >= w.o.Concurrency {
					continue
				}
				inflight[d.ID] = true
				start = append(start, d)
			}
			for id, at := range finished {
				if at <= claimSeq { // every later claim sees that finish
					delete(finished, id)
				}
			}
			imu.Unlock()
			for _, d := range start {
				wg.Add(1)
				go func(d *core.Delivery) {
					defer wg.Done()
					w.deliver(ctx, d)
					imu.Lock()
					seq++
					finished[d.ID] = seq
					delete(inflight, d.ID)
					imu.Unlock()
					select {
					case w.kick <- struct{}{}:
					default:
					}
				}(d)
			}
			if len(start) > 0 {
				continue // there may be more due right now
			}
		}
		wait := w.nextWait()
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-w.kick:
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// noteRetry remembers a scheduled retry so the dispatcher wakes for it.
func (w *Worker) noteRetry(at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.retries = append(w.retries, at)
}

// nextWait is how long the dispatcher may sleep: until the next retry it
// scheduled, at most PollInterval. Retries already due are forgotten (the
// claim that follows picks them up).
func (w *Worker) nextWait() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now, wait := w.o.Now(), w.o.PollInterval
	kept := w.retries[:0]
	for _, at := range w.retries {
		d := at.Sub(now)
		if d <= 0 {
			continue
		}
		kept = append(kept, at)
		wait = min(wait, max(d, time.Millisecond))
	}
	w.retries = kept
	return wait
}
