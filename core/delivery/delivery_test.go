package delivery_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/pace"
)

// longText is n numbered lines in short paragraphs.
func longText(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %04d: the quick brown fox jumps over the lazy dog\n", i)
		if i%5 == 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// checkLines reports whether texts, concatenated, hold lines 1..n once each
// and in order.
func checkLines(t *testing.T, texts []string, n int) {
	t.Helper()
	want := 1
	for _, s := range texts {
		for _, f := range strings.Fields(s) {
			if !strings.HasSuffix(f, ":") || len(f) != 5 {
				continue
			}
			var got int
			if _, err := fmt.Sscanf(f, "%04d:", &got); err != nil {
				continue
			}
			if got != want {
				t.Fatalf("line %d where %d was due", got, want)
			}
			want++
		}
	}
	if want != n+1 {
		t.Fatalf("got %d of %d lines", want-1, n)
	}
}

// A 12 KB reply reaches a 500-byte platform as ordered chunks, each within
// the limit with its (i/n) marker, recorded one ref per chunk.
func TestLongReplyChunkedInOrder(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 500)
	text := longText(220)
	queue(t, s, reply("c1", text))
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
	waitFor(t, "the reply to be sent", eventBound, func() bool { return countStatus(t, s, core.DeliverySent) == 1 })
	got := f.received()
	d := deliveries(t, s, core.DeliverySent)[0]
	if len(got) < 20 || len(got) != d.ChunksSent || len(d.Refs) != len(got) {
		t.Fatalf("received %d, chunks %d, refs %d", len(got), d.ChunksSent, len(d.Refs))
	}
	var texts []string
	for i, r := range got {
		if len(r.Text) > 500 {
			t.Errorf("chunk %d is %d bytes", i+1, len(r.Text))
		}
		if r.Part != i+1 || r.Parts != len(got) || !strings.HasSuffix(r.Text, fmt.Sprintf("(%d/%d)", i+1, len(got))) {
			t.Errorf("chunk %d: part %d/%d, tail %q", i+1, r.Part, r.Parts, r.Text[max(0, len(r.Text)-10):])
		}
		if r.Key != fmt.Sprintf("%s/%d", d.ID, i) {
			t.Errorf("chunk %d key %q", i+1, r.Key)
		}
		if d.Refs[i].ID != r.ID {
			t.Errorf("chunk %d ref %q, fake id %q", i+1, d.Refs[i].ID, r.ID)
		}
		texts = append(texts, r.Text)
	}
	checkLines(t, texts, 220)
}

// Cancel the worker right after chunk k of a reply; a new worker (another
// owner) resumes at chunk k+1: nothing lost, nothing sent twice.
func TestResumeAfterKillMidReply(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 400)
	text := longText(100)
	queue(t, s, reply("c1", text), reply("c1", "after the long one"))
	const k = 4
	var killed atomic.Bool
	ctx, kill := context.WithCancel(context.Background())
	p.afterSend = func(m core.Outbound) {
		if m.Part == k && !killed.Swap(true) {
			kill() // the worker dies right after chunk k left
		}
	}
	w1 := startWorkerCtx(t, ctx, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
	waitFor(t, "the kill", eventBound, killed.Load)
	w1.stop()
	if n := len(f.received()); n != k {
		t.Fatalf("%d chunks left before the kill, want %d", n, k)
	}
	if got := countStatus(t, s, core.DeliveryPending); got != 2 {
		t.Fatalf("%d pending after the kill, want 2", got)
	}
	p.afterSend = nil
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w2", Subscribe: s.Subscribe})
	waitFor(t, "both replies to be sent", eventBound, func() bool { return countStatus(t, s, core.DeliverySent) == 2 })
	got := f.received()
	var texts []string
	seen := map[string]bool{}
	for i, r := range got[:len(got)-1] {
		if seen[r.Key] {
			t.Errorf("chunk %s sent twice", r.Key)
		}
		seen[r.Key] = true
		if r.Part != i+1 {
			t.Errorf("message %d is part %d (%s %q)", i+1, r.Part, r.Key, r.Text[:min(20, len(r.Text))])
		}
		texts = append(texts, r.Text)
	}
	if t.Failed() {
		for _, r := range got {
			t.Logf("%s part %d/%d %s at %s", r.Key, r.Part, r.Parts, r.ID, r.At.Format("05.000000"))
		}
	}
	checkLines(t, texts, 100)
	if last := got[len(got)-1]; last.Text != "after the long one" {
		t.Errorf("last message %q, want the second reply after every chunk of the first", last.Text)
	}
}

