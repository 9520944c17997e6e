package api

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
)

// Attendance records which sessions have a caller holding their turn's
// event stream: only then can an approval of an Agent API turn wait. The
// engine's gate asks Attended; false means the call is denied at once as
// one nobody can approve.
//
// Streams held on this replica are counted in memory (the fast path). With
// a store (NewSharedAttendance), each held stream is also a hold in the
// store, renewed every AttendanceOptions.Renew while the stream is open and
// lasting three renewals, so the replica that executes a turn — not
// necessarily the one serving its stream — sees it attended, and the holds
// of a replica that crashed lapse on their own.
type Attendance struct {
	mu sync.Mutex
	n  map[string]int
	o  AttendanceOptions
}

// AttendanceStore is what Attendance needs of the store to share holds
// between replicas (store/sqlstore implements it). Holds are per holder:
// a session is attended while any holder's hold has not lapsed.
type AttendanceStore interface {
	// AgentAttendHold records (or renews) holder's hold of session until
	// until; now prunes lapsed holds.
	AgentAttendHold(ctx context.Context, session, holder string, until, now time.Time) error
	// AgentAttendRelease drops holder's hold of session.
	AgentAttendRelease(ctx context.Context, session, holder string) error
	// AgentAttended reports whether any hold of session lasts past now.
	AgentAttended(ctx context.Context, session string, now time.Time) (bool, error)
}

// AttendanceOptions configures a shared Attendance.
type AttendanceOptions struct {
	// Store shares holds between replicas; nil keeps them in memory.
	Store AttendanceStore
	// Replica names this replica in the holders it records (a random id
	// when empty); each held stream is its own holder under it.
	Replica string
	// Renew is how often a held stream renews its hold (default
	// DefaultAttendanceRenew); a hold lasts AttendanceLapse renewals.
	Renew time.Duration
	Log   *slog.Logger
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// DefaultAttendanceRenew is how often a held stream renews its hold in the
// store; AttendanceLapse renewals missed and the hold has lapsed.
const (
	DefaultAttendanceRenew = 5 * time.Second
	AttendanceLapse        = 3
)

// attendanceTimeout bounds one store call of Attendance.
const attendanceTimeout = 5 * time.Second

// NewAttendance returns an empty Attendance kept in memory: right for one
// replica.
func NewAttendance() *Attendance { return NewSharedAttendance(AttendanceOptions{}) }

// NewSharedAttendance returns an empty Attendance that shares its holds
// through o.Store, so every replica on that store sees them.
func NewSharedAttendance(o AttendanceOptions) *Attendance {
	if o.Replica == "" {
		o.Replica = uuid.NewString()
	}
	if o.Renew <= 0 {
		o.Renew = DefaultAttendanceRenew
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Attendance{n: map[string]int{}, o: o}
}

// Attended reports whether a caller holds the event stream of a turn in
// thread, on this replica or (with a store) on any. Threads that are not
// Agent API sessions are never attended here (their approvals go to chat
// cards). A store that cannot be read counts as nobody attending: the
// approval is denied rather than left waiting for nobody.
func (a *Attendance) Attended(thread core.Thread) bool {
	if thread.Channel != core.AgentSessionChannel {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), attendanceTimeout)
	defer cancel()
	ok, err := a.attended(ctx, thread.Key)
	if err != nil {
		a.o.Log.Warn("api: agent attendance", "session", thread.Key, "err", err)
	}
	return ok
}

// attended reports whether session is held here or, with a store, by any
// replica.
func (a *Attendance) attended(ctx context.Context, session string) (bool, error) {
	a.mu.Lock()
	local := a.n[session] > 0
	a.mu.Unlock()
	if local || a.o.Store == nil {
		return local, nil
	}
	return a.o.Store.AgentAttended(ctx, session, a.o.Now())
}

// Hold marks session attended until the returned func runs; it reports
// whether that release left the session unattended on this replica (other
// replicas may still hold it: ask attended). With a store the hold is
// recorded before hold returns, so a turn started after it sees it from
// any replica, and renewed until released.
func (a *Attendance) Hold(ctx context.Context, session string) (release func() (last bool)) {
	a.mu.Lock()
	a.n[session]++
	a.mu.Unlock()
	stopRenew := func() {}
	holder := ""
	if a.o.Store != nil {
		holder = a.o.Replica + "/" + uuid.NewString()
		a.put(ctx, session, holder)
		stop, done := make(chan struct{}), make(chan struct{})
		go a.renew(session, holder, stop, done)
		stopRenew = func() { close(stop); <-done }
	}
	var once sync.Once
	return func() (last bool) {
		once.Do(func() {
			a.mu.Lock()
			a.n[session]--
			if a.n[session] <= 0 {
				delete(a.n, session)
				last = true
			}
			a.mu.Unlock()
			if holder == "" {
				return
			}
			stopRenew()
			ctx, cancel := context.WithTimeout(context.Background(), attendanceTimeout)
			defer cancel()
			if err := a.o.Store.AgentAttendRelease(ctx, session, holder); err != nil {
				a.o.Log.Warn("api: agent attendance release (it lapses on its own)", "session", session, "err", err)
			}
		})
		return last
	}
}

// put records or renews holder's hold of session for AttendanceLapse
// renewals from now.
func (a *Attendance) put(ctx context.Context, session, holder string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attendanceTimeout)
	defer cancel()
	now := a.o.Now()
	if err := a.o.Store.AgentAttendHold(ctx, session, holder, now.Add(AttendanceLapse*a.o.Renew), now); err != nil {
		a.o.Log.Warn("api: agent attendance hold", "session", session, "err", err)
	}
}

// renew renews holder's hold every Renew until stop closes.
func (a *Attendance) renew(session, holder string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(a.o.Renew)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			a.put(context.Background(), session, holder)
		}
	}
}
