package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
)

// received adapts the fake to adaptertest.Fake: every post and update, as
// the thread it landed in.
type received struct{ f *fakeslack.Server }

func (r received) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, m := range r.f.Log() {
		root := m.ThreadTS
		if root == "" {
			root = m.TS
		}
		out = append(out, adaptertest.Message{
			Thread: core.Thread{Channel: "slack", Key: "T1/" + m.Channel + "/" + root},
			ID:     m.TS, EditOf: m.EditOf, Text: fakeslack.VisibleText(m),
		})
	}
	return out
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := setup(t, func(_ *Config, ho *adaptertest.HarnessOptions) {
				approvers := ho.Approvers
				*ho = o
				ho.Approvers = approvers
			})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e.fake}
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			return chatDriver{e}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapForms: "a question answered in words is answered by a reply in its thread",
			adaptertest.CapDirect: "in a direct message each message starts a thread of its own (Slack's habit); " +
				"a reply in the thread continues the conversation",
		},
		Thread:    thread1,
		Requester: requester,
		Approver:  approver,
		Inert: func(input, rendered string) error {
			// Slack acts on <…> (links, mentions, <!channel>); with every
			// < and > entity-escaped nothing in the text can become live.
			if strings.ContainsAny(rendered, "<>") {
				return fmt.Errorf("live angle brackets in %q", rendered)
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			badInput(t, e)
		},
	})
}

// chatDriver speaks to the adapter as Slack does: signed Events API
// callbacks replayed from testdata (an app_mention, a message in the bot's
// thread) and block_actions for its buttons.
type chatDriver struct{ e *env }

var _ adaptertest.Presser = chatDriver{}

func slackUser(actor string) string { return strings.TrimPrefix(actor, "slack:") }

// ts is a fresh Slack timestamp.
func (d chatDriver) ts() string { return fmt.Sprintf("1800000000.%06d", d.e.seq.Add(1)) }

func (d chatDriver) Say(t *testing.T, actor, text string) {
	ts := d.ts()
	body := fill(t, "event_app_mention.json", nil)
	body = bytes.Replace(body, []byte(`"text": "<@UBOT> deploy api 1.2.3"`), []byte(`"text": `+strconv.Quote("<@UBOT> "+text)), 1)
	body = bytes.ReplaceAll(body, []byte("1700000100.000200"), []byte(ts))
	body = bytes.Replace(body, []byte(`"user": "UREQ"`), []byte(`"user": "`+slackUser(actor)+`"`), 1)
	body = bytes.Replace(body, []byte(`"event_id": "Ev0MENTION1"`), []byte(`"event_id": "EvSay`+strings.ReplaceAll(ts, ".", "")+`"`), 1)
	status(t, d.e.event(body, nil), http.StatusOK)
}

func (d chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	root := to.Thread.Key[strings.LastIndex(to.Thread.Key, "/")+1:]
	ts := d.ts()
	body := fill(t, "event_message_thread.json", nil)
	body = bytes.Replace(body, []byte(`"text": "deploy api 1.2.4"`), []byte(`"text": `+strconv.Quote(text)), 1)
	body = bytes.ReplaceAll(body, []byte("1700000200.000300"), []byte(ts))
	body = bytes.Replace(body, []byte(`"thread_ts": "1700000000.000001"`), []byte(`"thread_ts": "`+root+`"`), 1)
	body = bytes.Replace(body, []byte(`"user": "UREQ"`), []byte(`"user": "`+slackUser(actor)+`"`), 1)
	body = bytes.Replace(body, []byte(`"event_id": "Ev0THREAD1"`), []byte(`"event_id": "EvReply`+strings.ReplaceAll(ts, ".", "")+`"`), 1)
	status(t, d.e.event(body, nil), http.StatusOK)
}

// Press presses the button of on whose label contains label.
func (d chatDriver) Press(t *testing.T, actor string, on adaptertest.Message, label string) {
	var msg *fakeslack.Message
	for _, m := range d.e.fake.Log() {
		if m.TS == on.ID && m.EditOf == "" {
			msg = &m
		}
	}
	if msg == nil {
		t.Fatalf("the fake has no message %s", on.ID)
	}
	var blocks []struct {
		Elements []struct {
			ActionID string          `json:"action_id"`
			Value    string          `json:"value"`
			Text     json.RawMessage `json:"text"` // a text object on buttons
		} `json:"elements"`
	}
	if err := json.Unmarshal(msg.Blocks, &blocks); err != nil {
		t.Fatalf("blocks of %s: %v", on.ID, err)
	}
	for _, b := range blocks {
		for _, el := range b.Elements {
			var text struct{ Text string }
			if el.ActionID == "" || json.Unmarshal(el.Text, &text) != nil || !strings.Contains(text.Text, label) {
				continue
			}
			p := fill(t, "block_actions.json", map[string]string{
				"CARD_TS": msg.TS, "ROOT_TS": msg.ThreadTS, "TRIGGER": fmt.Sprintf("press.%d", d.e.seq.Add(1)),
				"ACTION": el.ActionID, "VALUE": el.Value,
			})
			p = bytes.ReplaceAll(p, []byte(`"id": "UAPP"`), []byte(`"id": "`+slackUser(actor)+`"`))
			status(t, d.e.interact(p), http.StatusOK)
			return
		}
	}
	t.Fatalf("message %s has no button %q", on.ID, label)
}
