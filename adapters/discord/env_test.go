package discord

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/discord/internal/fakediscord"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/internal/testkit"
)

const (
	testToken  = "MTAwMDAwMDAwMDAwMDAwMDAx.fake.bot-token"
	appID      = "200000000000000002"
	guildID    = "300000000000000003"
	channelID  = "400000000000000004"
	requester  = "500000000000000005"
	approverID = "500000000000000006"
	outsider   = "500000000000000007"
)

// env is one adapter wired to the real engine and delivery pipeline (the
// adaptertest harness) and to a fake Discord, with a freshly generated
// Ed25519 key pair signing the test's interactions.
type env struct {
	t    *testing.T
	h    *adaptertest.Harness
	fake *fakediscord.Server
	ad   *Adapter
	priv ed25519.PrivateKey
	logs *testkit.LogBuffer
	next atomic.Int64
	now  func() time.Time
	// gatewayOnce starts Run for media cases (startGateway).
	gatewayOnce sync.Once
}

type envOpts struct {
	// base is the harness's options as a case asked for them.
	base    adaptertest.HarnessOptions
	gateway bool
	sink    func(core.Sink) core.Sink
	pace    bool // keep Discord's real pacing (slow)
	cfg     func(*Config)
	ttl     time.Duration // approvals' time to live (harness default if 0)
	// harness adjusts the harness's options (agents, tools, pacing).
	harness func(*adaptertest.HarnessOptions)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, fake: fakediscord.New(), priv: priv, logs: &testkit.LogBuffer{}, now: time.Now}
	e.next.Store(700000000000000000)
	t.Cleanup(e.fake.Close)
	ho := o.base
	ho.Approvers, ho.ApprovalTTL = []string{"discord:" + approverID, "console:admin"}, o.ttl
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		var sink core.Sink = h.Engine
		if o.sink != nil {
			sink = o.sink(h.Engine)
		}
		cfg := Config{
			BotToken: testToken, ApplicationID: appID, PublicKey: hex.EncodeToString(pub), Gateway: o.gateway,
			Flows: []FlowCommand{{
				Name: "deploy", Description: "Deploy a version", Literals: []string{"deploy"},
				Options: []FlowOption{{Name: "service"}, {Name: "version"}, {Name: "env", Default: "staging", Optional: true}},
			}},
		}
		if o.cfg != nil {
			o.cfg(&cfg)
		}
		ad, err := New(cfg, Deps{
			Sink: sink, Cards: h.Engine, Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
			HTTPClient: &http.Client{Transport: e.fake.Transport(), Timeout: 5 * time.Second},
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e.ad = ad
		if o.pace {
			return ad
		}
		// Real pacing spaces messages to one channel by 1.25 s; these
		// tests are about behaviour, so they go faster.
		fast := delivery.Rate{Every: time.Millisecond, Burst: 10}
		return delivery.WithPacing(ad, delivery.Pacing{Conversation: fast, Account: fast})
	}
	if o.harness != nil {
		o.harness(&ho)
	}
	e.h = adaptertest.NewHarness(t, ho)
	t.Cleanup(func() {
		_ = e.ad.Drain(context.Background())
		if strings.Contains(e.logs.String(), testToken) {
			t.Errorf("the bot token leaked into the logs:\n%s", e.logs.String())
		}
	})
	return e
}

// run starts Run in the background, stopped at cleanup.
func (e *env) run() {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.ad.Run(ctx); err != nil {
			e.t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	e.t.Cleanup(func() { once.Do(func() { stop(); <-done }) })
}

func (e *env) id() string { return strconv.FormatInt(e.next.Add(1), 10) }

// sign returns the signature headers Discord would send for body at ts.
func (e *env) sign(body []byte, ts string) (sig string) {
	return hex.EncodeToString(ed25519.Sign(e.priv, append([]byte(ts), body...)))
}

// postRaw sends body to the interactions handler with the given headers.
func (e *env) postRaw(body []byte, sig, ts string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, InteractionsPath, bytes.NewReader(body))
	if sig != "" {
		r.Header.Set(headerSignature, sig)
	}
	if ts != "" {
		r.Header.Set(headerTimestamp, ts)
	}
	w := httptest.NewRecorder()
	e.ad.InteractionsHandler().ServeHTTP(w, r)
	return w
}

// postBody signs body now and posts it.
func (e *env) postBody(body []byte) *httptest.ResponseRecorder {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	return e.postRaw(body, e.sign(body, ts), ts)
}

// response is an interaction response as the test reads it.
type response struct {
	Type int `json:"type"`
	Data struct {
		Content    string           `json:"content"`
		Flags      int              `json:"flags"`
		CustomID   string           `json:"custom_id"`
		Title      string           `json:"title"`
		Components []map[string]any `json:"components"`
	} `json:"data"`
}

