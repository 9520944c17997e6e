package matrix

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

// TestConformance runs adaptertest's rules against a real homeserver. The
// cases share one room and one thread (alice's "hello"), each with a bot of
// its own, so what a case "received" is what its bot posted there.
func TestConformance(t *testing.T) {
	w := newWorld(t, false) // skips loudly (fails under CI) without Dendrite
	root := w.say(w.alice, "hello", nil)
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := newEnv(t, envOpts{world: w, noRun: true, base: o, cfg: func(c *Config) { c.DirectMessages = true }})
			envs.Store(e.h, e)
			return e.h, received{e}
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			e, _ := envs.Load(h)
			return &chatDriver{e: e.(*env)}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapButtons: "Matrix has no buttons: a question is answered by a reply (a choice by its number, \"yes\", \"skip\"), a batch by replying \"approve all\" to its card",
			adaptertest.CapForms:   "Matrix has no forms: a question answered in words is answered by a reply",
		},
		Thread:    core.Thread{Channel: ChannelName, Key: threadKey{Room: w.room, Root: id.EventID(root)}.String()},
		Requester: "matrix:" + string(w.alice.UserID),
		Approver:  "matrix:" + string(w.bob.UserID),
		Inert:     inert,
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			badInput(t, h.Platform.(*Adapter), w)
		},
	})
}

// envs maps each conformance harness to its env, for the Chat driver.
var envs sync.Map

// chatDriver speaks to the adapter with the homeserver's own events: it
// sends as alice, bob or carol through Dendrite, reads the event back as
// the case's bot and hands it to the adapter's handler (the case's bot
// does not sync: the cases share one room).
type chatDriver struct {
	e  *env
	mu sync.Mutex
	dm map[string]id.RoomID
}

var _ adaptertest.Direct = (*chatDriver)(nil)

func (d *chatDriver) client(t *testing.T, actor string) *mautrix.Client {
	t.Helper()
	for _, c := range []*mautrix.Client{d.e.alice, d.e.bob, d.e.carol} {
		if "matrix:"+string(c.UserID) == actor {
			return c
		}
	}
	t.Fatalf("no client for %s", actor)
	return nil
}

// send posts content to room as actor, then hands the event, as the
// homeserver serves it to the bot, to the adapter.
func (d *chatDriver) send(t *testing.T, actor string, room id.RoomID, content map[string]any) {
	t.Helper()
	ctx := context.Background()
	resp, err := d.client(t, actor).SendMessageEvent(ctx, room, event.EventMessage, content)
	if err != nil {
		t.Fatalf("%s sends: %v", actor, err)
	}
	u := d.e.bot.BuildClientURL("v3", "rooms", room, "event", resp.EventID)
	var raw []byte
	d.e.h.Eventually("the bot to read "+string(resp.EventID), func() bool {
		raw, err = d.e.bot.MakeFullRequest(ctx, mautrix.FullRequest{Method: http.MethodGet, URL: u})
		return err == nil // a join is served a moment after it is accepted
	})
	ev, err := parseEvent(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.e.ad.handleEvent(ctx, room, ev, raw); err != nil {
		t.Fatalf("handle %s: %v", resp.EventID, err)
	}
}

// Say addresses the bot with its command prefix in the shared room.
func (d *chatDriver) Say(t *testing.T, actor, text string) {
	d.send(t, actor, d.e.room, map[string]any{"msgtype": "m.text", "body": commandPrefix + " " + text})
}

// Reply answers the bot's message to (m.in_reply_to), in its thread when
// it is in one.
func (d *chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	room, target, err := parseMessageRef(to.ID)
	if err != nil {
		t.Fatal(err)
	}
	rel := map[string]any{"m.in_reply_to": map[string]any{"event_id": target}}
	if k, err := parseThreadKey(to.Thread.Key); err == nil && k.Root != "" && *d.e.ad.cfg.Threads {
		rel["rel_type"], rel["event_id"], rel["is_falling_back"] = "m.thread", k.Root, false
	}
	d.send(t, actor, room, map[string]any{"msgtype": "m.text", "body": text, "m.relates_to": rel})
}

// SayDirect writes in a direct room of actor and the bot, made on first use.
func (d *chatDriver) SayDirect(t *testing.T, actor, text string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dm == nil {
		d.dm = map[string]id.RoomID{}
	}
	room, ok := d.dm[actor]
	if !ok {
		ctx := context.Background()
		resp, err := d.client(t, actor).CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "trusted_private_chat", IsDirect: true, Invite: []id.UserID{d.e.bot.UserID}})
		if err != nil {
			t.Fatalf("create a direct room: %v", err)
		}
		if _, err := d.e.bot.JoinRoomByID(ctx, resp.RoomID); err != nil {
			t.Fatalf("the bot joins: %v", err)
		}
		room, d.dm[actor] = resp.RoomID, resp.RoomID
		d.e.dms = append(d.e.dms, room)
	}
	d.send(t, actor, room, map[string]any{"msgtype": "m.text", "body": text})
}

// inert fails when rendered holds markup a Matrix client would act on: a
// live tag from the input, a link to an outside site, a room mention.
func inert(input, rendered string) error {
	for _, live := range []string{"<script", `<a href="https://evil`, `href="javascript`, "<b>bold</b>"} {
		if strings.Contains(rendered, live) {
			return fmt.Errorf("live markup %q", live)
		}
	}
	if strings.Contains(strings.ToLower(plainBody(rendered)), "@room") {
		return fmt.Errorf("a live @room mention")
	}
	return nil
}
