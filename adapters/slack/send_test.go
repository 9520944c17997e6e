package slack

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

var thread1 = core.Thread{Channel: "slack", Key: "T1/C1/1700000000.000001"}

// A 12 KB reply reaches the thread as ordered chunks, each within Slack's
// 4,000 characters, every line once and in order.
func TestLongReplyArrivesInOrderedChunks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	text, lines := adaptertest.LongReply(12 << 10)
	e.h.WaitDelivered(e.h.QueueReply(thread1, text))
	var all strings.Builder
	posts := e.fake.Calls("chat.postMessage")
	if len(posts) < 3 {
		t.Fatalf("%d posts for a 12 KB reply, want at least 3", len(posts))
	}
	for i, c := range posts {
		if n := utf8.RuneCountInString(c.Params["text"]); n > replyLimit {
			t.Errorf("chunk %d has %d characters", i, n)
		}
		if c.Params["thread_ts"] != "1700000000.000001" || c.Params["channel"] != "C1" {
			t.Errorf("chunk %d went to %s/%s", i, c.Params["channel"], c.Params["thread_ts"])
		}
		all.WriteString(c.Params["text"] + "\n")
	}
	if err := adaptertest.CheckLines(all.String(), lines); err != nil {
		t.Fatal(err)
	}
}

// A storm of 429s is ridden out: five consecutive 429s with Retry-After,
// and nothing is lost, the replies arrive in order, and no retry comes
// before the Retry-After of the 429 it follows.
func TestRateLimitStormRiddenOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const storm = 5
	e.fake.RateLimit("chat.postMessage", storm, 1)
	want := []string{"first after the storm", "second after the storm", "third after the storm"}
	var ids []string
	for _, text := range want {
		ids = append(ids, e.h.QueueReply(thread1, text))
	}
	for _, id := range ids {
		e.h.WaitDelivered(id)
	}
	calls := e.fake.Calls("chat.postMessage")
	if len(calls) != storm+len(want) {
		t.Fatalf("%d calls, want %d limited + %d accepted", len(calls), storm, len(want))
	}
	limited := 0
	for i, c := range calls {
		if c.RetryAfter == 0 {
			continue
		}
		limited++
		if i+1 >= len(calls) {
			t.Fatalf("the last call was a 429: nothing retried it")
		}
		if gap := calls[i+1].At.Sub(c.At); gap < c.RetryAfter-50*time.Millisecond {
			t.Errorf("call %d came %s after a 429 with Retry-After %s", i+1, gap, c.RetryAfter)
		}
	}
	if limited != storm {
		t.Fatalf("%d calls were answered 429, want %d consecutive", limited, storm)
	}
	for i := range storm {
		if calls[i].RetryAfter == 0 {
			t.Fatalf("call %d was accepted inside the storm; the 429s were not consecutive", i)
		}
	}
	var got []string
	for _, m := range e.fake.Thread("C1", "1700000000.000001") {
		got = append(got, m.Text)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("thread = %q, want %q (nothing lost, order kept)", got, want)
	}
}

// Send maps Slack's answers to what the pipeline acts on.
func TestSendErrorMapping(t *testing.T) {
	t.Parallel()
	e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) {})
	ctx := t.Context()
	reply := core.Outbound{Thread: thread1, Kind: core.KindReply, Text: "x", Part: 1, Parts: 1}

	e.fake.RateLimit("chat.postMessage", 1, 7)
	_, err := e.a.Send(ctx, reply)
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Fatalf("429: err = %v, want RateLimitError after 7s", err)
	}

	e.fake.Fail("chat.postMessage", "channel_not_found")
	_, err = e.a.Send(ctx, reply)
	var perm *core.PermanentError
	if !errors.As(err, &perm) {
		t.Fatalf("channel_not_found: err = %v, want PermanentError", err)
	}

	e.fake.Fail("chat.postMessage", "internal_error")
	_, err = e.a.Send(ctx, reply)
	if err == nil || errors.As(err, &perm) || errors.As(err, &rl) {
		t.Fatalf("internal_error: err = %v, want a retryable error", err)
	}

	_, err = e.a.Send(ctx, core.Outbound{Thread: core.Thread{Channel: "console", Key: "x"}, Kind: core.KindReply, Text: "x"})
	if !errors.As(err, &perm) {
		t.Fatalf("foreign thread: err = %v, want PermanentError", err)
	}

	ref, err := e.a.Send(ctx, reply)
	if err != nil || ref.Channel != "C1" || ref.ID == "" {
		t.Fatalf("send: %v %+v", err, ref)
	}
}

// A card update whose message is gone is posted in the thread instead, so
// the outcome is still visible.
func TestCardUpdateFallsBackToNewMessage(t *testing.T) {
	t.Parallel()
	e := setup(t)
	card := testCard()
	card.Status = "approved"
	card.Outcome = &core.CardOutcome{Status: "approved", By: []string{approver}, At: time.Date(2026, 1, 2, 14, 2, 0, 0, time.UTC)}
	ref, err := e.a.Send(t.Context(), core.Outbound{Thread: thread1, Kind: core.KindCardUpdate, Card: &card,
		Edit: &core.MessageRef{Channel: "C1", ID: "1699999999.000001"}})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := e.fake.Message("C1", ref.ID)
	if !ok || m.ThreadTS != "1700000000.000001" || !strings.Contains(fakeslack.VisibleText(m), "Approved* by <@UAPP>") {
		t.Fatalf("fallback message = %+v", m)
	}
}

// Pacing defaults to Slack's one message a second per channel, burst 3,
// and buckets are per channel, not per thread.
func TestPacingAndBuckets(t *testing.T) {
	t.Parallel()
	a, err := New(Config{BotToken: "xoxb-1", SigningSecret: "s"}, Deps{Sink: nopSink{}, Cards: nopCards{}})
	if err != nil {
		t.Fatal(err)
	}
	if p := a.Pacing(); p.Conversation != (delivery.Rate{Every: time.Second, Burst: 3}) {
		t.Fatalf("pacing = %+v", p)
	}
	b1 := a.Buckets(core.Thread{Channel: "slack", Key: "T1/C1/1.1"})
	b2 := a.Buckets(core.Thread{Channel: "slack", Key: "T1/C1/2.2"})
	if b1 != b2 || b1.Conversation != "T1/C1" {
		t.Fatalf("buckets %v %v, want one per channel", b1, b2)
	}
}
