package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/discord/internal/fakediscord"
	"github.com/opsgate/opsgate/core"
)

// badInput posts forged, stale and malformed interactions and checks each
// is refused with 401/400/413.
func (e *env) badInput(t *testing.T) {
	t.Helper()
	good, _ := json.Marshal(e.slash(requester, "ops", map[string]string{"command": "deploy api 1.2.3"}))
	now := time.Now().Unix()
	ts := strconv.FormatInt(now, 10)
	sig := e.sign(good, ts)
	stale := strconv.FormatInt(now-6*60, 10)
	future := strconv.FormatInt(now+6*60, 10)
	flipped := []byte(sig)
	if flipped[0] == 'a' {
		flipped[0] = 'b'
	} else {
		flipped[0] = 'a'
	}
	tampered := bytes.Replace(good, []byte("deploy api"), []byte("deploy web"), 1)
	signed := func(b []byte) (string, string) { return e.sign(b, ts), ts }
	cases := []struct {
		name    string
		body    []byte
		sig, ts string
		want    int
	}{
		{"no signature", good, "", ts, 401},
		{"no timestamp", good, sig, "", 401},
		{"signature not hex", good, "zz" + sig[2:], ts, 401},
		{"signature flipped", good, string(flipped), ts, 401},
		{"body tampered", tampered, sig, ts, 401},
		{"timestamp changed", good, sig, strconv.FormatInt(now+1, 10), 401},
		{"stale timestamp", good, e.sign(good, stale), stale, 401},
		{"future timestamp", good, e.sign(good, future), future, 401},
		{"timestamp not a number", good, e.sign(good, "soon"), "soon", 401},
		{"signed by another key", good, strings.Repeat("ab", 64), ts, 401},
	}
	for _, b := range [][]byte{
		[]byte(`{`), []byte(`[]`), []byte(`null`), []byte(`{"type":2}`),
		[]byte(`{"id":"1","type":2,"token":"t","channel_id":"2"}`),                                                      // no data, no user
		[]byte(`{"id":"1","type":2,"token":"t","channel_id":"2","data":{"name":"ops"}}`),                                // no user
		[]byte(`{"id":"x","type":1}`),                                                                                   // bad id
		[]byte(`{"id":"1","type":3,"token":"","channel_id":"2","member":{"user":{"id":"3"}},"data":{"custom_id":"a"}}`), // no token
		[]byte(`{"id":"1","type":99,"token":"t","channel_id":"2","member":{"user":{"id":"3"}}}`),                        // unknown type
	} {
		s, t := signed(b)
		cases = append(cases, struct {
			name    string
			body    []byte
			sig, ts string
			want    int
		}{fmt.Sprintf("malformed %s", b), b, s, t, 400})
	}
	huge := []byte(`{"id":"1","type":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`)
	hs, ht := signed(huge)
	cases = append(cases, struct {
		name    string
		body    []byte
		sig, ts string
		want    int
	}{"oversize", huge, hs, ht, http.StatusRequestEntityTooLarge})
	for _, c := range cases {
		if w := e.postRaw(c.body, c.sig, c.ts); w.Code != c.want {
			t.Errorf("%s: answered %d, want %d", c.name, w.Code, c.want)
		}
	}
	r := httptestGet(e)
	if r != http.StatusMethodNotAllowed {
		t.Errorf("GET answered %d, want 405", r)
	}
}

func httptestGet(e *env) int {
	req, _ := http.NewRequest(http.MethodGet, InteractionsPath, nil)
	w := &codeRecorder{h: http.Header{}}
	e.ad.InteractionsHandler().ServeHTTP(w, req)
	return w.code
}

type codeRecorder struct {
	h    http.Header
	code int
}

