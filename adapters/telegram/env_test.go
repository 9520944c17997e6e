package telegram

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/telegram/internal/faketelegram"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/internal/testkit"
)

const (
	testToken  = "123456:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
	testBotID  = 123456
	testBot    = "opsbot"
	testSecret = "s3cret-webhook_token"
	approverID = 42 // telegram:42 may decide
	requester  = 7
	outsider   = 99
	groupChat  = int64(-1001234567890)
	topicID    = int64(5)
)

// env is one adapter wired to the real engine and delivery pipeline (the
// adaptertest harness) and to a fake Bot API.
type env struct {
	t    *testing.T
	h    *adaptertest.Harness
	fake *faketelegram.Server
	ad   *Adapter
	logs *testkit.LogBuffer
	next int64 // next message id the tests give incoming messages
	upd  int64
}

type envOpts struct {
	// base is the harness's options as a case asked for them; the env
	// adds the platform and its approvers.
	base adaptertest.HarnessOptions
	mode string
	sink func(core.Sink) core.Sink // wraps the engine as the adapter's sink
	pace bool                      // keep Telegram's real pacing (slow)
	ttl  time.Duration             // approvals' time to live (harness default if 0)
	// harness adjusts the harness's options (agents, tools, pacing).
	harness func(*adaptertest.HarnessOptions)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, fake: faketelegram.New(testToken, testBot), logs: &testkit.LogBuffer{}, next: 500, upd: 9000}
	t.Cleanup(e.fake.Close)
	if o.mode == "" {
		o.mode = ModeWebhook
	}
	ho := o.base
	ho.Approvers, ho.ApprovalTTL = []string{"telegram:42", "console:admin"}, o.ttl
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		var sink core.Sink = h.Engine
		if o.sink != nil {
			sink = o.sink(h.Engine)
		}
		ad, err := New(Config{
			BotToken: testToken, Mode: o.mode, WebhookSecret: testSecret,
			PublicURL: "https://ops.example.test", APIURL: e.fake.APIURL(), PollTimeout: time.Second,
		}, Deps{Sink: sink, Cards: h.Engine, Logger: slog.New(slog.NewTextHandler(e.logs, nil))})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e.ad = ad
		adapters.Store(h, ad)
		if o.pace {
			return ad
		}
		// Real pacing makes every message to one chat wait a second;
		// these tests are about behaviour, so they go faster.
		fast := delivery.Rate{Every: time.Millisecond, Burst: 10}
		return delivery.WithPacing(ad, delivery.Pacing{Conversation: fast, Group: fast, Account: fast})
	}
	if o.harness != nil {
		o.harness(&ho)
	}
	e.h = adaptertest.NewHarness(t, ho)
	t.Cleanup(func() {
		if strings.Contains(e.logs.String(), testToken) {
			t.Errorf("the bot token leaked into the logs:\n%s", e.logs.String())
		}
	})
	return e
}

// adapters maps each harness to its adapter, for suites that hand tests
// only the harness.
var adapters sync.Map

// run starts Run in the background, stopped at cleanup (or by the returned
// cancel).
func (e *env) run() (cancel func()) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.ad.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	cancel = func() { once.Do(func() { stop(); <-done }) }
	e.t.Cleanup(cancel)
	return cancel
}

// post delivers an update to the webhook handler with the right secret.
func (e *env) post(update map[string]any) *httptest.ResponseRecorder {
	e.t.Helper()
	b, err := json.Marshal(update)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.postRaw(b, testSecret)
}

func (e *env) postRaw(body []byte, secret string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, WebhookPath, bytes.NewReader(body))
	if secret != "" {
		r.Header.Set(secretHeader, secret)
	}
	w := httptest.NewRecorder()
	e.ad.WebhookHandler().ServeHTTP(w, r)
	return w
}

func (e *env) mustPost(update map[string]any) {
	e.t.Helper()
	if w := e.post(update); w.Code != http.StatusOK {
		e.t.Fatalf("webhook answered %d: %s", w.Code, w.Body.String())
	}
}

