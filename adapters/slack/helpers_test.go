package slack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/slack/internal/fakeslack"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

const (
	testSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	testToken  = "xoxb-test-token"
	approver   = "slack:UAPP"
	requester  = "slack:UREQ"
)

// sign is the signature Slack sends for body at ts.
func sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// env is one adapter on a harness, a fake Slack, and an HTTP server with
// the adapter's handlers mounted as cmd would mount them.
type env struct {
	t    *testing.T
	h    *adaptertest.Harness
	fake *fakeslack.Server
	a    *Adapter
	srv  *httptest.Server
	seq  atomic.Int64
	cfg  Config // the adapter's configuration, to build a second one

}

type setupOpt func(*Config, *adaptertest.HarnessOptions)

func setup(t *testing.T, opts ...setupOpt) *env {
	t.Helper()
	return setupWith(t, nil, opts...)
}

// setupWith is setup with deps, when set, completing the adapter's Deps
// (e.g. a Store) from the harness before New.
func setupWith(t *testing.T, deps func(*adaptertest.Harness, *Deps), opts ...setupOpt) *env {
	t.Helper()
	e := &env{t: t, fake: fakeslack.New(t)}
	cfg := Config{BotToken: testToken, SigningSecret: testSecret, APIURL: e.fake.APIURL(),
		Conversation: delivery.Rate{Every: time.Millisecond, Burst: 50}}
	ho := adaptertest.HarnessOptions{Approvers: []string{approver}}
	for _, o := range opts {
		o(&cfg, &ho)
	}
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		d := Deps{Sink: h.Engine, Cards: h.Engine, Logger: slog.New(slog.DiscardHandler)}
		if deps != nil {
			deps(h, &d)
		}
		a, err := New(cfg, d)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e.a = a
		return a
	}
	e.cfg = cfg
	e.h = adaptertest.NewHarness(t, ho)
	mux := http.NewServeMux()
	for p, hd := range e.a.Routes() {
		mux.Handle(p, hd)
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

// signed posts body to path signed at ts (0: now) with secret.
func (e *env) signedAt(path, contentType string, body []byte, ts int64, secret string, hdr map[string]string) *http.Response {
	e.t.Helper()
	if ts == 0 {
		ts = time.Now().Unix()
	}
	return e.raw(path, contentType, body, map[string]string{
		"X-Slack-Request-Timestamp": strconv.FormatInt(ts, 10),
		"X-Slack-Signature":         sign(secret, ts, body),
	}, hdr)
}

func (e *env) raw(path, contentType string, body []byte, hdrs ...map[string]string) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	for _, h := range hdrs {
		for k, v := range h {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("POST %s: %v", path, err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	return res
}

func (e *env) event(body []byte, hdr map[string]string) *http.Response {
	return e.signedAt("/slack/events", "application/json", body, 0, testSecret, hdr)
}

// slash runs `/ops text` as user in channel C1 and returns the response.
func (e *env) slash(user, text string) *http.Response {
	v := url.Values{}
	for k, val := range map[string]string{
		"token": "x", "team_id": "T1", "team_domain": "example", "channel_id": "C1", "channel_name": "ops",
		"user_id": user, "user_name": strings.ToLower(user), "command": "/ops", "text": text,
		"api_app_id": "A0APP", "response_url": "https://hooks.slack.com/commands/T1/1/x",
		"trigger_id": fmt.Sprintf("trig.%d", e.seq.Add(1)),
	} {
		v.Set(k, val)
	}
	return e.signedAt("/slack/commands", "application/x-www-form-urlencoded", []byte(v.Encode()), 0, testSecret, nil)
}

// interact posts an interaction payload as Slack does: form field payload.
func (e *env) interact(payload []byte) *http.Response {
	body := []byte(url.Values{"payload": {string(payload)}}.Encode())
	return e.signedAt("/slack/interactivity", "application/x-www-form-urlencoded", body, 0, testSecret, nil)
}

// fill reads a testdata template and replaces {{KEY}} placeholders.
func fill(t *testing.T, name string, kv map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range kv {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	return []byte(s)
}

// click presses a card button as the approver UAPP.
func (e *env) click(card fakeslack.Message, action string) *http.Response {
	e.t.Helper()
	return e.clickAs("UAPP", card, action)
}

// clickAs presses a card button as userID, with the value read from the
// card message the fake holds.
func (e *env) clickAs(userID string, card fakeslack.Message, action string) *http.Response {
	e.t.Helper()
	p := fill(e.t, "block_actions.json", map[string]string{
		"CARD_TS": card.TS, "ROOT_TS": card.ThreadTS, "TRIGGER": fmt.Sprintf("click.%d", e.seq.Add(1)),
		"ACTION": action, "VALUE": buttonValueOf(e.t, card, action),
	})
	p = bytes.ReplaceAll(p, []byte(`"id": "UAPP"`), []byte(`"id": "`+userID+`"`))
	return e.interact(p)
}

// buttonValueOf finds the value of the button with action_id action in a
// message's blocks.
func buttonValueOf(t *testing.T, m fakeslack.Message, action string) string {
	t.Helper()
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(m.Blocks, &blocks); err != nil {
		t.Fatalf("card blocks: %v\n%s", err, m.Blocks)
	}
	for _, b := range blocks {
		for _, el := range b.Elements {
			if el.ActionID == action {
				return el.Value
			}
		}
	}
	t.Fatalf("no %s button on message %s", action, m.TS)
	return ""
}

func hasButtons(m fakeslack.Message) bool {
	return bytes.Contains(m.Blocks, []byte(`"opsgate:approve"`))
}

// rootOf returns the root message the slash command posted (the first
// message in C1 without a thread_ts after the n-th).
func (e *env) roots() []fakeslack.Message {
	var out []fakeslack.Message
	for _, m := range e.fake.Log() {
		if m.ThreadTS == "" && m.EditOf == "" {
			out = append(out, m)
		}
	}
	return out
}

// waitCard waits for a card (a message with buttons) in the thread rooted
// at rootTS and returns it.
func (e *env) waitCard(rootTS string) fakeslack.Message {
	e.t.Helper()
	var card fakeslack.Message
	e.h.Eventually("a card in thread "+rootTS, func() bool {
		for _, m := range e.fake.Thread("C1", rootTS) {
			if hasButtons(m) {
				card = m
				return true
			}
		}
		return false
	})
	return card
}

// runOf returns the run recorded for the thread rooted at rootTS.
func (e *env) runOf(rootTS string) *core.Run {
	e.t.Helper()
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, r := range runs {
		if strings.HasSuffix(r.Thread.Key, "/"+rootTS) {
			return r
		}
	}
	e.t.Fatalf("no run in thread %s", rootTS)
	return nil
}

func status(t *testing.T, res *http.Response, want int) []byte {
	t.Helper()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		t.Fatalf("status %d, want %d: %s", res.StatusCode, want, b)
	}
	return b
}
