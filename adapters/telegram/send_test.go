package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/internal/testkit"
)

// nopSink and nopCards satisfy Deps for tests of the sending side alone.
type nopSink struct{}

func (nopSink) HandleEvent(context.Context, core.ChannelEvent) (core.Receipt, error) {
	return core.Receipt{}, nil
}

type nopCards struct{}

func (nopCards) CardByApproval(context.Context, string) (core.Card, error) {
	return core.Card{}, core.ErrNotFound
}

func newSender(t *testing.T) (*Adapter, *faketelegram.Server, *testkit.LogBuffer) {
	t.Helper()
	fake := faketelegram.New(testToken, testBot)
	t.Cleanup(fake.Close)
	logs := &testkit.LogBuffer{}
	ad, err := New(Config{BotToken: testToken, Mode: ModePolling, APIURL: fake.APIURL()},
		Deps{Sink: nopSink{}, Cards: nopCards{}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return ad, fake, logs
}

func pendingCard() core.Card {
	return core.Card{
		ApprovalID: "0b9a4a52-9b8e-4f7e-9d0c-3c1f5f7e2a11", Tool: "deploy",
		Args:   []core.CardArg{{Name: "service", Value: "api"}, {Name: "version", Value: "1.2.3"}},
		Reason: "deploy api 1.2.3", Risk: "high_impact", Preview: "would deploy api 1.2.3 to staging",
		Requester: "telegram:7", Approvers: []string{"group:sre"}, Quorum: 1, Status: "pending",
		ExpiresAt: time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC), ConsoleURL: "https://ops.example.test/approvals/x",
	}
}

func TestSendMapsErrors(t *testing.T) {
	t.Parallel()
	ad, fake, _ := newSender(t)
	th := core.Thread{Channel: ChannelName, Key: "-100200/5/77"}
	msg := core.Outbound{Thread: th, Kind: core.KindReply, Text: "hello"}

	fake.FailNext("sendMessage", faketelegram.Failure{Code: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7})
	_, err := ad.Send(context.Background(), msg)
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 7*time.Second {
		t.Errorf("429: err = %v, want RateLimitError after 7s", err)
	}
	fake.FailNext("sendMessage", faketelegram.Failure{Code: 403, Description: "Forbidden: bot was blocked by the user"})
	_, err = ad.Send(context.Background(), msg)
	var pe *core.PermanentError
	if !errors.As(err, &pe) {
		t.Errorf("403: err = %v, want PermanentError", err)
	}
	fake.FailNext("sendMessage", faketelegram.Failure{Code: 502, Description: "Bad Gateway"})
	_, err = ad.Send(context.Background(), msg)
	if err == nil || errors.As(err, &pe) || errors.As(err, &rl) {
		t.Errorf("502: err = %v, want a plain retryable error", err)
	}
	if _, err := ad.Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: ChannelName, Key: "nope"}, Kind: core.KindReply, Text: "x"}); !errors.As(err, &pe) {
		t.Errorf("bad thread: err = %v, want PermanentError", err)
	}

	ref, err := ad.Send(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	c := fake.Calls("sendMessage")
	last := c[len(c)-1].Params
	if last["message_thread_id"] != "5" || !strings.Contains(last["reply_parameters"], `"message_id":77`) || last["parse_mode"] != "HTML" {
		t.Errorf("sendMessage params %v", last)
	}
	if ref.Channel != ChannelName || !strings.HasPrefix(ref.ID, "-100200/") {
		t.Errorf("ref = %+v", ref)
	}
}

func TestSendErrorsNeverCarryTheToken(t *testing.T) {
	t.Parallel()
	ad, fake, logs := newSender(t)
	fake.Close() // every request now fails in the transport, quoting the URL
	_, err := ad.Send(context.Background(), core.Outbound{Thread: core.Thread{Channel: ChannelName, Key: "7/0/1"}, Kind: core.KindReply, Text: "x"})
	if err == nil {
		t.Fatal("send to a closed server succeeded")
	}
	if strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), strings.Split(testToken, ":")[1]) {
		t.Errorf("error leaks the token: %v", err)
	}
	if !strings.Contains(err.Error(), redacted) {
		t.Errorf("error %q does not show where the token was", err)
	}
	// Run logs the getMe failure (with the URL) before giving up.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_ = ad.Run(ctx)
	if !strings.Contains(logs.String(), "getMe") {
		t.Fatalf("expected a getMe failure in the logs, got %q", logs.String())
	}
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("logs leak the token:\n%s", logs.String())
	}
}

func TestScrubberKeepsSentinels(t *testing.T) {
	t.Parallel()
	s := scrubber{token: testToken}
	err := s.Err(errors.Join(errors.New("POST https://x/bot"+testToken+"/getMe"), context.Canceled))
	if strings.Contains(err.Error(), testToken) || !errors.Is(err, context.Canceled) {
		t.Errorf("scrubbed = %v (is canceled: %v)", err, errors.Is(err, context.Canceled))
	}
	var leak interface{ Unwrap() []error }
	if errors.As(err, &leak) {
		for _, e := range leak.Unwrap() {
			if strings.Contains(e.Error(), testToken) {
				t.Errorf("wrapped error leaks: %v", e)
			}
		}
	}
	plain := errors.New("nothing secret")
	if s.Err(plain) != plain {
		t.Error("an error without the token should pass unchanged")
	}
}

