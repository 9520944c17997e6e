package telegram

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/chunk"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
)

// received shows the fake's log the way adaptertest reads a platform:
// threads as "<chat>/<topic>/<replied-to message>", cards with their
// button labels.
type received struct{ f *faketelegram.Server }

func (r received) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, e := range r.f.Log() {
		m := adaptertest.Message{
			Thread: core.Thread{Channel: ChannelName, Key: threadKey{Chat: e.Chat, Topic: e.ThreadID, Msg: e.ReplyTo}.String()},
			ID:     messageRef(e.Chat, e.ID),
			Text:   visible(e.Text),
		}
		if e.Method != "sendMessage" {
			m.EditOf = m.ID
		}
		var kb inlineKeyboard
		if json.Unmarshal([]byte(e.Markup), &kb) == nil {
			for _, row := range kb.InlineKeyboard {
				for _, b := range row {
					m.Text += "\n[" + b.Text + "]"
				}
			}
		}
		out = append(out, m)
	}
	return out
}

func TestConformance(t *testing.T) {
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			// Fast pacing: Telegram's real 20/min per group would make
			// the long-reply case take ~20 s; the pipeline's pacing has
			// its own tests, and TestPublishedPacing pins our rates.
			e := newEnv(t, envOpts{base: o})
			envs.Store(e.h, e)
			return e.h, received{e.fake}
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			e, _ := envs.Load(h)
			return chatDriver{e.(*env)}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapForms: "Telegram has no forms: a question answered in words is answered by replying to it",
		},
		Thread:    core.Thread{Channel: ChannelName, Key: "-100200/5/77"},
		Requester: "telegram:7",
		Approver:  "telegram:42",
		Inert: func(input, rendered string) error {
			if err := faketelegram.CheckHTML(rendered); err != nil && strings.TrimSpace(visible(rendered)) != "" {
				return fmt.Errorf("Telegram would refuse it: %v", err)
			}
			for _, live := range []string{"<script", "<a href=\"https://evil", "href=\"javascript", "<b>bold</b>"} {
				if strings.Contains(rendered, live) {
					return fmt.Errorf("live markup %q", live)
				}
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			ad := adapterOf(t, h)
			good := `{"update_id":1,"message":{"message_id":1,"from":{"id":7,"is_bot":false,"first_name":"A"},"chat":{"id":7,"type":"private"},"date":1,"text":"deploy api 1.2.3"}}`
			for _, c := range []struct {
				body, secret string
				want         int
			}{
				{good, "forged", http.StatusUnauthorized},
				{good, "", http.StatusUnauthorized},
				{`{"update_id":`, testSecret, http.StatusBadRequest},
				{`[]`, testSecret, http.StatusBadRequest},
			} {
				r, _ := http.NewRequest(http.MethodPost, WebhookPath, strings.NewReader(c.body))
				if c.secret != "" {
					r.Header.Set(secretHeader, c.secret)
				}
				w := newRecorder()
				ad.WebhookHandler().ServeHTTP(w, r)
				if w.Code != c.want {
					t.Errorf("body %.30q secret %q: %d, want %d", c.body, c.secret, w.Code, c.want)
				}
			}
		},
	})
}

func newRecorder() *httptest.ResponseRecorder { return httptest.NewRecorder() }

// envs maps each conformance harness to its env, for the Chat driver.
var envs sync.Map

// chatDriver speaks to the adapter as Telegram does: replayed updates from
// testdata (a mention in a forum topic, a reply to the bot, a private
// message, a button press) with the ids, sender and text of the case.
type chatDriver struct{ e *env }

var (
	_ adaptertest.Presser = chatDriver{}
	_ adaptertest.Direct  = chatDriver{}
)

// replay loads a testdata update, gives it a fresh update id, lets edit
// change its message (or callback query), and posts it to the webhook.
func (d chatDriver) replay(t *testing.T, file string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var u map[string]any
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	d.e.upd++
	d.e.next++
	u["update_id"] = d.e.upd
	if m, ok := u["message"].(map[string]any); ok {
		m["message_id"], m["date"] = d.e.next, time.Now().Unix()
		edit(m)
	} else {
		edit(u["callback_query"].(map[string]any))
	}
	d.e.mustPost(u)
}

