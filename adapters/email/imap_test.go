package email

import (
	"context"
	"errors"
	"os"
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
	// and with its cursor file gone re-reads the backfill window.
	if err := os.Remove(e.a.cursorPath()); err != nil {
		t.Fatal(err)
	}
	idles := e.imap.idles.Load()
	e.imap.Drop()
	e.h.Eventually("a new IDLE after the reconnect", func() bool { return e.imap.idles.Load() > idles })
	e.h.Eventually("the cursor rewritten by the re-read", func() bool {
		_, err := os.Stat(e.a.cursorPath())
		return err == nil
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
	time.Sleep(50 * time.Millisecond)
	if runs := e.Runs(); len(runs) != 2 {
		t.Errorf("%d runs, want 2", len(runs))
	}
	saved, err := loadCursor(e.a.cursorPath())
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
	a, err := New(e.cfg, Deps{Sink: sink, Cards: e.h.Engine, Logger: quiet})
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

// A second watcher on the same state dir starts from the first one's
// cursor: nothing handled is read again.
func TestCursorSurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{NoRun: true})
	e.Request("deploy api 1.2.3")
	stop := e.Start(e.a)
	e.WaitCursor(e.a, 1)
	stop()
	reads := 0
	second, err := New(e.cfg, Deps{Sink: countingSink{e.h.Engine, &reads}, Cards: e.h.Engine, Logger: quiet})
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

func TestCursorFileAtomic(t *testing.T) {
	t.Parallel()
	path := t.TempDir() + "/sub/cursor.json"
	if c, err := loadCursor(path); err != nil || c != (Cursor{}) {
		t.Fatalf("missing cursor: %+v, %v", c, err)
	}
	want := Cursor{Mailbox: "INBOX", UIDValidity: 7, LastUID: 42}
	if err := saveCursor(path, want); err != nil {
		t.Fatal(err)
	}
	if got, err := loadCursor(path); err != nil || got != want {
		t.Fatalf("loadCursor = %+v, %v", got, err)
	}
	if err := os.WriteFile(path, []byte("{torn"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := loadCursor(path); err != nil || got != (Cursor{}) {
		t.Errorf("a torn cursor reads as %+v, %v; want a fresh start", got, err)
	}
}