// 5xx answers are retried with backoff until MaxAttempts, then the message
// is dead; requeued by an admin, it is delivered. The thread's next message
// waits while the first retries, then goes once it is dead.
func TestDeadLetterThenRequeue(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 1000)
	f.fail5xx.Store(3)
	queue(t, s, reply("c1", "first"), reply("c1", "second"))
	reg := prometheus.NewRegistry()
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe, Registerer: reg,
		MaxAttempts: 3, Backoff: pace.BackoffPolicy{Base: 5 * time.Millisecond, Cap: 20 * time.Millisecond}})
	waitFor(t, "a dead letter and the second sent", eventBound, func() bool {
		return countStatus(t, s, core.DeliveryDead) == 1 && countStatus(t, s, core.DeliverySent) == 1
	})
	dead := deliveries(t, s, core.DeliveryDead)[0]
	if dead.Text != "first" || dead.Attempts != 3 || !strings.Contains(dead.LastError, "503") {
		t.Fatalf("dead = %+v", dead)
	}
	if got := f.received(); len(got) != 1 || got[0].Text != "second" {
		t.Fatalf("received %+v, want only the second", got)
	}
	assertCounter(t, reg, "opsgate_deliveries_dead_total", "fake", 1)
	assertCounter(t, reg, "opsgate_deliveries_sent_total", "fake", 1)
	if err := s.OutboxRequeue(t.Context(), dead.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the requeued message to be sent", eventBound, func() bool { return countStatus(t, s, core.DeliverySent) == 2 })
	if got := f.received(); len(got) != 2 || got[1].Text != "first" {
		t.Fatalf("received %+v", got)
	}
	// A requeue does not undo the count: it says how many dead letters
	// happened, not how many are dead now.
	assertCounter(t, reg, "opsgate_deliveries_dead_total", "fake", 1)
	assertCounter(t, reg, "opsgate_deliveries_sent_total", "fake", 2)
}

