package pace

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A Handover carries the latest grant and the running pauses through JSON
// (what the send lease stores), and TakeOver on another Limiter grants
// nothing before quiet nor in a paused bucket before its pause ends.
func TestHandoverCarriesLastGrantAndPauses(t *testing.T) {
	t.Parallel()
	spec := Spec{Conversation: &Rate{Every: time.Second, Burst: 2}}
	if got := spec.Refill(); got != 2*time.Second {
		t.Fatalf("Refill = %v, want 2s (the slowest bucket from empty)", got)
	}
	old, clk := setup(t, spec)
	if h := old.Handover(); !h.LastGrant.IsZero() || len(h.Pauses) != 0 {
		t.Fatalf("a new Limiter's Handover = %+v, want empty", h)
	}
	mustReturn(t, waitAsync(old, Keys{Conversation: "a"}), "first grant")
	granted := clk.Now()
	old.Pause(Conversation, "b", 10*time.Second)
	old.Pause(Conversation, "gone", time.Second)
	clk.Advance(2 * time.Second) // "gone" is over
	h := old.Handover()
	if !h.LastGrant.Equal(granted) {
		t.Errorf("LastGrant = %v, want %v", h.LastGrant, granted)
	}
	if want := (Paused{Scope: Conversation, Key: "b", Until: granted.Add(10 * time.Second)}); len(h.Pauses) != 1 || h.Pauses[0] != want {
		t.Fatalf("Pauses = %+v, want only %+v", h.Pauses, want)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var back Handover
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	if !back.LastGrant.Equal(h.LastGrant) || len(back.Pauses) != 1 || back.Pauses[0].Scope != Conversation ||
		back.Pauses[0].Key != "b" || !back.Pauses[0].Until.Equal(h.Pauses[0].Until) {
		t.Fatalf("round trip %s = %+v, want %+v", b, back, h)
	}

	next, _ := setup(t, spec)
	next.clock = clk // same instant as the old one
	quiet := back.LastGrant.Add(spec.Refill())
	next.TakeOver(back, quiet)
	if h := next.Handover(); !h.LastGrant.Equal(granted) {
		t.Errorf("after TakeOver LastGrant = %v, want the predecessor's %v", h.LastGrant, granted)
	}
	// now = granted+2s = quiet: "a" grants at once; "b" waits for its pause.
	mustReturn(t, waitAsync(next, Keys{Conversation: "a"}), "at quiet")
	done := waitAsync(next, Keys{Conversation: "b"})
	clk.waitBlocked(t, 1)
	clk.Advance(8*time.Second - time.Millisecond)
	mustNotReturn(t, done, "paused bucket before its pause ends")
	clk.Advance(time.Millisecond)
	mustReturn(t, done, "paused bucket at its pause's end")
}

// TakeOver holds every grant until quiet.
func TestTakeOverHoldsUntilQuiet(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Account: &Rate{Every: time.Second, Burst: 5}})
	l.TakeOver(Handover{}, clk.Now().Add(3*time.Second))
	done := waitAsync(l, Keys{Account: "acct", Conversation: "x"})
	clk.waitBlocked(t, 1)
	clk.Advance(3*time.Second - time.Millisecond)
	mustNotReturn(t, done, "before quiet")
	clk.Advance(time.Millisecond)
	mustReturn(t, done, "at quiet")
	// A quiet time already past holds nothing.
	l.TakeOver(Handover{}, clk.Now().Add(-time.Second))
	mustReturn(t, waitAsync(l, Keys{Account: "acct"}), "quiet in the past")
}

// Past MaxHandoverPauses the pauses ending soonest fold into one Global
// pause until the latest of them: bounded, and never less held back.
func TestHandoverFoldsExcessPauses(t *testing.T) {
	t.Parallel()
	l, clk := setup(t, Spec{Conversation: &Rate{Every: time.Second, Burst: 1}})
	n := MaxHandoverPauses + 10
	for i := range n {
		l.Pause(Conversation, fmt.Sprint("c", i), time.Duration(i+1)*time.Second)
	}
	h := l.Handover()
	if len(h.Pauses) != MaxHandoverPauses {
		t.Fatalf("%d pauses, want %d", len(h.Pauses), MaxHandoverPauses)
	}
	var global *Paused
	longest := map[string]bool{}
	for i, p := range h.Pauses {
		if p.Scope == Global {
			global = &h.Pauses[i]
			continue
		}
		longest[p.Key] = true
	}
	// Kept: the MaxHandoverPauses-1 longest (c11..c265); folded: c0..c10,
	// the latest of which ends at 11 s.
	if global == nil || !global.Until.Equal(clk.Now().Add(11*time.Second)) {
		t.Fatalf("folded pause = %+v, want Global until now+11s", global)
	}
	for i := n - MaxHandoverPauses + 1; i < n; i++ {
		if !longest[fmt.Sprint("c", i)] {
			t.Errorf("pause of c%d (one of the longest) was folded", i)
		}
	}
}

func TestScopeText(t *testing.T) {
	t.Parallel()
	for s := Conversation; s <= Route; s++ {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Scope
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("%v → %s → %v, %v", s, b, back, err)
		}
	}
	var s Scope
	if err := s.UnmarshalText([]byte("bogus")); err == nil {
		t.Error("UnmarshalText accepted an unknown scope")
	}
	if _, err := Scope(99).MarshalText(); err == nil {
		t.Error("MarshalText accepted an unknown scope")
	}
}