// post marshals, signs and posts an interaction; it must be answered 200.
func (e *env) post(in map[string]any) response {
	e.t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		e.t.Fatal(err)
	}
	w := e.postBody(b)
	if w.Code != http.StatusOK {
		e.t.Fatalf("interaction answered %d: %s", w.Code, w.Body.String())
	}
	var r response
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		e.t.Fatalf("interaction response %q: %v", w.Body.String(), err)
	}
	return r
}

func member(id string) map[string]any {
	return map[string]any{"user": map[string]any{"id": id, "username": "user" + id[len(id)-1:], "global_name": "User " + id[len(id)-1:]}}
}

// slash is a slash command interaction in the guild channel.
func (e *env) slash(user, name string, opts map[string]string) map[string]any {
	var os []map[string]any
	for k, v := range opts {
		os = append(os, map[string]any{"name": k, "type": 3, "value": v})
	}
	return map[string]any{
		"id": e.id(), "application_id": appID, "type": 2, "token": "itok-" + e.id(), "version": 1,
		"guild_id": guildID, "channel_id": channelID, "channel": map[string]any{"id": channelID, "type": 0},
		"member": member(user),
		"data":   map[string]any{"id": "1", "name": name, "type": 1, "options": os},
	}
}

// click is a button press on the card message in its thread.
func (e *env) click(user string, card fakediscord.Message, customID string) map[string]any {
	return map[string]any{
		"id": e.id(), "application_id": appID, "type": 3, "token": "itok-" + e.id(), "version": 1,
		"guild_id": guildID, "channel_id": card.ChannelID,
		"channel": map[string]any{"id": card.ChannelID, "type": 11, "parent_id": channelID},
		"member":  member(user),
		"message": map[string]any{"id": card.ID, "channel_id": card.ChannelID, "content": card.Content},
		"data":    map[string]any{"custom_id": customID, "component_type": 2},
	}
}

// submit is a modal submission with the given inputs.
func (e *env) submit(user string, card fakediscord.Message, customID string, inputs map[string]string) map[string]any {
	var rows []map[string]any
	for k, v := range inputs {
		rows = append(rows, map[string]any{"type": 1, "components": []map[string]any{{"type": 4, "custom_id": k, "value": v}}})
	}
	in := e.click(user, card, "")
	in["type"] = 5
	in["data"] = map[string]any{"custom_id": customID, "components": rows}
	return in
}

// waitMessage waits for a message (new, not an edit) matching ok.
func (e *env) waitMessage(what string, ok func(fakediscord.Message) bool) fakediscord.Message {
	e.t.Helper()
	var found fakediscord.Message
	e.h.Eventually(what, func() bool {
		for _, ev := range e.fake.Log() {
			if !ev.Edit && ok(ev.Message) {
				found = ev.Message
				return true
			}
		}
		return false
	})
	return found
}

// waitCard waits for a card (a message with an embed) in channel.
func (e *env) waitCard(channel string) fakediscord.Message {
	e.t.Helper()
	return e.waitMessage("a card in "+channel, func(m fakediscord.Message) bool {
		return m.ChannelID == channel && len(m.Embeds) > 0
	})
}

// buttons returns a card's buttons by label → custom_id (or url).
func buttons(m fakediscord.Message) map[string]string {
	out := map[string]string{}
	for _, row := range m.Components {
		cs, _ := row["components"].([]any)
		for _, c := range cs {
			b, _ := c.(map[string]any)
			label, _ := b["label"].(string)
			if id, ok := b["custom_id"].(string); ok {
				out[label] = id
			} else if u, ok := b["url"].(string); ok {
				out[label] = u
			}
		}
	}
	return out
}

// visible is what a person reads in a message: content and embed text.
func visible(m fakediscord.Message) string {
	var b strings.Builder
	b.WriteString(m.Content)
	for _, em := range m.Embeds {
		for _, k := range []string{"title", "description"} {
			if s, ok := em[k].(string); ok {
				b.WriteString("\n" + s)
			}
		}
		fs, _ := em["fields"].([]any)
		for _, f := range fs {
			fm, _ := f.(map[string]any)
			fmt.Fprintf(&b, "\n%v: %v", fm["name"], fm["value"])
		}
		if f, ok := em["footer"].(map[string]any); ok {
			fmt.Fprintf(&b, "\n%v", f["text"])
		}
	}
	return b.String()
}

// received adapts the fake's log to adaptertest.Fake.
type received struct{ e *env }

func (r received) Received() []adaptertest.Message {
	var out []adaptertest.Message
	for _, ev := range r.e.fake.Log() {
		key := guildID + "/" + ev.ChannelID + "/" + ev.ChannelID
		if ev.ChannelID != channelID && ev.ChannelID != conformanceChannel {
			key = guildID + "/" + channelID + "/" + ev.ChannelID
		}
		m := adaptertest.Message{
			Thread: core.Thread{Channel: ChannelName, Key: key},
			ID:     messageRef(ev.ChannelID, ev.ID), Text: visible(ev.Message),
		}
		if ev.Edit {
			m.EditOf = m.ID
		}
		out = append(out, m)
	}
	return out
}

const conformanceChannel = "400000000000000099"
