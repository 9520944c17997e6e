package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// slackOptions are the knobs of `opsgate-bench slack`; every loop they
// drive is bounded by them.
type slackOptions struct {
	server      string
	fakeListen  string
	secret      string
	text        string
	events      int
	concurrency int
	rate        int
	duration    time.Duration
	interval    time.Duration
	timeout     time.Duration
	drain       time.Duration
}

func parseSlackFlags(args []string, stderr io.Writer) (slackOptions, error) {
	var o slackOptions
	fs := flag.NewFlagSet("opsgate-bench slack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.server, "server", "http://127.0.0.1:8080", "base URL of a running opsgate server (loopback only)")
	fs.StringVar(&o.fakeListen, "fake-listen", "127.0.0.1:18099", "loopback address of the Slack Web API fake this "+
		"command serves; the server's channels.slack.api_url must be http://<this>/api/")
	fs.StringVar(&o.secret, "signing-secret", "", "the server's Slack signing secret (default $SLACK_SIGNING_SECRET)")
	fs.StringVar(&o.text, "text", "ping", "what each app_mention says after the bot's mention (a flow command)")
	fs.IntVar(&o.events, "events", 10_000, "signed app_mention events to send (closed loop, as fast as --concurrency allows)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "concurrent senders (closed loop) or most requests in flight (--rate)")
	fs.IntVar(&o.rate, "rate", 0, "sustained mode: send this many events a second for --duration instead of --events")
	fs.DurationVar(&o.duration, "duration", time.Minute, "sustained mode: how long to send at --rate")
	fs.DurationVar(&o.interval, "interval", 10*time.Second, "sustained mode: print p99 and RSS this often")
	fs.DurationVar(&o.drain, "drain", 2*time.Minute, "after the last event, wait at most this long for the replies")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.secret == "" {
		o.secret = os.Getenv("SLACK_SIGNING_SECRET")
	}
	if o.secret == "" {
		return o, errors.New("no signing secret: pass --signing-secret or set $SLACK_SIGNING_SECRET")
	}
	if o.events < 1 || o.events > 1_000_000 || o.concurrency < 1 || o.concurrency > 1024 ||
		o.rate < 0 || o.rate > 20_000 || o.duration <= 0 || o.duration > time.Hour || o.interval <= 0 {
		return o, errors.New("load out of bounds (1 ≤ events ≤ 1e6, 1 ≤ concurrency ≤ 1024, rate ≤ 20000/s, duration ≤ 1h)")
	}
	if o.rate > 0 && int64(o.rate)*int64(o.duration/time.Second) > 10_000_000 {
		return o, errors.New("--rate × --duration over 10 million events")
	}
	if _, err := loopbackURL("http://" + o.fakeListen); err != nil {
		return o, fmt.Errorf("--fake-listen: %w", err)
	}
	return o, nil
}

// slackFake is the Slack Web API as far as the adapter needs it for a
// mention and its reply: auth.test, chat.postMessage, chat.update, and ok
// for anything else. It keeps, per channel the bench sent an event in, only
// when that event was sent; the first message posted to the channel is the
// event's full path done.
type slackFake struct {
	mu      sync.Mutex
	waiting map[string]*pendingEvent // channel → its event, until replied
	tsSeq   int64

	posts, extra, updates, other atomic.Int64
	onReply                      func(sent time.Time, at time.Time)
}

type pendingEvent struct{ sent time.Time }

func (f *slackFake) expect(channel string, sent time.Time) {
	f.mu.Lock()
	f.waiting[channel] = &pendingEvent{sent: sent}
	f.mu.Unlock()
}

func (f *slackFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	w.Header().Set("Content-Type", "application/json")
	switch method {
	case "auth.test":
		_, _ = io.WriteString(w, `{"ok":true,"user_id":"UBOT","bot_id":"BBOT","team_id":"T1","user":"opsgate"}`)
	case "chat.postMessage":
		f.posts.Add(1)
		ch := param(r, body, "channel")
		f.mu.Lock()
		f.tsSeq++
		ts := fmt.Sprintf("1800000000.%06d", f.tsSeq)
		p := f.waiting[ch]
		delete(f.waiting, ch)
		f.mu.Unlock()
		if p != nil {
			f.onReply(p.sent, at)
		} else {
			f.extra.Add(1)
		}
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, ch, ts)
	case "chat.update":
		f.updates.Add(1)
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, param(r, body, "channel"), param(r, body, "ts"))
	default:
		f.other.Add(1)
		_, _ = io.WriteString(w, `{"ok":true}`)
	}
}

