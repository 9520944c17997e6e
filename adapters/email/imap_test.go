package email

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

// The same request seen again — delivered twice, re-read after a dropped
// connection and a lost cursor — starts one run.
func TestSameMessageTwiceOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.Request("deploy api 1.2.3")
	e.WaitCursor(e.a, 1)
	e.OnlyRun()

	// The MTA delivers it again (a retry after a lost 250).
	e.Deliver(testMail{From: alice, Subject: "deploy api 1.2.3", MessageID: id})
	e.WaitCursor(e.a, 2)

	// The connection drops mid-IDLE; the watcher reconnects, re-IDLEs,
	// and with its stored cursor lost (reset to nothing) re-reads the
	// backfill window.
	if err := e.h.Store.StatePut(t.Context(), e.a.cursorKey(), []byte(`{}`), time.Now()); err != nil {
		t.Fatal(err)
	}
	idles := e.imap.idles.Load()
	e.imap.Drop()
	e.h.Eventually("a new IDLE after the reconnect", func() bool { return e.imap.idles.Load() > idles })
	e.h.Eventually("the cursor rewritten by the re-read", func() bool {
		c, err := e.a.loadCursor(t.Context())
		return err == nil && c.LastUID >= 2
	})
	e.Deliver(testMail{From: alice, Subject: "deploy web 2"})
	e.WaitCursor(e.a, 3)
	e.h.Eventually("the second request's run", func() bool { return len(e.Runs()) == 2 })
	if runs := e.Runs(); len(runs) != 2 {
		t.Fatalf("%d runs, want 2 (one per distinct Message-ID)", len(runs))
	}
}

// A new UIDVALIDITY (the mailbox was re-created) makes every stored UID
// meaningless: the watcher starts over, the dedup absorbs what it had
// seen, and new mail is still read.
func TestUIDValidityChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := e.Request("deploy api 1.2.3")
	e.WaitCursor(e.a, 1)
	first := e.a.Cursor()

	e.imap.Recreate(t)
	e.Deliver(testMail{From: alice, Subject: "deploy api 1.2.3", MessageID: id}) // UID 1 again
	e.Request("deploy web 2")                                                    // UID 2
	e.imap.Drop()
	e.h.Eventually("the cursor under the new UIDVALIDITY", func() bool {
		c := e.a.Cursor()
		return c.UIDValidity != first.UIDValidity && c.LastUID >= 2
	})
	e.h.Eventually("two runs", func() bool { return len(e.Runs()) == 2 })
	// The mailbox is read in UID order, so once a later mail has started
	// its run, the re-read of the first two is over: a duplicate would be
	// there by now.
	e.Request("deploy web 3") // UID 3
	e.h.Eventually("the third run", func() bool { return len(e.Runs()) >= 3 })
	if runs := e.Runs(); len(runs) != 3 {
		t.Errorf("%d runs, want 3 (one per mail)", len(runs))
	}
	e.WaitCursor(e.a, 3)
	e.h.Eventually("the cursor saved", func() bool {
		saved, err := e.a.loadCursor(t.Context())
		return err == nil && saved == e.a.Cursor()
	})
	saved, err := e.a.loadCursor(t.Context())
	if err != nil || saved != e.a.Cursor() {
		t.Errorf("saved cursor %+v (%v), in memory %+v", saved, err, e.a.Cursor())
	}
}

// Without IDLE the watcher polls.
func TestPollingWithoutIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoIdle: true})
	e.Request("deploy api 1.2.3")
	e.Card()
	if n := e.imap.idles.Load(); n != 0 {
		t.Errorf("%d IDLE commands to a server without IDLE", n)
	}
}

// IDLE is re-issued every IdleRestart even when nothing arrives.
func TestIdleReissued(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	e.h.Eventually("IDLE re-issued three times", func() bool { return e.imap.idles.Load() >= 3 })
	e.Request("deploy api 1.2.3")
	e.OnlyRun()
}

// flakySink fails its first calls, as a store that is briefly down.
type flakySink struct {
	next  core.Sink
	fails atomic.Int32
}

func (s *flakySink) HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	if s.fails.Add(-1) >= 0 {
		return core.Receipt{}, errors.New("store unavailable")
	}
	return s.next.HandleEvent(ctx, ev)
}

