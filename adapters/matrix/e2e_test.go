package matrix

import (
	"context"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/core"
)

// TestRealHomeserverApprovalRoundTrip is the whole story on Dendrite:
// alice asks in the room, the card arrives in her request's thread, carol
// (not an approver) reacts ✅ and is refused, bob reacts ✅ and the deploy
// runs once, the card is edited to say so, and the result lands in the
// thread.
func TestRealHomeserverApprovalRoundTrip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	req := e.say(e.alice, "!ops deploy api 1.2.3", nil)
	inThread := func(m roomMessage) bool {
		r := m.Content.RelatesTo
		return r != nil && r.RelType == "m.thread" && r.EventID == string(req)
	}
	card := e.waitMessage("the card in the request's thread", func(m roomMessage) bool {
		return inThread(m) && m.Content.Card != nil && strings.Contains(m.Content.Body, "Approval needed")
	})
	if !strings.Contains(m2s(card.Content.FormattedBody), "<b>Tool:</b> <code>deploy</code>") {
		t.Errorf("card HTML = %s", card.Content.FormattedBody)
	}
	runs := e.runs()
	if len(runs) != 1 || runs[0].Status != core.RunWaitingApproval || runs[0].Requester != e.request {
		t.Fatalf("runs = %+v, want one waiting run requested by alice", runs)
	}

	e.react(e.carol, card.ID, "✅")
	e.waitMessage("carol told she may not decide", func(m roomMessage) bool {
		return inThread(m) && strings.Contains(m.Content.Body, "may not decide")
	})
	if got := e.h.RefusedActions("matrix:" + string(e.carol.UserID)); got["approve"] != 1 {
		t.Errorf("carol's refused approvals audited = %v, want 1", got)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Fatalf("deploy ran %d times after a refused reaction", n)
	}

	e.react(e.bob, card.ID, "✅")
	e.h.WaitRun(runs[0].ID, core.RunSucceeded)
	e.waitMessage("the card edited with the outcome", func(m roomMessage) bool {
		r := m.Content.RelatesTo
		return r != nil && r.RelType == "m.replace" && r.EventID == string(card.ID) && strings.Contains(m.NewBody, "Approved by "+e.approver)
	})
	e.waitMessage("the result in the thread", func(m roomMessage) bool {
		return inThread(m) && strings.Contains(m.Content.Body, "deployed api 1.2.3 to staging")
	})
	if n := len(e.h.Dispatches()); n != 1 {
		t.Errorf("deploy ran %d times, want once", n)
	}
}

func m2s(s string) string { return s }

// TestRealHomeserverReplyDecisions decides by replying to the card: a bad
// edit is refused with the reason, a valid edit approves the new arguments.
func TestRealHomeserverReplyDecisions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	req := e.say(e.alice, "!ops deploy api 1.2.3", nil)
	card := e.waitMessage("the card", func(m roomMessage) bool { return m.Content.Card != nil })
	reply := func(body string) {
		e.say(e.bob, body, map[string]any{"m.relates_to": map[string]any{
			"rel_type": "m.thread", "event_id": string(req), "is_falling_back": false,
			"m.in_reply_to": map[string]any{"event_id": string(card.ID)}}})
	}
	reply(`edit {"service": "api"`)
	e.waitMessage("the bad edit refused", func(m roomMessage) bool {
		return strings.Contains(m.Content.Body, "Arguments not accepted")
	})
	reply(`edit {"service": "api", "version": "1.2.4"}`)
	run := e.h.WaitRun(e.runs()[0].ID, core.RunSucceeded)
	if calls := e.h.Dispatches(); len(calls) != 1 || calls[0].Args["version"] != "1.2.4" {
		t.Errorf("dispatches = %+v, want one with version 1.2.4", calls)
	}
	_ = run
	e.waitMessage("the card edited", func(m roomMessage) bool {
		return strings.Contains(m.NewBody, "Edited and approved by "+e.approver)
	})
}

// TestRealHomeserverRejectByReply: "reject: <reason>" ends the run rejected
// with the reason as feedback.
func TestRealHomeserverRejectByReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.say(e.alice, "!ops deploy api 1.2.3", nil)
	card := e.waitMessage("the card", func(m roomMessage) bool { return m.Content.Card != nil })
	e.say(e.bob, "> <@opsbot:localhost> Approval needed\n\nreject: not during the freeze",
		map[string]any{"m.relates_to": map[string]any{"m.in_reply_to": map[string]any{"event_id": string(card.ID)}}})
	e.h.WaitRun(e.runs()[0].ID, core.RunRejected)
	e.waitMessage("the card edited", func(m roomMessage) bool {
		return strings.Contains(m.NewBody, "Rejected by "+e.approver) && strings.Contains(m.NewBody, "not during the freeze")
	})
}