func user(id int64) map[string]any {
	return map[string]any{"id": id, "is_bot": false, "first_name": "User", "last_name": strings.Repeat("x", int(id%3)), "language_code": "en"}
}

func chatObj(chat int64) map[string]any {
	if chat < 0 {
		return map[string]any{"id": chat, "title": "SRE", "type": "supergroup", "is_forum": true}
	}
	return map[string]any{"id": chat, "first_name": "User", "type": "private"}
}

// msg is a message update from user from in chat (in topic, if > 0).
func (e *env) msg(chat, from, topic int64, text string) map[string]any {
	e.next++
	e.upd++
	m := map[string]any{"message_id": e.next, "from": user(from), "chat": chatObj(chat), "date": time.Now().Unix(), "text": text}
	if strings.HasPrefix(text, "/") {
		n := len(strings.Fields(text)[0])
		m["entities"] = []map[string]any{{"type": "bot_command", "offset": 0, "length": n}}
	}
	if topic > 0 {
		m["message_thread_id"] = topic
		m["is_topic_message"] = true
	}
	return map[string]any{"update_id": e.upd, "message": m}
}

// botMsg is how a message the bot sent appears inside an update: its
// entities parsed away, as Telegram quotes it.
func botMsg(m faketelegram.Message) map[string]any {
	out := map[string]any{"message_id": m.ID, "chat": chatObj(m.Chat), "date": time.Now().Unix(), "text": visible(m.Text),
		"from": map[string]any{"id": testBotID, "is_bot": true, "first_name": "Ops", "username": testBot}}
	if m.ThreadID > 0 {
		out["message_thread_id"] = m.ThreadID
		out["is_topic_message"] = true
	}
	return out
}

// reply is a message from user from answering the bot's message to.
func (e *env) reply(to faketelegram.Message, from int64, text string) map[string]any {
	u := e.msg(to.Chat, from, to.ThreadID, text)
	u["message"].(map[string]any)["reply_to_message"] = botMsg(to)
	return u
}

// press is a callback query: user from pressed the button with data on
// message m.
func (e *env) press(m faketelegram.Message, from int64, data string) (map[string]any, string) {
	e.upd++
	id := "cb" + time.Now().Format("150405.000000000") + string(rune('a'+e.upd%26))
	return map[string]any{"update_id": e.upd, "callback_query": map[string]any{
		"id": id, "from": user(from), "message": botMsg(m), "chat_instance": "-7", "data": data,
	}}, id
}

var tagRE = regexp.MustCompile(`<[^>]*>`)

// visible is the text a person reads: tags parsed away, entities decoded.
func visible(h string) string { return html.UnescapeString(tagRE.ReplaceAllString(h, "")) }

// waitMessage waits for a message in chat for which ok holds.
func (e *env) waitMessage(chat int64, what string, ok func(faketelegram.Message) bool) faketelegram.Message {
	e.t.Helper()
	var found faketelegram.Message
	e.h.Eventually(what, func() bool {
		for _, m := range e.fake.Messages(chat) {
			if ok(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

func (e *env) waitCard(chat int64) faketelegram.Message {
	e.t.Helper()
	return e.waitMessage(chat, "an approval card", func(m faketelegram.Message) bool {
		return strings.Contains(m.Text, "Approval needed") || strings.Contains(m.Text, "Approval ")
	})
}

// buttons returns a card's callback_data by button text prefix.
func buttons(t *testing.T, m faketelegram.Message) map[string]string {
	t.Helper()
	var kb inlineKeyboard
	if m.Markup == "" {
		return nil
	}
	if err := json.Unmarshal([]byte(m.Markup), &kb); err != nil {
		t.Fatalf("markup %q: %v", m.Markup, err)
	}
	out := map[string]string{}
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			out[strings.Fields(b.Text)[1]] = b.CallbackData
		}
	}
	return out
}

func (e *env) waitAnswer(id string) string {
	e.t.Helper()
	var a string
	e.h.Eventually("callback "+id+" answered", func() bool {
		var ok bool
		a, ok = e.fake.Answer(id)
		return ok
	})
	return a
}

var _ io.Writer = (*testkit.LogBuffer)(nil)