// The cursor moves only after the sink recorded the mail: a sink failure
// leaves it in place and the mail is read again after the reconnect.
func TestCursorWaitsForSink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRun: true})
	sink := &flakySink{next: e.h.Engine}
	sink.fails.Store(2)
	a, err := New(e.cfg, Deps{Sink: sink, Cards: e.h.Engine, Store: e.h.Store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.Request("deploy api 1.2.3")
	e.Start(a)
	e.h.Eventually("the sink to be retried", func() bool { return sink.fails.Load() < 0 })
	e.WaitCursor(a, 1)
	if runs := e.Runs(); len(runs) != 1 {
		t.Errorf("%d runs, want 1", len(runs))
	}
}

// A second watcher on the same store (a restart, or another replica)
// starts from the first one's cursor: nothing handled is read again.
func TestCursorSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRun: true})
	e.Request("deploy api 1.2.3")
	stop := e.Start(e.a)
	e.WaitCursor(e.a, 1)
	stop()
	reads := 0
	second, err := New(e.cfg, Deps{Sink: countingSink{e.h.Engine, &reads}, Cards: e.h.Engine, Store: e.h.Store, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	e.Start(second)
	e.Request("deploy web 2")
	e.WaitCursor(second, 2)
	if reads != 1 {
		t.Errorf("the restarted watcher read %d mails, want only the new one", reads)
	}
}

type countingSink struct {
	next core.Sink
	n    *int
}

func (s countingSink) HandleEvent(ctx context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	*s.n++ // one watcher goroutine calls it
	return s.next.HandleEvent(ctx, ev)
}

// The cursor round-trips through the store under a key of its own per
// address and mailbox; an absent or unreadable value is a fresh start, and
// a store failure is an error (the watcher reconnects) rather than a
// silent re-read.
func TestCursorInStore(t *testing.T) {
	t.Parallel()
	st := newMemState()
	a := cursorAdapter(t, st, "INBOX")
	if c, err := a.loadCursor(t.Context()); err != nil || c != (Cursor{}) {
		t.Fatalf("absent cursor: %+v, %v", c, err)
	}
	want := Cursor{Mailbox: "INBOX", UIDValidity: 7, LastUID: 42}
	if err := a.saveCursor(t.Context(), want); err != nil {
		t.Fatal(err)
	}
	if got, err := a.loadCursor(t.Context()); err != nil || got != want {
		t.Fatalf("loadCursor = %+v, %v; want %+v", got, err, want)
	}
	if _, ok := st.get("email:cursor:" + botAddr + ":INBOX"); !ok {
		t.Errorf("cursor not under email:cursor:<address>:<mailbox>; keys %v", st.keys())
	}
	other := cursorAdapter(t, st, "Requests")
	if c, err := other.loadCursor(t.Context()); err != nil || c != (Cursor{}) {
		t.Errorf("another mailbox sees %+v, %v; want its own, absent cursor", c, err)
	}
	if err := st.StatePut(t.Context(), a.cursorKey(), []byte("{torn"), time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, err := a.loadCursor(t.Context()); err != nil || got != (Cursor{}) {
		t.Errorf("an unreadable cursor reads as %+v, %v; want a fresh start", got, err)
	}
	st.fail = errors.New("database down")
	if _, err := a.loadCursor(t.Context()); !errors.Is(err, st.fail) {
		t.Errorf("load with the store down: %v, want its error", err)
	}
	if err := a.saveCursor(t.Context(), want); !errors.Is(err, st.fail) {
		t.Errorf("save with the store down: %v, want its error", err)
	}
}

// A cursor that cannot be saved is not advanced in memory either: the
// watcher's position never runs ahead of what a restart would find.
func TestAdvanceKeepsCursorOnSaveFailure(t *testing.T) {
	t.Parallel()
	st := newMemState()
	a := cursorAdapter(t, st, "INBOX")
	cur := Cursor{Mailbox: "INBOX", UIDValidity: 1, LastUID: 3}
	st.fail = errors.New("database down")
	if err := a.advance(t.Context(), &cur, 4); err == nil {
		t.Fatal("advance succeeded with the store down")
	}
	if cur.LastUID != 3 || a.Cursor().LastUID != 0 {
		t.Errorf("after a failed save: cursor %+v, adapter %+v; want both unmoved", cur, a.Cursor())
	}
	st.fail = nil
	if err := a.advance(t.Context(), &cur, 4); err != nil || cur.LastUID != 4 || a.Cursor().LastUID != 4 {
		t.Errorf("advance = %v; cursor %+v, adapter %+v", err, cur, a.Cursor())
	}
	if got, err := a.loadCursor(t.Context()); err != nil || got != cur {
		t.Errorf("stored %+v, %v; want %+v", got, err, cur)
	}
}

func cursorAdapter(t *testing.T, st CursorStore, mailbox string) *Adapter {
	t.Helper()
	a, err := New(Config{Address: botAddr, TokenKey: tokenKey,
		IMAP: IMAPConfig{Addr: "127.0.0.1:1", Username: "u", Mailbox: mailbox}, SMTP: SMTPConfig{Addr: "127.0.0.1:1"}},
		Deps{Sink: nopSink{}, Cards: nopCards{}, Store: st, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// memState is an in-memory CursorStore for unit tests that run without a
// database; fail, when set, is returned by every call.
type memState struct {
	mu   sync.Mutex
	m    map[string][]byte
	fail error
}

func newMemState() *memState { return &memState{m: map[string][]byte{}} }

func (s *memState) StateGet(_ context.Context, key string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, s.fail
	}
	v, ok := s.m[key]
	if !ok {
		return nil, fmt.Errorf("state %s: %w", key, core.ErrNotFound)
	}
	return slices.Clone(v), nil
}

func (s *memState) StatePut(_ context.Context, key string, value []byte, _ time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.m[key] = slices.Clone(value)
	return nil
}

func (s *memState) get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[key]
	return v, ok
}

func (s *memState) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.m))
}
