package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/internal/testkit"
)

// limit is one bucket the fake platform enforces: at most Burst requests
// at once, refilled one per Every (GCRA), with Slack for network jitter
// between the sender's clock and ours.
type limit struct {
	Every time.Duration
	Burst int
}

// gcra is the fake's bookkeeping of one bucket: the theoretical arrival time.
type gcra struct{ tat time.Time }

// allow reports whether a request at now conforms to l (with slack), and
// takes it if so.
func (g *gcra) allow(now time.Time, l limit, slack time.Duration) bool {
	tat := g.tat
	if tat.Before(now) {
		tat = now
	}
	tolerance := time.Duration(l.Burst-1)*l.Every + slack
	if tat.Sub(now) > tolerance {
		return false
	}
	g.tat = tat.Add(l.Every)
	return true
}

// received is one request the fake accepted.
type received struct {
	Conv, Key, Text, Edit, ID string
	// From names the fakePlatform that sent it (a replica, in tests with
	// several).
	From        string
	Kind        core.MessageKind
	Part, Parts int
	// Sent is when the client's Send began (the moment the pacer let the
	// request go), stamped by fakePlatform; At is when the fake got it.
	Sent, At time.Time
}

// arrival is one request that reached the fake's limit check (accepted
// or answered 429), for the after-the-fact conformance analysis.
type arrival struct {
	Conv, From string
	Sent, At   time.Time
	// Over: the fake refused it as over a limit.
	Over bool
}

// fakeServer is a chat platform on 127.0.0.1 that enforces a
// per-conversation and a global limit, answers a request over either with
// 429 and a retry_after (and counts it as a violation), and can be told to
// answer 429 or 5xx on purpose. It records what it accepted in order.
type fakeServer struct {
	srv          *httptest.Server
	conv, global limit
	slack        time.Duration
	retryAfter   time.Duration

	mu         sync.Mutex
	convB      map[string]*gcra
	globalB    gcra
	pausedTill map[string]time.Time // conv → no request before (after a 429)
	got        []received
	byConv     map[string][]received
	arrivals   []arrival
	violations int // requests over a limit
	early      int // requests before a Retry-After had passed
	limited    int // 429s answered
	// every429 makes every n-th request a 429 (0: never); once429 only
	// the n-th.
	every429, once429 int
	requests          int
	// fail5xx answers 503 to this many requests first.
	fail5xx atomic.Int64
	// noEdit answers 501 to edits.
	noEdit bool
	// onAccept, if set, runs after a request was recorded.
	onAccept func(r received)
}

func newFakeServer(t testing.TB, conv, global limit) *fakeServer {
	f := &fakeServer{
		conv: conv, global: global, slack: 3 * time.Millisecond, retryAfter: 50 * time.Millisecond,
		convB: map[string]*gcra{}, pausedTill: map[string]time.Time{}, byConv: map[string][]received{},
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.handle))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeServer) handle(w http.ResponseWriter, r *http.Request) {
	var req received
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if f.fail5xx.Add(-1) >= 0 {
		http.Error(w, "try later", http.StatusServiceUnavailable)
		return
	}
	f.mu.Lock()
	now := time.Now()
	f.requests++
	// Early: the client let the request go before the Retry-After the
	// fake gave had passed. The client's own stamp is the tighter test (a
	// retry sent early may still arrive after the pause); a correct client
	// received the 429 after pausedTill was set, so it can only be later.
	if till, ok := f.pausedTill[req.Conv]; ok && (now.Before(till) || req.Sent.Before(till)) {
		f.early++
	}
	b := f.convB[req.Conv]
	if b == nil {
		b = &gcra{}
		f.convB[req.Conv] = b
	}
	over := f.conv.Every > 0 && !b.allow(now, f.conv, f.slack)
	if !over && f.global.Every > 0 && !f.globalB.allow(now, f.global, f.slack) {
		over = true
	}
	if over {
		f.violations++
	}
	f.arrivals = append(f.arrivals, arrival{Conv: req.Conv, From: req.From, Sent: req.Sent, At: now, Over: over})
	if over || (f.every429 > 0 && f.requests%f.every429 == 0) || f.requests == f.once429 {
		f.limited++
		f.pausedTill[req.Conv] = now.Add(f.retryAfter)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]float64{"retry_after": f.retryAfter.Seconds()})
		return
	}
	if req.Edit != "" && f.noEdit {
		f.mu.Unlock()
		http.Error(w, "no edits", http.StatusNotImplemented)
		return
	}
	req.At = now
	req.ID = req.Edit
	if req.ID == "" {
		req.ID = "m" + strconv.Itoa(len(f.got)+1)
	}
	f.got = append(f.got, req)
	f.byConv[req.Conv] = append(f.byConv[req.Conv], req)
	hook := f.onAccept
	f.mu.Unlock()
	if hook != nil {
		hook(req)
	}
	json.NewEncoder(w).Encode(map[string]string{"id": req.ID})
}

func (f *fakeServer) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