func userID(t *testing.T, actor string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(strings.TrimPrefix(actor, ChannelName+":"), 10, 64)
	if err != nil {
		t.Fatalf("actor %q: %v", actor, err)
	}
	return id
}

// botMessage is the fake's record of a message the bot sent.
func (d chatDriver) botMessage(t *testing.T, m adaptertest.Message) faketelegram.Message {
	t.Helper()
	chat, id, err := parseMessageRef(m.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, fm := range d.e.fake.Messages(chat) {
		if fm.ID == id {
			return fm
		}
	}
	t.Fatalf("the fake has no message %s", m.ID)
	return faketelegram.Message{}
}

// Say mentions the bot in the forum topic of the conformance group.
func (d chatDriver) Say(t *testing.T, actor, text string) {
	d.replay(t, "group_mention_topic.json", func(m map[string]any) {
		m["from"] = user(userID(t, actor))
		m["text"] = "@" + testBot + " " + text
	})
}

// Reply replies to the bot's message to, in its chat and topic.
func (d chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	bm := d.botMessage(t, to)
	d.replay(t, "reply_to_bot.json", func(m map[string]any) {
		m["from"], m["text"], m["chat"] = user(userID(t, actor)), text, chatObj(bm.Chat)
		m["reply_to_message"] = botMsg(bm)
		if bm.ThreadID > 0 {
			m["message_thread_id"], m["is_topic_message"] = bm.ThreadID, true
		} else {
			delete(m, "message_thread_id")
			delete(m, "is_topic_message")
		}
	})
}

// SayDirect writes to the bot in the actor's private chat.
func (d chatDriver) SayDirect(t *testing.T, actor, text string) {
	id := userID(t, actor)
	d.replay(t, "private_text.json", func(m map[string]any) {
		m["from"], m["chat"], m["text"] = user(id), chatObj(id), text
	})
}

// Press presses the button of on whose text contains label and waits for
// the press to be answered.
func (d chatDriver) Press(t *testing.T, actor string, on adaptertest.Message, label string) {
	bm := d.botMessage(t, on)
	var kb inlineKeyboard
	if err := json.Unmarshal([]byte(bm.Markup), &kb); err != nil {
		t.Fatalf("message %s has no keyboard (%q): %v", on.ID, bm.Markup, err)
	}
	data := ""
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if strings.Contains(b.Text, label) && data == "" {
				data = b.CallbackData
			}
		}
	}
	if data == "" {
		t.Fatalf("message %s has no button %q: %s", on.ID, label, bm.Markup)
	}
	id := fmt.Sprintf("cb-%d", d.e.upd+1)
	d.replay(t, "callback_query.json", func(q map[string]any) {
		q["id"], q["from"], q["message"], q["data"] = id, user(userID(t, actor)), botMsg(bm), data
	})
	if a := d.e.waitAnswer(id); strings.HasPrefix(a, "⛔") || strings.HasPrefix(a, "⚠️") {
		t.Fatalf("press %q answered %q", label, a)
	}
}

// adapterOf finds the Adapter behind the harness's (possibly re-paced)
// platform.
func adapterOf(t *testing.T, h *adaptertest.Harness) *Adapter {
	t.Helper()
	if ad, ok := h.Platform.(*Adapter); ok {
		return ad
	}
	ad, ok := adapters.Load(h)
	if !ok {
		t.Fatalf("no adapter recorded for harness (platform %T)", h.Platform)
	}
	return ad.(*Adapter)
}

func TestPublishedPacing(t *testing.T) {
	t.Parallel()
	ad, _, _ := newSender(t)
	p := ad.Pacing()
	if p.Conversation.Every != time.Second || p.Group.Every != 3*time.Second || p.Account.Every != time.Second/30 {
		t.Errorf("pacing %+v, want 1/s per chat, 20/min per group, 30/s per bot", p)
	}
	if p.Conversation.Burst != 1 || p.Group.Burst != 1 || p.Account.Burst != 1 {
		t.Errorf("bursts %+v, want 1", p)
	}
	f := ad.Format()
	if f.Limit != 4096 || f.Unit != chunk.UTF16 || f.Syntax != chunk.HTML {
		t.Errorf("format %+v", f)
	}
}