// TestRealHomeserverMentionAndStranger: a mention addresses the bot; a
// stranger (not among the requesters) gets a polite refusal and no run.
func TestRealHomeserverMentionAndStranger(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{requesters: []string{"matrix:@nobody:localhost"}})
	e.say(e.alice, string(e.bot.UserID)+": deploy api 1.2.3", nil)
	e.waitMessage("alice refused politely", func(m roomMessage) bool {
		return strings.Contains(m.Content.Body, "may not start runs here")
	})
	if runs := e.runs(); len(runs) != 0 {
		t.Errorf("a stranger started %d runs", len(runs))
	}
}

// TestRealHomeserverRestartLosesAndRepeatsNothing: a first start ignores
// the old timeline; a request sent while opsgate is down is handled after
// the restart (the position was stored), once.
func TestRealHomeserverRestartLosesAndRepeatsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, false)
	w.say(w.alice, "!ops deploy old 0.0.1", nil) // before opsgate ever ran
	e := newEnv(t, envOpts{world: w})
	// A marker after the first sync proves the loop read past the old
	// request without starting it.
	e.say(e.alice, "!ops help", nil)
	e.waitMessage("the help reply", func(m roomMessage) bool { return strings.Contains(m.Content.Body, "deploy") })
	if runs := e.runs(); len(runs) != 0 {
		t.Fatalf("old timeline started %d runs", len(runs))
	}
	e.stop()
	e.say(e.alice, "!ops deploy api 1.2.3", nil) // while down
	e.ad = e.newAdapter(e.h, e.h.Store)
	e.start()
	e.h.Eventually("the request sent while down to start a run", func() bool { return len(e.runs()) == 1 })
	e.waitMessage("its card", func(m roomMessage) bool { return m.Content.Card != nil })
	if runs := e.runs(); len(runs) != 1 {
		t.Errorf("runs = %d, want exactly one", len(runs))
	}
}

// TestRealHomeserverEncryptedRoomRefused: an encrypted room gets one
// notice naming it, and nothing in it starts a run. The bot also sits in
// a plain room, whose later "!ops help" answered proves the loop read past
// the encrypted room's request.
func TestRealHomeserverEncryptedRoomRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, true)
	plain := newWorld(t, false)
	e := newEnv(t, envOpts{world: w, cfg: func(c *Config) { c.Rooms = append(c.Rooms, string(plain.room)) }, noRun: true})
	plain.join(t, e.bot)
	e.start()
	if _, err := e.alice.SendMessageEvent(context.Background(), e.room, eventType("m.room.encrypted"),
		map[string]any{"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEnAC", "sender_key": "k", "session_id": "s", "device_id": "D"}); err != nil {
		t.Fatal(err)
	}
	e.waitMessage("the encrypted-room notice", func(m roomMessage) bool {
		return strings.Contains(m.Content.Body, string(e.room)) && strings.Contains(m.Content.Body, "end-to-end encrypted")
	})
	e.say(e.alice, "!ops deploy api 1.2.3", nil)
	plain.say(plain.alice, "!ops help", nil)
	pe := &env{world: plain, t: t, bot: e.bot, h: e.h}
	pe.waitMessage("an answer in the plain room", func(m roomMessage) bool { return m.Content.Body != "" })
	if runs := e.runs(); len(runs) != 0 {
		t.Errorf("encrypted room started %d runs", len(runs))
	}
	notices := 0
	for _, m := range e.messages() {
		if m.Sender == e.bot.UserID && m.Type == "m.room.message" {
			notices++
		}
	}
	if notices != 1 {
		t.Errorf("bot posted %d messages in the encrypted room, want the one notice", notices)
	}
}

// TestRealHomeserverSendIsIdempotent: the same outbox chunk sent twice is
// one event (the transaction id), as after a lost response.
func TestRealHomeserverSendIsIdempotent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{noRun: true})
	root := e.say(e.alice, "hello", nil)
	m := core.Outbound{Key: "outbox-1/0", Kind: core.KindReply, Text: "hi <b>there</b>",
		Thread: core.Thread{Channel: ChannelName, Key: threadKey{Room: e.room, Root: root}.String()}}
	r1, err := e.ad.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := e.ad.Send(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if r1 != r2 {
		t.Errorf("two sends of one chunk gave %v and %v, want one event", r1, r2)
	}
	got := 0
	// The homeserver serves a sent event to readers a moment later.
	e.h.Eventually("the reply in the room", func() bool {
		got = 0
		for _, msg := range e.messages() {
			if msg.Sender == e.bot.UserID && strings.Contains(msg.Content.Body, "hi there") {
				got++
			}
		}
		return got > 0
	})
	if got != 1 {
		t.Errorf("room holds %d copies, want 1", got)
	}
	_ = id.EventID("")
}