// conformance is how the traffic the fake saw fits its limits, measured
// after the fact on two clocks: the fake's arrival clock (which adds
// loopback and scheduling jitter) and the clients' Sent stamps (what the
// pacer decided, plus only the delay between the pacer's grant and the
// stamp). Every request that reached the limit check counts, 429s
// included: a platform counts them too. Worst* is the smallest slack with
// which every request would conform; Over* counts the requests that needed
// more than the slack asked for.
type conformance struct {
	Requests                   int
	ArrivalConv, ArrivalGlobal time.Duration
	SentConv, SentGlobal       time.Duration
	OverArrival, OverSent      int
}

func (f *fakeServer) conformance(slack time.Duration) conformance {
	f.mu.Lock()
	arr := append([]arrival(nil), f.arrivals...)
	f.mu.Unlock()
	at := func(a arrival) time.Time { return a.At }
	sent := func(a arrival) time.Time { return a.Sent }
	c := conformance{Requests: len(arr)}
	var n1, n2, n3, n4 int
	c.ArrivalConv, n1 = perConv(arr, f.conv, at, slack)
	c.ArrivalGlobal, n2 = excess(times(arr, at), f.global, slack)
	c.SentConv, n3 = perConv(arr, f.conv, sent, slack)
	c.SentGlobal, n4 = excess(times(arr, sent), f.global, slack)
	c.OverArrival, c.OverSent = n1+n2, n3+n4
	return c
}

// times returns the chosen timestamps of arr, sorted.
func times(arr []arrival, pick func(arrival) time.Time) []time.Time {
	ts := make([]time.Time, len(arr))
	for i, a := range arr {
		ts[i] = pick(a)
	}
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	return ts
}

// perConv is excess over every conversation's bucket: the worst, and the
// requests over slack in all.
func perConv(arr []arrival, l limit, pick func(arrival) time.Time, slack time.Duration) (time.Duration, int) {
	by := map[string][]arrival{}
	for _, a := range arr {
		by[a.Conv] = append(by[a.Conv], a)
	}
	worst, over := noExcess, 0
	for _, as := range by {
		w, n := excess(times(as, pick), l, slack)
		worst, over = max(worst, w), over+n
	}
	return worst, over
}

// noExcess is excess's answer for an unlimited bucket.
const noExcess = time.Duration(math.MinInt64)

// excess runs GCRA for l over the sorted times ts, taking every request,
// and returns the largest amount by which a request came earlier than the
// bucket allowed — the smallest slack with which every request conforms
// (negative when none needed any) — and how many came more than slack
// early. Conforming requests update the theoretical arrival time exactly as
// this does, so "worst ≤ slack" is the same as "an online check with that
// slack never refuses".
func excess(ts []time.Time, l limit, slack time.Duration) (worst time.Duration, over int) {
	if l.Every <= 0 || len(ts) == 0 {
		return noExcess, 0
	}
	var tat time.Time
	worst = noExcess
	tolerance := time.Duration(l.Burst-1) * l.Every
	for _, now := range ts {
		if tat.Before(now) {
			tat = now
		}
		e := tat.Sub(now) - tolerance
		worst = max(worst, e)
		if e > slack {
			over++
		}
		tat = tat.Add(l.Every)
	}
	return worst, over
}

