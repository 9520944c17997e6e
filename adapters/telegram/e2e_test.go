package telegram

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
)

// askDeploy sends "/deploy@opsbot api 1.2.3" in the forum topic and returns
// the card it produced and the command message's id.
func (e *env) askDeploy() (faketelegram.Message, int64) {
	e.t.Helper()
	u := e.msg(groupChat, requester, topicID, "/deploy@opsbot api 1.2.3")
	e.mustPost(u)
	card := e.waitCard(groupChat)
	return card, u["message"].(map[string]any)["message_id"].(int64)
}

func TestCommandApproveRunsToolAndEditsCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, origin := e.askDeploy()

	// The card answers the command, in its forum topic, self-contained.
	if card.ThreadID != topicID || card.ReplyTo != origin {
		t.Errorf("card thread=%d reply_to=%d, want topic %d replying to %d", card.ThreadID, card.ReplyTo, topicID, origin)
	}
	for _, want := range []string{"deploy", "service", "api", "version", "1.2.3", "high_impact", "telegram:7", "telegram:42", "Expires", "<pre>", "Dry run"} {
		if !strings.Contains(card.Text, want) {
			t.Errorf("card lacks %q:\n%s", want, card.Text)
		}
	}
	bs := buttons(t, card)
	if len(bs) != 3 {
		t.Fatalf("card buttons = %v, want Approve, Reject, Edit", bs)
	}
	for name, data := range bs {
		if len(data) > MaxCallbackData {
			t.Errorf("%s callback_data is %d bytes", name, len(data))
		}
	}

	u, cb := e.press(card, approverID, bs["Approve"])
	e.mustPost(u)
	if a := e.waitAnswer(cb); !strings.Contains(a, "Approved") {
		t.Errorf("callback answer = %q, want Approved", a)
	}
	e.h.Eventually("deploy dispatched", func() bool { return len(e.h.Dispatches()) == 1 })
	if c := e.h.Dispatches()[0]; c.Args["service"] != "api" || c.Args["version"] != "1.2.3" {
		t.Errorf("dispatched %v", c.Args)
	}
	res := e.waitMessage(groupChat, "the result reply", func(m faketelegram.Message) bool {
		return strings.Contains(m.Text, "deployed api 1.2.3")
	})
	if res.ThreadID != topicID || res.ReplyTo != origin {
		t.Errorf("result thread=%d reply_to=%d, want topic %d replying to %d", res.ThreadID, res.ReplyTo, topicID, origin)
	}
	e.h.Eventually("card edited, keyboard removed", func() bool {
		m, _ := e.fake.Message(groupChat, card.ID)
		return m.Edits > 0 && m.Markup == "" && strings.Contains(visible(m.Text), "Approved by telegram:42")
	})

	// A second press of the now stale button is answered and changes nothing.
	u2, cb2 := e.press(card, approverID, bs["Approve"])
	e.mustPost(u2)
	if a := e.waitAnswer(cb2); !strings.Contains(strings.ToLower(a), "already") {
		t.Errorf("stale press answer = %q, want already decided", a)
	}
	if n := len(e.h.Dispatches()); n != 1 {
		t.Errorf("dispatches = %d after a stale press, want 1", n)
	}
}

func TestRejectWithFeedbackThroughForceReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, _ := e.askDeploy()
	u, cb := e.press(card, approverID, buttons(t, card)["Reject"])
	e.mustPost(u)
	if a := e.waitAnswer(cb); !strings.Contains(a, "feedback") {
		t.Errorf("answer = %q", a)
	}
	prompt := e.waitMessage(groupChat, "reject prompt", func(m faketelegram.Message) bool {
		return strings.Contains(m.Markup, "force_reply")
	})
	if prompt.ThreadID != topicID || prompt.ReplyTo != card.ID || !strings.Contains(prompt.Text, "tg://user?id=42") {
		t.Errorf("prompt thread=%d reply_to=%d text=%q", prompt.ThreadID, prompt.ReplyTo, prompt.Text)
	}
	e.mustPost(e.reply(prompt, approverID, "not during the freeze"))
	e.h.Eventually("card shows the rejection", func() bool {
		m, _ := e.fake.Message(groupChat, card.ID)
		return m.Markup == "" && strings.Contains(visible(m.Text), "Rejected by telegram:42") && strings.Contains(m.Text, "not during the freeze")
	})
	if n := len(e.h.Dispatches()); n != 0 {
		t.Errorf("dispatches = %d after a rejection", n)
	}
}

func TestEditInvalidThenValidThroughForceReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, _ := e.askDeploy()
	u, cb := e.press(card, approverID, buttons(t, card)["Edit"])
	e.mustPost(u)
	e.waitAnswer(cb)
	prompt := e.waitMessage(groupChat, "edit prompt", func(m faketelegram.Message) bool {
		return strings.Contains(m.Markup, "force_reply")
	})
	if !strings.Contains(prompt.Text, "service=api\nversion=1.2.3") {
		t.Errorf("edit prompt does not show the current arguments:\n%s", prompt.Text)
	}

	// Invalid for the schema: the validator's message and a new prompt.
	e.mustPost(e.reply(prompt, approverID, "service=Not Valid!\nversion=2.0.0"))
	again := e.waitMessage(groupChat, "second prompt", func(m faketelegram.Message) bool {
		return m.ID != prompt.ID && strings.Contains(m.Markup, "force_reply")
	})
	if !strings.Contains(again.Text, "not accepted") || !strings.Contains(again.Text, "service") {
		t.Errorf("second prompt lacks the validator's message:\n%s", again.Text)
	}
	// Not even JSON: refused before the engine, with a new prompt.
	e.mustPost(e.reply(again, approverID, `{"service": "web",`))
	third := e.waitMessage(groupChat, "third prompt", func(m faketelegram.Message) bool {
		return m.ID != prompt.ID && m.ID != again.ID && strings.Contains(m.Markup, "force_reply")
	})
	if !strings.Contains(third.Text, "JSON") {
		t.Errorf("third prompt: %s", third.Text)
	}
	if n := len(e.h.Dispatches()); n != 0 {
		t.Fatalf("invalid edits dispatched %d calls", n)
	}

	e.mustPost(e.reply(third, approverID, `{"service": "web", "version": "2.0.0"}`))
	e.h.Eventually("edited call dispatched", func() bool { return len(e.h.Dispatches()) == 1 })
	if c := e.h.Dispatches()[0]; c.Args["service"] != "web" || c.Args["version"] != "2.0.0" {
		t.Errorf("dispatched %v, want the edited arguments", c.Args)
	}
	e.h.Eventually("card shows the edit", func() bool {
		m, _ := e.fake.Message(groupChat, card.ID)
		return m.Markup == "" && strings.Contains(visible(m.Text), "Edited and approved by telegram:42")
	})
}

func TestForgedAndUnauthorizedButtonsAreRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, _ := e.askDeploy()
	bs := buttons(t, card)
	before := e.h.Counts()

	forged := []string{
		"a" + bs["Approve"][1:len(bs["Approve"])-2] + "AA",            // tag altered
		"a" + bs["Reject"][1:],                                        // action altered
		strings.Replace(bs["Approve"], bs["Approve"][2:6], "AAAA", 1), // approval altered
		"totally-not-ours",
	}
	for _, data := range forged {
		u, cb := e.press(card, approverID, data)
		e.mustPost(u)
		if a := e.waitAnswer(cb); !strings.Contains(a, "not valid") {
			t.Errorf("forged %q answered %q", data, a)
		}
	}
	e.h.Unchanged(t, before)

	// Someone who may not decide: Approve reaches the engine and is refused
	// (and audited); Reject is refused before any prompt.
	u, cb := e.press(card, outsider, bs["Approve"])
	e.mustPost(u)
	if a := e.waitAnswer(cb); !strings.Contains(a, "may not decide") {
		t.Errorf("outsider approve answered %q", a)
	}
	u, cb = e.press(card, outsider, bs["Reject"])
	e.mustPost(u)
	if a := e.waitAnswer(cb); !strings.Contains(a, "may not decide") {
		t.Errorf("outsider reject answered %q", a)
	}
	for _, m := range e.fake.Messages(groupChat) {
		if strings.Contains(m.Markup, "force_reply") {
			t.Errorf("a prompt was sent to an outsider: %s", m.Text)
		}
	}
	a := e.h.WaitApprovalPending(e.runID())
	if len(a.Decisions) != 0 {
		t.Errorf("decisions = %+v, want none", a.Decisions)
	}
	// Both refused presses are audited, the Reject included.
	actions := e.h.RefusedActions(ChannelName + ":" + strconv.FormatInt(outsider, 10))
	if actions["approve"] == 0 || actions["reject"] == 0 {
		t.Errorf("audited refusals = %v, want approve and reject", actions)
	}
}