func TestCardSendEditAndFallbacks(t *testing.T) {
	t.Parallel()
	ad, fake, _ := newSender(t)
	ctx := context.Background()
	th := core.Thread{Channel: ChannelName, Key: "-100200/5/77"}
	c := pendingCard()
	ref, err := ad.Send(ctx, core.Outbound{Thread: th, Kind: core.KindCard, Card: &c})
	if err != nil {
		t.Fatal(err)
	}
	chat, id, _ := parseMessageRef(ref.ID)
	sent, _ := fake.Message(chat, id)
	if len(buttons(t, sent)) != 3 || sent.ThreadID != 5 || sent.ReplyTo != 77 {
		t.Fatalf("card %+v", sent)
	}

	decided := c
	decided.Status = "approved"
	decided.Outcome = &core.CardOutcome{Status: "approved", By: []string{"telegram:42"}, At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	up := core.Outbound{Thread: th, Kind: core.KindCardUpdate, Card: &decided, Edit: &ref}
	if _, err := ad.Send(ctx, up); err != nil {
		t.Fatal(err)
	}
	got, _ := fake.Message(chat, id)
	if got.Markup != "" || !strings.Contains(visible(got.Text), "Approved by telegram:42") {
		t.Errorf("edited card: markup %q text %q", got.Markup, got.Text)
	}
	// The same update again (a retry): "not modified" is success.
	if _, err := ad.Send(ctx, up); err != nil {
		t.Errorf("repeated edit: %v", err)
	}
	// The card is gone: the update is posted as a new message.
	gone := core.MessageRef{Channel: ChannelName, ID: "-100200/999999"}
	up.Edit = &gone
	nref, err := ad.Send(ctx, up)
	if err != nil || nref.ID == gone.ID {
		t.Errorf("update of a deleted card: ref %v err %v, want a new message", nref, err)
	}
	// No reference at all (sent on another channel): a new message too.
	up.Edit = nil
	if _, err := ad.Send(ctx, up); err != nil {
		t.Error(err)
	}
}

func TestReplyWithEmojiAndCJKSplitAtUTF16Limit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	var b strings.Builder
	for b.Len() < 40000 {
		b.WriteString("部署完了 🚀🔥 サービス 漢字テスト 👩‍💻 ")
	}
	text := b.String()
	th := core.Thread{Channel: ChannelName, Key: "-100200/5/77"}
	id := e.h.QueueReply(th, text)
	e.h.WaitDelivered(id)
	msgs := e.fake.Messages(-100200)
	if len(msgs) < 3 {
		t.Fatalf("%d messages, want the reply split", len(msgs))
	}
	var joined strings.Builder
	longest := 0
	for i, m := range msgs {
		n := chunk.Measure(visible(m.Text), chunk.UTF16)
		if n > MaxText {
			t.Errorf("chunk %d is %d UTF-16 units", i, n)
		}
		longest = max(longest, n)
		if m.ThreadID != 5 {
			t.Errorf("chunk %d left the topic: %d", i, m.ThreadID)
		}
		body := visible(m.Text)
		if k := strings.LastIndex(body, "\n("); k >= 0 {
			body = body[:k]
		}
		joined.WriteString(body)
	}
	if longest < MaxText*3/4 {
		t.Errorf("longest chunk %d units: split far below the limit", longest)
	}
	if strings.Join(strings.Fields(joined.String()), " ") != strings.Join(strings.Fields(text), " ") {
		t.Error("the chunks do not add up to the reply")
	}
}

// TestCardSentDecidedIsNotEditedAgain: a card queued before its decision and
// delivered after goes out in its decided state; its update would change
// nothing, so no edit is made (Telegram would refuse it twice as "message is
// not modified"). A card sent pending is still edited.
func TestCardSentDecidedIsNotEditedAgain(t *testing.T) {
	t.Parallel()
	ad, fake, _ := newSender(t)
	ctx := context.Background()
	th := core.Thread{Channel: ChannelName, Key: "-100200/5/77"}
	decided := pendingCard()
	decided.Status = "approved"
	decided.Outcome = &core.CardOutcome{Status: "approved", By: []string{"telegram:42"}, At: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	ref, err := ad.Send(ctx, core.Outbound{Thread: th, Kind: core.KindCard, Card: &decided})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(ref.ID, decidedSuffix) {
		t.Fatalf("ref %q of a card sent decided is not marked", ref.ID)
	}
	chat, id, err := parseMessageRef(strings.TrimSuffix(ref.ID, decidedSuffix))
	if err != nil {
		t.Fatal(err)
	}
	if sent, ok := fake.Message(chat, id); !ok || sent.Markup != "" || !strings.Contains(visible(sent.Text), "Approved by telegram:42") {
		t.Fatalf("card sent decided: %+v", sent)
	}
	for range 2 { // the update, and a redelivery of it
		got, err := ad.Send(ctx, core.Outbound{Thread: th, Kind: core.KindCardUpdate, Card: &decided, Edit: &ref})
		if err != nil || got != ref {
			t.Fatalf("update of a card sent decided: %v, %v; want its ref unchanged", got, err)
		}
	}
	if n := len(fake.Calls("editMessageText")) + len(fake.Calls("editMessageReplyMarkup")); n != 0 {
		t.Fatalf("%d edits of a card sent in its decided state, want none", n)
	}

	// A card sent pending is edited when decided.
	c := pendingCard()
	pref, err := ad.Send(ctx, core.Outbound{Thread: th, Kind: core.KindCard, Card: &c})
	if err != nil || strings.HasSuffix(pref.ID, decidedSuffix) {
		t.Fatalf("pending card: ref %q, %v", pref.ID, err)
	}
	if _, err := ad.Send(ctx, core.Outbound{Thread: th, Kind: core.KindCardUpdate, Card: &decided, Edit: &pref}); err != nil {
		t.Fatal(err)
	}
	if n := len(fake.Calls("editMessageText")); n != 1 {
		t.Fatalf("%d edits of a pending card on its decision, want 1", n)
	}
}