// logArrivals logs every request the fake saw, with who sent it and the
// gaps to the one before on both clocks (the sender's stamp and the fake's
// arrival), times relative to mark: what a failure needs to tell a pacing
// fault (Sent gaps short) from jitter on the way (only At gaps short).
func (f *fakeServer) logArrivals(t testing.TB, mark time.Time) {
	t.Helper()
	f.mu.Lock()
	arr := append([]arrival(nil), f.arrivals...)
	f.mu.Unlock()
	for i, a := range arr {
		var dSent, dAt time.Duration
		if i > 0 {
			dSent, dAt = a.Sent.Sub(arr[i-1].Sent), a.At.Sub(arr[i-1].At)
		}
		flag := ""
		if a.Over {
			flag = " OVER"
		}
		t.Logf("%3d %s sent %+9.3fms (gap %7.3fms) arrived %+9.3fms (gap %7.3fms)%s", i, a.From,
			ms(a.Sent.Sub(mark)), ms(dSent), ms(a.At.Sub(mark)), ms(dAt), flag)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (f *fakeServer) stats() (violations, early, limited int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.violations, f.early, f.limited
}

// fakePlatform is the adapter side: it POSTs each Outbound to the fake and
// maps its answers onto the pipeline's error types.
type fakePlatform struct {
	url string
	// name is stamped on every request (received.From).
	name   string
	format delivery.Format
	pacing delivery.Pacing
	client *http.Client
	// afterSend, if set, runs after each successful Send (tests use it to
	// kill the worker right after chunk k).
	afterSend func(m core.Outbound)
}

func newFakePlatform(f *fakeServer, pacing delivery.Pacing, limitBytes int) *fakePlatform {
	return &fakePlatform{
		url:    f.srv.URL,
		format: delivery.Format{Limit: limitBytes, Unit: chunk.Bytes, Syntax: chunk.Markdown, Markers: true, Render: func(s string) string { return s }},
		pacing: pacing,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
}

func (p *fakePlatform) Channel() string         { return "fake" }
func (p *fakePlatform) Format() delivery.Format { return p.format }
func (p *fakePlatform) Pacing() delivery.Pacing { return p.pacing }
func (p *fakePlatform) Buckets(t core.Thread) delivery.Buckets {
	return delivery.Buckets{Conversation: t.Key}
}

func (p *fakePlatform) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	body := received{From: p.name, Conv: m.Thread.Key, Key: m.Key, Text: m.Text, Kind: m.Kind, Part: m.Part, Parts: m.Parts, Sent: time.Now()}
	if m.Edit != nil {
		body.Edit = m.Edit.ID
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+"/send", bytes.NewReader(b))
	if err != nil {
		return core.MessageRef{}, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("fake: send: %w", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		var ra struct {
			RetryAfter float64 `json:"retry_after"`
		}
		json.Unmarshal(data, &ra)
		return core.MessageRef{}, &core.RateLimitError{RetryAfter: time.Duration(ra.RetryAfter * float64(time.Second)), Err: errors.New("fake: 429")}
	case resp.StatusCode == http.StatusNotImplemented:
		return core.MessageRef{}, core.ErrNotSupported
	case resp.StatusCode >= 500:
		return core.MessageRef{}, fmt.Errorf("fake: send: %s", resp.Status)
	case resp.StatusCode >= 400:
		return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("fake: send: %s: %s", resp.Status, data)}
	}
	var out struct{ ID string }
	if err := json.Unmarshal(data, &out); err != nil {
		return core.MessageRef{}, fmt.Errorf("fake: decode: %w", err)
	}
	if p.afterSend != nil {
		p.afterSend(m)
	}
	return core.MessageRef{Channel: "fake", ID: out.ID}, nil
}

// cards is a CardSource over a map, so card tests need no engine.
type cards struct {
	mu sync.Mutex
	m  map[string]core.Card
}

func (c *cards) CardByApproval(ctx context.Context, id string) (core.Card, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	card, ok := c.m[id]
	if !ok {
		return core.Card{}, core.ErrNotFound
	}
	return card, nil
}

func (c *cards) set(card core.Card) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]core.Card{}
	}
	c.m[card.ApprovalID] = card
}

// openStore opens a fresh migrated SQLite store. Durability is relaxed
// (synchronous OFF): these tests are about the pipeline, not fsync.
func openStore(t testing.TB) core.Store {
	t.Helper()
	s, err := testkit.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "d.db")+"?_pragma=synchronous(OFF)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var queueSeq atomic.Int64

// queue records replies in one transaction (as one inbound event).
func queue(t testing.TB, s core.Store, msgs ...core.OutboxMessage) {
	t.Helper()
	if len(msgs) == 0 {
		return
	}
	th := msgs[0].Thread
	_, err := s.InboxRecord(context.Background(), core.InboxRecordParams{
		Event: core.ChannelEvent{Channel: th.Channel, EventID: fmt.Sprintf("q-%d", queueSeq.Add(1)),
			Actor: core.Actor{ID: "fake:tester"}, Thread: th, ReceivedAt: time.Now()},
		Replies: msgs,
	})
	if err != nil {
		t.Fatalf("queue: %v", err)
	}
}

func reply(conv, text string) core.OutboxMessage {
	return core.OutboxMessage{Thread: core.Thread{Channel: "fake", Key: conv}, Kind: core.KindReply, Text: text}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("DELIVERY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// worker is one running Worker; stop cancels it and waits for Run.
type worker struct {
	w    *delivery.Worker
	stop func()
}

func startWorker(t testing.TB, o delivery.Options) *worker {
	t.Helper()
	return startWorkerCtx(t, context.Background(), o)
}

// startWorkerCtx runs the worker until parent ends or stop is called;
// before, if given, sees the worker before it runs.
func startWorkerCtx(t testing.TB, parent context.Context, o delivery.Options, before ...func(*delivery.Worker)) *worker {
	t.Helper()
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 1500 * time.Millisecond
	}
	if o.PollInterval == 0 {
		o.PollInterval = 20 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	w, err := delivery.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(w)
	}
	ctx, cancel := context.WithCancel(parent)
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &worker{w: w, stop: stop}
}

// waitFor polls cond (bounded) until true.
func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deliveries lists the whole outbox.
func deliveries(t testing.TB, s core.OutboxStore, status core.DeliveryStatus) []*core.Delivery {
	t.Helper()
	var out []*core.Delivery
	cursor := ""
	for {
		items, next, err := s.OutboxList(context.Background(), core.OutboxListParams{Status: status, Limit: 1000, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, items...)
		if next == "" || len(items) == 0 {
			return out
		}
		cursor = next
	}
}

func countStatus(t testing.TB, s core.OutboxStore, status core.DeliveryStatus) int {
	return len(deliveries(t, s, status))
}