// param reads a form or JSON field of a Web API call (the fields the fake
// needs are plain strings).
func param(r *http.Request, body []byte, name string) string {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		key := `"` + name + `":"`
		i := strings.Index(string(body), key)
		if i < 0 {
			return ""
		}
		rest := string(body[i+len(key):])
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			return rest[:j]
		}
		return ""
	}
	v, _ := url.ParseQuery(string(body))
	return v.Get(name)
}

// latencies collects durations under a lock, with a per-interval slice for
// the sustained mode.
type latencies struct {
	mu            sync.Mutex
	all, interval []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d)
	l.interval = append(l.interval, d)
	l.mu.Unlock()
}

func (l *latencies) takeInterval() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.interval
	l.interval = nil
	return d
}

func (l *latencies) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.all)
}

// runSlack is `opsgate-bench slack`: signed Slack app_mention events into
// a running server, replies counted at a local Slack Web API fake.
func runSlack(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseSlackFlags(args, stderr)
	if err != nil {
		return err
	}
	base, err := loopbackURL(o.server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()

	var replies, acks latencies
	fake := &slackFake{waiting: map[string]*pendingEvent{}}
	var lastAt atomic.Int64
	fake.onReply = func(sent, at time.Time) {
		replies.add(at.Sub(sent))
		for {
			old := lastAt.Load()
			if at.UnixNano() <= old || lastAt.CompareAndSwap(old, at.UnixNano()) {
				return
			}
		}
	}
	srv := &http.Server{Addr: o.fakeListen, Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	ln, err := listenLoopback(o.fakeListen)
	if err != nil {
		return err
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	c := newClient(base, "", o.concurrency)
	if _, err := serverRSS(ctx, c); err != nil {
		return fmt.Errorf("cannot use the server at %s: %w", base, err)
	}
	nonce := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	fmt.Fprintf(stdout, "opsgate-bench slack against %s, Slack fake on %s (nonce %s)\n", base, o.fakeListen, nonce)

	var sent atomic.Int64
	send := func(ctx context.Context, i int) error {
		ch := fmt.Sprintf("CB%s%07d", strings.ToUpper(nonce), i)
		t0 := time.Now()
		fake.expect(ch, t0)
		if err := postMention(ctx, c, o.secret, nonce, ch, i, o.text, t0); err != nil {
			return err
		}
		acks.add(time.Since(t0))
		sent.Add(1)
		return nil
	}

	start := time.Now()
	if o.rate == 0 {
		err = pool(ctx, o.events, o.concurrency, send)
	} else {
		err = sustained(ctx, o, send, &replies, c, stdout, start)
	}
	if err != nil {
		return fmt.Errorf("send events: %w", err)
	}
	ackElapsed := time.Since(start)
	n := int(sent.Load())
	// Wait for the replies (bounded by --drain).
	deadline := time.Now().Add(o.drain)
	for replies.count() < n && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	got := replies.count()
	// The full path ends with the last reply (not when this loop noticed).
	fullElapsed := max(ackElapsed, time.Unix(0, lastAt.Load()).Sub(start))
	fmt.Fprintf(stdout, "acked:     %d signed app_mention events, %d clients: %.0f events/s acked (%.2fs; ack p50 %s p99 %s)\n",
		n, o.concurrency, float64(n)/ackElapsed.Seconds(), ackElapsed.Seconds(), ms(pct(acks.all, 50)), ms(pct(acks.all, 99)))
	fmt.Fprintf(stdout, "full path: %d of %d replies posted at the fake: %.0f replies/s (%.2fs from the first event; "+
		"event → reply p50 %s p99 %s); %.2f × the acked rate\n",
		got, n, float64(got)/fullElapsed.Seconds(), fullElapsed.Seconds(), ms(pct(replies.all, 50)), ms(pct(replies.all, 99)),
		(float64(got)/fullElapsed.Seconds())/(float64(n)/ackElapsed.Seconds()))
	fmt.Fprintf(stdout, "fake:      %d chat.postMessage (%d not a first reply), %d chat.update, %d other calls\n",
		fake.posts.Load(), fake.extra.Load(), fake.updates.Load(), fake.other.Load())
	rss, err := serverRSS(ctx, c)
	if err != nil {
		return fmt.Errorf("read server RSS: %w", err)
	}
	fmt.Fprintf(stdout, "rss:       %.1f MiB after the run (process_resident_memory_bytes)\n", rss/(1<<20))
	if got < n {
		return fmt.Errorf("%d of %d events got no reply within --drain %s", n-got, n, o.drain)
	}
	return nil
}

// listenLoopback listens on addr, which must be a loopback address: the
// fake serves only this machine.
func listenLoopback(addr string) (net.Listener, error) {
	if _, err := loopbackURL("http://" + addr); err != nil {
		return nil, err
	}
	return net.Listen("tcp", addr)
}

// postMention sends one app_mention as Slack does: JSON body, signed with
// v0 HMAC-SHA256 over "v0:<ts>:<body>", X-Slack-Request-Timestamp and
// X-Slack-Signature headers.
func postMention(ctx context.Context, c *client, secret, nonce, channel string, i int, text string, now time.Time) error {
	evTS := fmt.Sprintf("%d.%06d", now.Unix(), i%1_000_000)
	body := fmt.Sprintf(`{"token":"bench","team_id":"T1","api_app_id":"A0BENCH","type":"event_callback",`+
		`"event_id":"EvB%s%07d","event_time":%d,"event":{"type":"app_mention","user":"UBENCH","text":"<@UBOT> %s",`+
		`"ts":%q,"channel":%q,"event_ts":%q,"team":"T1"},`+
		`"authorizations":[{"team_id":"T1","user_id":"UBOT","is_bot":true}]}`,
		strings.ToUpper(nonce), i, now.Unix(), text, evTS, channel, evTS)
	ts := strconv.FormatInt(now.Unix(), 10)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:" + ts + ":"))
	m.Write([]byte(body))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url("/slack/events"), strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return &httpError{status: resp.StatusCode, body: string(b)}
	}
	return nil
}

// sustained sends o.rate events a second for o.duration (at most
// o.concurrency in flight; an event that finds them all busy is counted
// as behind schedule and sent when one frees), printing each interval's
// sent and replied counts, the replies' p99 and the server's RSS.
func sustained(ctx context.Context, o slackOptions, send func(context.Context, int) error,
	replies *latencies, c *client, stdout io.Writer, start time.Time) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, o.concurrency)
	var wg sync.WaitGroup
	total := int(int64(o.rate) * int64(o.duration) / int64(time.Second))
	every := time.Second / time.Duration(o.rate)
	nextReport := start.Add(o.interval)
	var late int
	lastCount := 0
	for i := 0; i < total && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * every)
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		select {
		case slots <- struct{}{}:
		default:
			late++
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				continue
			}
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-slots }()
			if err := send(ctx, i); err != nil {
				cancel(err)
			}
		}(i)
		if now := time.Now(); now.After(nextReport) {
			d := replies.takeInterval()
			rss, _ := serverRSS(ctx, c)
			cnt := replies.count()
			fmt.Fprintf(stdout, "interval:  t=%3.0fs sent %d, replies %d (+%d), reply p50 %s p99 %s, rss %.1f MiB, late sends %d\n",
				now.Sub(start).Seconds(), i+1, cnt, cnt-lastCount, ms(pct(d, 50)), ms(pct(d, 99)), rss/(1<<20), late)
			lastCount = cnt
			nextReport = nextReport.Add(o.interval)
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
