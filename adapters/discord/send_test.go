package discord

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/pace"
)

var convThread = core.Thread{Channel: ChannelName, Key: guildID + "/" + channelID + "/" + channelID}

func TestFiveKBReplySplitInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	text, lines := adaptertest.LongReply(5 << 10)
	text += "\n@everyone look"
	id := e.h.QueueReply(convThread, text)
	d := e.h.WaitDelivered(id)
	var all strings.Builder
	n := 0
	for _, ev := range e.fake.Log() {
		if ev.ChannelID != channelID {
			continue
		}
		n++
		if l := len(utf16.Encode([]rune(ev.Content))); l > MaxContent {
			t.Errorf("chunk %d is %d characters, limit %d", n, l, MaxContent)
		}
		all.WriteString(ev.Content + "\n")
	}
	if n < 3 || n != d.ChunksSent {
		t.Errorf("fake got %d messages, outbox sent %d chunks; want ≥3 and equal", n, d.ChunksSent)
	}
	if err := adaptertest.CheckLines(all.String(), lines); err != nil {
		t.Error(err)
	}
	if strings.Contains(all.String(), "@everyone") {
		t.Error("@everyone reached Discord live")
	}
	for _, r := range e.fake.Requests() {
		if r.Method == http.MethodPost && strings.Contains(r.Path, "/messages") && !strings.Contains(r.Body, `"allowed_mentions":{"parse":[]`) {
			t.Errorf("message sent without allowed_mentions none: %s", r.Body)
		}
	}
}

func TestRateLimit429RiddenOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.Fail429(1, 0.3, false)
	start := time.Now()
	id := e.h.QueueReply(convThread, "after the limit")
	e.h.WaitDelivered(id)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("delivered %v after a 429 asking for 300ms: retried early", d)
	}
	var posts []int
	for _, r := range e.fake.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(r.Path, "/messages") {
			posts = append(posts, r.Status)
		}
	}
	// One 429 then one success: discordgo did not retry silently.
	if len(posts) != 2 || posts[0] != 429 || posts[1] != 200 {
		t.Errorf("message POST statuses = %v, want [429 200]", posts)
	}
}

func TestSendMapsErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	ctx := context.Background()
	e.fake.Fail429(1, 1.5, true)
	_, err := e.ad.Send(ctx, core.Outbound{Thread: convThread, Kind: core.KindReply, Text: "x"})
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 1500*time.Millisecond || rl.Scope != "global" {
		t.Errorf("global 429 → %v (%+v), want RateLimitError 1.5s scope global", err, rl)
	}
	// Editing a message Discord no longer has posts the card anew.
	card := core.Card{ApprovalID: "ap-1", Tool: "deploy", Status: "approved", Risk: "read",
		Outcome: &core.CardOutcome{Status: "approved", By: []string{"discord:1"}, At: time.Now()}}
	ref, err := e.ad.Send(ctx, core.Outbound{Thread: convThread, Kind: core.KindCardUpdate, Card: &card,
		Edit: &core.MessageRef{Channel: ChannelName, ID: channelID + "/123"}})
	if err != nil || ref.ID == channelID+"/123" {
		t.Errorf("update of a gone card → %v, %v; want a new message", ref, err)
	}
	// A bad thread key is permanent.
	_, err = e.ad.Send(ctx, core.Outbound{Thread: core.Thread{Channel: ChannelName, Key: "nope"}, Kind: core.KindReply, Text: "x"})
	var pe *core.PermanentError
	if !errors.As(err, &pe) {
		t.Errorf("bad key → %v, want PermanentError", err)
	}
	// A 4xx is permanent and not retried by the library.
	before := len(e.fake.Requests())
	_, err = e.ad.Send(ctx, core.Outbound{Thread: core.Thread{Channel: ChannelName, Key: guildID + "/1/1"}, Kind: core.KindCardUpdate,
		Card: &card, Edit: &core.MessageRef{Channel: ChannelName, ID: "bad ref"}})
	if !errors.As(err, &pe) {
		t.Errorf("bad message ref → %v, want PermanentError", err)
	}
	if n := len(e.fake.Requests()) - before; n != 0 {
		t.Errorf("a malformed ref cost %d requests, want 0", n)
	}
}

// TestRouteBucketLearnedFromHeaders: once Discord said a route's bucket is
// empty for 60 s, the transport does not spend a request on it (it would
// be a 429, counted toward the invalid-request ban): the send waits, and
// with a deadline sooner than the reset it gives up without a request.
func TestRouteBucketLearnedFromHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.fake.SetBucket(2)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := e.ad.Send(ctx, core.Outbound{Thread: convThread, Kind: core.KindReply, Text: "x"}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	before := len(e.fake.Requests())
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := e.ad.Send(dctx, core.Outbound{Thread: convThread, Kind: core.KindReply, Text: "x"})
	if !errors.Is(err, pace.ErrWouldExceedDeadline) {
		t.Errorf("third send → %v, want ErrWouldExceedDeadline", err)
	}
	if n := len(e.fake.Requests()) - before; n != 0 {
		t.Errorf("the exhausted bucket still got %d requests", n)
	}
	// Another channel is another bucket (major parameter).
	other := core.Thread{Channel: ChannelName, Key: guildID + "/400000000000000077/400000000000000077"}
	if _, err := e.ad.Send(ctx, core.Outbound{Thread: other, Kind: core.KindReply, Text: "x"}); err != nil {
		t.Errorf("send to another channel: %v", err)
	}
}

func TestRouteOf(t *testing.T) {
	t.Parallel()
	cases := []struct{ method, path, route, major string }{
		{"POST", "/api/v10/channels/123/messages", "POST /channels/:major/messages", "123"},
		{"PATCH", "/api/v10/channels/123/messages/456", "PATCH /channels/:major/messages/:id", "123"},
		{"PATCH", "/api/v10/webhooks/9/tok/messages/@original", "PATCH /webhooks/:major/:token/messages/@original", "9/tok"},
		{"POST", "/api/v10/interactions/5/tok/callback", "POST /interactions/:token/:token/callback", ""},
		{"GET", "/api/v10/applications/7/commands", "GET /applications/:id/commands", ""},
	}
	for _, c := range cases {
		r, m := routeOf(c.method, c.path, "/api/v10")
		if r != c.route || m != c.major {
			t.Errorf("routeOf(%s %s) = %q, %q; want %q, %q", c.method, c.path, r, m, c.route, c.major)
		}
	}
}

func TestPacingDefaults(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{pace: true})
	p := e.ad.Pacing()
	// No 5-second window may hold more than 5 messages per channel.
	if w := 5*time.Second/p.Conversation.Every + time.Duration(p.Conversation.Burst) - 1; w > 5 {
		t.Errorf("conversation pacing %+v allows %d per 5 s", p.Conversation, w)
	}
	if per := time.Second/p.Account.Every + time.Duration(p.Account.Burst) - 1; per > 50 {
		t.Errorf("account pacing %+v allows %d per second", p.Account, per)
	}
	if b := e.ad.Buckets(core.Thread{Channel: ChannelName, Key: guildID + "/1/2"}); b.Conversation != "2" {
		t.Errorf("bucket of a thread = %+v, want the thread channel", b)
	}
}