// assertCounter checks one channel's value of a delivery counter in reg.
// (prometheus/testutil would need a go.sum entry for its diff library that
// this module does not have; Gather gives the same answer.)
func assertCounter(t *testing.T, reg *prometheus.Registry, name, channel string, want float64) {
	t.Helper()
	// The worker counts right after the store commit the test waited for,
	// so give the increment a moment; a counter never goes down, so a value
	// above want fails at once.
	deadline := time.Now().Add(eventBound)
	for {
		got, ok := counterValue(t, reg, name, channel)
		switch {
		case ok && got == want:
			return
		case ok && got > want, time.Now().After(deadline):
			if !ok {
				t.Errorf("%s{channel=%q} has no sample, want %v", name, channel, want)
			} else {
				t.Errorf("%s{channel=%q} = %v, want %v", name, channel, got, want)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func counterValue(t *testing.T, reg *prometheus.Registry, name, channel string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "channel" && l.GetValue() == channel {
					return m.GetCounter().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// A platform whose endpoint refuses connections (a closed loopback
// listener) is a network error: retried with backoff, never sent, dead
// after MaxAttempts and counted once in the dead-letter metric.
func TestConnectionRefusedRetriedThenDead(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 1000)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.url = "http://" + ln.Addr().String()
	ln.Close()
	var (
		mu       sync.Mutex
		attempts []time.Time
	)
	// Count attempts through a transport that notes each dial.
	p.client = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		attempts = append(attempts, time.Now())
		mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}}
	// Backoff draws are pinned to their ceiling, so the delays are known:
	// 20, 40, 80 ms before retries 1, 2, 3.
	backoff := pace.BackoffPolicy{Base: 20 * time.Millisecond, Cap: time.Second, Rand: func(n int64) int64 { return n - 1 }}
	const maxAttempts = 4
	queue(t, s, reply("c1", "into the void"))
	reg := prometheus.NewRegistry()
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe, Registerer: reg,
		MaxAttempts: maxAttempts, Backoff: backoff})
	waitFor(t, "the dead letter", eventBound, func() bool { return countStatus(t, s, core.DeliveryDead) == 1 })
	d := deliveries(t, s, core.DeliveryDead)[0]
	if d.Attempts != maxAttempts || !strings.Contains(d.LastError, "connection refused") || d.ChunksSent != 0 {
		t.Fatalf("dead = attempts %d, chunks sent %d, last error %q; want %d attempts refused", d.Attempts, d.ChunksSent, d.LastError, maxAttempts)
	}
	mu.Lock()
	got := append([]time.Time(nil), attempts...)
	mu.Unlock()
	if len(got) != maxAttempts {
		t.Fatalf("%d connection attempts, want %d", len(got), maxAttempts)
	}
	for i := 1; i < len(got); i++ {
		want := backoff.Backoff(i - 1)
		if gap := got[i].Sub(got[i-1]); gap < want {
			t.Errorf("retry %d came %v after the previous attempt, before its backoff of %v", i, gap, want)
		}
	}
	assertCounter(t, reg, "opsgate_deliveries_dead_total", "fake", 1)
	if n := len(f.received()); n != 0 {
		t.Errorf("the fake received %d messages", n)
	}
}

// A permanent error dead-letters at once, without retries.
func TestPermanentErrorDeadAtOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	f := newFakeServer(t, limit{}, limit{})
	p := newFakePlatform(f, delivery.Pacing{}, 1000)
	queue(t, s, core.OutboxMessage{Thread: core.Thread{Channel: "fake", Key: "c1"}, Kind: core.KindCard, ApprovalID: "nope"})
	startWorker(t, delivery.Options{Store: s, Cards: &cards{}, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
	waitFor(t, "the dead letter", eventBound, func() bool { return countStatus(t, s, core.DeliveryDead) == 1 })
	if d := deliveries(t, s, core.DeliveryDead)[0]; d.Attempts != 1 || !strings.Contains(d.LastError, "not found") {
		t.Fatalf("dead = %+v", d)
	}
}

// A card is rendered at send time; its update edits the sent message in
// place, or — when the platform cannot edit — arrives as a new message.
func TestCardThenUpdate(t *testing.T) {
	t.Parallel()
	for _, noEdit := range []bool{false, true} {
		t.Run(fmt.Sprintf("noEdit=%v", noEdit), func(t *testing.T) {
			t.Parallel()
			s := openStore(t)
			f := newFakeServer(t, limit{}, limit{})
			f.noEdit = noEdit
			p := newFakePlatform(f, delivery.Pacing{}, 1000)
			cs := &cards{}
			cs.set(core.Card{ApprovalID: "a1", Tool: "deploy", Status: "pending", Approvers: []string{"console:admin"}})
			th := core.Thread{Channel: "fake", Key: "c1"}
			queue(t, s, core.OutboxMessage{Thread: th, Kind: core.KindCard, ApprovalID: "a1"})
			startWorker(t, delivery.Options{Store: s, Cards: cs, Platform: p, Owner: "w1", Subscribe: s.Subscribe})
			waitFor(t, "the card", eventBound, func() bool { return countStatus(t, s, core.DeliverySent) == 1 })
			cs.set(core.Card{ApprovalID: "a1", Tool: "deploy", Status: "approved",
				Outcome: &core.CardOutcome{Status: "approved", By: []string{"console:admin"}, At: time.Now()}})
			queue(t, s, core.OutboxMessage{Thread: th, Kind: core.KindCardUpdate, ApprovalID: "a1"})
			waitFor(t, "the update", eventBound, func() bool { return countStatus(t, s, core.DeliverySent) == 2 })
			got := f.received()
			if len(got) != 2 || got[0].Kind != core.KindCard || !strings.Contains(got[0].Text, "Approval needed") {
				t.Fatalf("received %+v", got)
			}
			upd := got[1]
			if upd.Kind != core.KindCardUpdate || !strings.Contains(upd.Text, "Approved by console:admin") {
				t.Fatalf("update = %+v", upd)
			}
			if noEdit && (upd.Edit != "" || upd.ID == got[0].ID) {
				t.Errorf("without edits the update must be a new message; got %+v", upd)
			}
			if !noEdit && (upd.Edit != got[0].ID || upd.ID != got[0].ID) {
				t.Errorf("the update must edit %s in place; got %+v", got[0].ID, upd)
			}
		})
	}
}

// eventBound bounds a wait for something the worker does next: far past
// any scheduling delay of a loaded CI machine (a 10 s bound failed at load
// 60 on 2 cores), so only a worker that never does it fails the test.
const eventBound = 2 * time.Minute