// runID returns the one run in the store.
func (e *env) runID() string {
	e.t.Helper()
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 10})
	if err != nil || len(runs) != 1 {
		e.t.Fatalf("runs = %d (%v), want 1", len(runs), err)
	}
	return runs[0].ID
}

func TestDecisionFromAPIEditsTelegramCard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	card, _ := e.askDeploy()
	a := e.h.WaitApprovalPending(e.runID())
	if _, err := e.h.Decide("console:admin", a.ID, "approve", ""); err != nil {
		t.Fatal(err)
	}
	e.h.Eventually("card edited after a console decision", func() bool {
		m, _ := e.fake.Message(groupChat, card.ID)
		return m.Markup == "" && strings.Contains(visible(m.Text), "Approved by console:admin")
	})
	e.h.Eventually("deploy ran", func() bool { return len(e.h.Dispatches()) == 1 })
}

func TestWebhookSameUpdateTwiceIsOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	u := e.msg(requester, requester, 0, "/ops deploy api 1.2.3")
	e.mustPost(u)
	e.mustPost(u)
	e.waitCard(requester)
	if c := e.h.Counts(); c.Runs != 1 {
		t.Errorf("runs = %d, want 1", c.Runs)
	}
}

func TestWebhookRefusesBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	good := `{"update_id": 1, "message": {"message_id": 1, "from": {"id": 7, "is_bot": false, "first_name": "A"}, "chat": {"id": 7, "type": "private"}, "date": 1, "text": "deploy api 1"}}`
	for name, c := range map[string]struct {
		body, secret string
		want         int
	}{
		"WrongSecret":   {good, "wrong", http.StatusUnauthorized},
		"MissingSecret": {good, "", http.StatusUnauthorized},
		"SecretPrefix":  {good, testSecret[:5], http.StatusUnauthorized},
		"Malformed":     {`{"update_id": `, testSecret, http.StatusBadRequest},
		"NoUpdateID":    {`{"message": {}}`, testSecret, http.StatusBadRequest},
		"NoChat":        {`{"update_id": 2, "message": {"message_id": 1, "text": "x"}}`, testSecret, http.StatusBadRequest},
		"Oversized":     {`{"update_id": 3, "x": "` + strings.Repeat("a", 2<<20) + `"}`, testSecret, http.StatusRequestEntityTooLarge},
	} {
		if w := e.postRaw([]byte(c.body), c.secret); w.Code != c.want {
			t.Errorf("%s: status %d, want %d", name, w.Code, c.want)
		}
	}
	e.h.StoreEmpty(t)
}

func TestWebhookModeRegistersWebhookWithSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.run()
	e.h.Eventually("setWebhook", func() bool { return e.fake.Webhook() != nil })
	w := e.fake.Webhook()
	if w["url"] != "https://ops.example.test/telegram/webhook" || w["secret_token"] != testSecret {
		t.Errorf("setWebhook %v", w)
	}
	if !strings.Contains(w["allowed_updates"], "callback_query") {
		t.Errorf("allowed_updates = %q", w["allowed_updates"])
	}
}

func TestGroupAddressing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	// Another bot's command and plain group chatter record nothing.
	e.mustPost(e.msg(groupChat, requester, topicID, "/deploy@otherbot api 1.2.3"))
	e.mustPost(e.msg(groupChat, requester, topicID, "deploy api 1.2.3"))
	e.h.StoreEmpty(t)
	// A mention works like a command.
	e.mustPost(e.msg(groupChat, requester, 0, "@opsbot deploy api 1.2.3"))
	card := e.waitCard(groupChat)
	if card.ThreadID != 0 {
		t.Errorf("card outside a topic got message_thread_id %d", card.ThreadID)
	}
}