func (c *codeRecorder) Header() http.Header         { return c.h }
func (c *codeRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (c *codeRecorder) WriteHeader(code int)        { c.code = code }

func TestBadInputRecordsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.badInput(t)
	e.h.StoreEmpty(t)
	for _, ev := range e.fake.Log() {
		t.Errorf("bad input made the bot post %+v", ev)
	}
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	envs := map[*adaptertest.Harness]*env{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{base: o})
			mu.Lock()
			envs[e.h] = e
			mu.Unlock()
			return e.h, received{e}
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			e.ad.setBotID(botUserID) // what READY tells a Gateway session
			return chatDriver{e}
		},
		Thread:    core.Thread{Channel: ChannelName, Key: guildID + "/" + conformanceChannel + "/" + conformanceChannel},
		Requester: "discord:" + requester,
		Approver:  "discord:" + approverID,
		Inert: func(in, out string) error {
			for _, live := range []string{"@everyone", "@here", "<@", "<#", "<!", "<script", "](javascript:"} {
				if strings.Contains(out, live) {
					return fmt.Errorf("live %q", live)
				}
			}
			if in == "*" || in == "_" || in == "`" || strings.HasPrefix(in, "**") {
				if !strings.Contains(out, `\`) {
					return fmt.Errorf("stray markup %q not escaped", in)
				}
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			e := envs[h]
			mu.Unlock()
			e.badInput(t)
		},
	})
}

// botUserID is the bot's user id (the token's first part), as the replayed
// messages mention it.
const botUserID = "100000000000000001"

// chatDriver speaks to the adapter as Discord does: a signed /ops
// interaction, Gateway messages replayed from testdata (a reply to the
// bot's message, a direct message) handed to the message handler, button
// presses and a modal's submission.
type chatDriver struct{ e *env }

var (
	_ adaptertest.Presser   = chatDriver{}
	_ adaptertest.Submitter = chatDriver{}
	_ adaptertest.Direct    = chatDriver{}
)

func userOf(actor string) string { return strings.TrimPrefix(actor, ChannelName+":") }

func (d chatDriver) Say(t *testing.T, actor, text string) {
	d.e.post(d.e.slash(userOf(actor), "ops", map[string]string{"command": text}))
}

// message decodes a replayed Gateway message, lets edit change it, and
// hands it to the adapter's message handler.
func (d chatDriver) message(t *testing.T, file string, edit func(m map[string]any)) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["id"] = d.e.id()
	edit(m)
	b, _ := json.Marshal(m)
	var msg discordapi.Message
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	if err := d.e.ad.handleMessage(context.Background(), &msg); err != nil {
		t.Fatal(err)
	}
}

func (d chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	ch, id, err := parseMessageRef(to.ID)
	if err != nil {
		t.Fatal(err)
	}
	bot, ok := d.e.fake.Message(id)
	if !ok {
		t.Fatalf("the fake has no message %s", id)
	}
	d.message(t, "message_reply.json", func(m map[string]any) {
		m["channel_id"], m["content"] = ch, text
		m["author"].(map[string]any)["id"] = userOf(actor)
		m["message_reference"].(map[string]any)["channel_id"] = ch
		m["message_reference"].(map[string]any)["message_id"] = id
		r := m["referenced_message"].(map[string]any)
		r["id"], r["channel_id"], r["content"] = id, ch, bot.Content
	})
}

func (d chatDriver) SayDirect(t *testing.T, actor, text string) {
	d.message(t, "message_dm.json", func(m map[string]any) {
		m["content"] = text
		m["author"].(map[string]any)["id"] = userOf(actor)
	})
}

// botMessage is the fake's record of the bot's message on.
func (d chatDriver) botMessage(t *testing.T, on adaptertest.Message) fakediscord.Message {
	t.Helper()
	_, id, err := parseMessageRef(on.ID)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := d.e.fake.Message(id)
	if !ok {
		t.Fatalf("the fake has no message %s", id)
	}
	return m
}

// customID is the custom_id of m's button whose label contains label.
func customID(t *testing.T, m fakediscord.Message, label string) string {
	t.Helper()
	for l, id := range buttons(m) {
		if strings.Contains(l, label) {
			return id
		}
	}
	t.Fatalf("message %s has no button %q: %v", m.ID, label, buttons(m))
	return ""
}

func (d chatDriver) Press(t *testing.T, actor string, on adaptertest.Message, label string) {
	m := d.botMessage(t, on)
	r := d.e.post(d.e.click(userOf(actor), m, customID(t, m, label)))
	if r.Data.Content != "" && (strings.HasPrefix(r.Data.Content, "⛔") || strings.HasPrefix(r.Data.Content, "⚠️")) {
		t.Fatalf("press %q answered %q", label, r.Data.Content)
	}
}

func (d chatDriver) Submit(t *testing.T, actor string, on adaptertest.Message, label, text string) {
	m := d.botMessage(t, on)
	r := d.e.post(d.e.click(userOf(actor), m, customID(t, m, label)))
	if r.Type != int(discordapi.InteractionResponseModal) {
		t.Fatalf("%q opened no form: %+v", label, r)
	}
	r = d.e.post(d.e.submit(userOf(actor), m, r.Data.CustomID, map[string]string{inputAnswer: text}))
	if strings.HasPrefix(r.Data.Content, "⛔") || strings.HasPrefix(r.Data.Content, "⚠️") {
		t.Fatalf("the form was answered %q", r.Data.Content)
	}
}
