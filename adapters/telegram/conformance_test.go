package telegram

import (
	"encoding/json"
	"time"

	"fmt"
	"github.com/opsgate/opsgate/core/chunk"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
		New: func(t *testing.T) (*adaptertest.Harness, adaptertest.Fake) {
			// Fast pacing: Telegram's real 20/min per group would make
			// the long-reply case take ~20 s; the pipeline's pacing has
			// its own tests, and TestPublishedPacing pins our rates.
			e := newEnv(t, envOpts{})
			return e.h, received{e.fake}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: "-100200/5/77"},
		Requester: "telegram:7",
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
