package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/internal/dendritetest"
)

func TestMain(m *testing.M) { dendritetest.Main(m) }

// world is a room on the shared Dendrite with a requester (alice), an
// approver (bob) and a bystander who may not decide (carol).
type world struct {
	hs                *dendritetest.Server
	alice, bob, carol *mautrix.Client
	room              id.RoomID
}

// env is one test's bot in a world, with the harness and the adapter
// plugged in.
type env struct {
	*world
	t                 *testing.T
	bot               *mautrix.Client
	h                 *adaptertest.Harness
	ad                *Adapter
	stop              func()
	logs              *strings.Builder
	opts              envOpts
	approver, request string
	// dms are direct rooms the bot takes part in beside the world's room.
	dms []id.RoomID
}

type envOpts struct {
	// cfg adjusts the adapter's config before New.
	cfg func(*Config)
	// noRun builds the adapter without starting its sync loop.
	noRun bool
	// requesters gates the channel (default: alice, bob and carol may ask).
	requesters []string
	// encrypted creates the room with m.room.encryption.
	encrypted bool
	// world, when set, is shared (the conformance cases share one room,
	// each with a bot of its own).
	world *world
	// base is the harness's options as a case asked for them.
	base adaptertest.HarnessOptions
	// harness adjusts the harness's options (agents, tools, pacing).
	harness func(*adaptertest.HarnessOptions)
}

// newWorld creates a room (alice's, with bob and carol joined).
func newWorld(t *testing.T, encrypted bool) *world {
	t.Helper()
	hs := dendritetest.Start(t)
	w := &world{hs: hs, alice: hs.Register(t, "alice"), bob: hs.Register(t, "bob"), carol: hs.Register(t, "carol")}
	req := &mautrix.ReqCreateRoom{Preset: "private_chat", Name: "ops", Invite: []id.UserID{w.bob.UserID, w.carol.UserID}}
	if encrypted {
		req.InitialState = []*event.Event{{Type: event.StateEncryption, Content: event.Content{Raw: map[string]any{"algorithm": "m.megolm.v1.aes-sha2"}}}}
	}
	resp, err := w.alice.CreateRoom(context.Background(), req)
	if err != nil {
		t.Fatalf("create room: %v", err)
	}
	w.room = resp.RoomID
	for _, c := range []*mautrix.Client{w.bob, w.carol} {
		if _, err := c.JoinRoomByID(context.Background(), w.room); err != nil {
			t.Fatalf("%s joins: %v", c.UserID, err)
		}
	}
	return w
}

// join brings a new user into the world's room (invited by alice).
func (w *world) join(t *testing.T, c *mautrix.Client) {
	t.Helper()
	ctx := context.Background()
	if _, err := w.alice.InviteUser(ctx, w.room, &mautrix.ReqInviteUser{UserID: c.UserID}); err != nil {
		t.Fatalf("invite %s: %v", c.UserID, err)
	}
	if _, err := c.JoinRoomByID(ctx, w.room); err != nil {
		t.Fatalf("%s joins: %v", c.UserID, err)
	}
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	w := o.world
	if w == nil {
		w = newWorld(t, o.encrypted)
	}
	e := &env{world: w, t: t, opts: o, logs: &strings.Builder{}}
	e.bot = w.hs.Register(t, "opsbot")
	w.join(t, e.bot)
	e.approver = "matrix:" + string(e.bob.UserID)
	e.request = "matrix:" + string(e.alice.UserID)
	rq := o.requesters
	if rq == nil {
		rq = []string{e.request, e.approver, "matrix:" + string(e.carol.UserID)}
	}
	ho := o.base
	ho.Approvers = []string{e.approver}
	ho.Requesters = map[string]engine.Requesters{ChannelName: {Entries: rq}}
	ho.Platform = func(h *adaptertest.Harness) delivery.Platform {
		e.ad = e.newAdapter(h, h.Store)
		return e.ad
	}
	if o.harness != nil {
		o.harness(&ho)
	}
	e.h = adaptertest.NewHarness(t, ho)
	if !o.noRun {
		e.start()
	}
	return e
}

// newAdapter builds an adapter for the env's bot on store (a second one
// plays a restarted server or another replica).
func (e *env) newAdapter(h *adaptertest.Harness, store StateStore) *Adapter {
	e.t.Helper()
	cfg := Config{HomeserverURL: e.hs.URL, UserID: string(e.bot.UserID), AccessToken: e.bot.AccessToken,
		Rooms: []string{string(e.room)}, PollTimeout: 2 * time.Second}
	if e.opts.cfg != nil {
		e.opts.cfg(&cfg)
	}
	ad, err := New(cfg, Deps{Sink: h.Engine, Cards: h.Engine, Store: store,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		e.t.Fatalf("matrix.New: %v", err)
	}
	return ad
}

// start runs the adapter's sync loop until the test ends (or stop), and
// waits for its first sync to have taken a position.
func (e *env) start() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.ad.Run(ctx) }()
	e.stop = func() { cancel(); wg.Wait() }
	e.t.Cleanup(e.stop)
	e.h.Eventually("the first sync", func() bool {
		_, err := e.h.Store.StateGet(context.Background(), e.ad.sinceKey())
		return err == nil
	})
}

// say sends a text message as c into the room (content extras merged in)
// and returns its event id.
func (e *world) say(c *mautrix.Client, body string, extra map[string]any) id.EventID {
	content := map[string]any{"msgtype": "m.text", "body": body}
	for k, v := range extra {
		content[k] = v
	}
	resp, err := c.SendMessageEvent(context.Background(), e.room, event.EventMessage, content)
	if err != nil {
		panic(fmt.Sprintf("%s says %q: %v", c.UserID, body, err))
	}
	return resp.EventID
}

// react puts key on target as c.
func (e *env) react(c *mautrix.Client, target id.EventID, key string) {
	e.t.Helper()
	if _, err := c.SendReaction(context.Background(), e.room, target, key); err != nil {
		e.t.Fatalf("%s reacts %s: %v", c.UserID, key, err)
	}
}

// roomMessage is an event of the room as a member reads it.
type roomMessage struct {
	ID      id.EventID
	Sender  id.UserID
	Type    string
	Content messageContent
	// NewBody is m.new_content.body of an edit.
	NewBody string
	Raw     json.RawMessage
}

// messages reads the room's timeline, oldest first, as alice.
func (e *env) messages() []roomMessage { return e.messagesIn(e.alice, e.room) }

// messagesIn reads room's timeline, oldest first, as c.
func (e *env) messagesIn(c *mautrix.Client, room id.RoomID) []roomMessage {
	e.t.Helper()
	resp, err := c.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 1000)
	if err != nil {
		e.t.Fatalf("read room: %v", err)
	}
	var out []roomMessage
	for _, ev := range resp.Chunk {
		raw, _ := json.Marshal(ev.Content.Raw)
		m := roomMessage{ID: ev.ID, Sender: ev.Sender, Type: ev.Type.Type, Raw: raw}
		_ = json.Unmarshal(raw, &m.Content)
		var nc struct {
			New struct {
				Body string `json:"body"`
			} `json:"m.new_content"`
		}
		_ = json.Unmarshal(raw, &nc)
		m.NewBody = nc.New.Body
		out = append(out, m)
	}
	slices.Reverse(out)
	return out
}

// waitMessage waits for a message of the bot matching ok and returns it.
func (e *env) waitMessage(what string, ok func(roomMessage) bool) roomMessage {
	e.t.Helper()
	var found roomMessage
	e.h.Eventually(what, func() bool {
		for _, m := range e.messages() {
			if m.Sender == e.bot.UserID && m.Type == "m.room.message" && ok(m) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// received shows the room the way adaptertest reads a platform.
type received struct{ e *env }

func (r received) Received() []adaptertest.Message {
	out := r.in(r.e.room)
	for _, dm := range r.e.dms {
		out = append(out, r.in(dm)...)
	}
	return out
}

func (r received) in(room id.RoomID) []adaptertest.Message {
	var out []adaptertest.Message
	for _, m := range r.e.messagesIn(r.e.bot, room) {
		if m.Sender != r.e.bot.UserID || m.Type != "m.room.message" {
			continue
		}
		msg := adaptertest.Message{ID: messageRef(room, m.ID), Text: m.Content.Body}
		k := threadKey{Room: room}
		if rel := m.Content.RelatesTo; rel != nil {
			switch {
			case rel.RelType == "m.replace":
				msg.EditOf = messageRef(room, id.EventID(rel.EventID))
				msg.ID = msg.EditOf
				msg.Text = m.NewBody
			case rel.RelType == "m.thread":
				k.Root = id.EventID(rel.EventID)
			case rel.InReplyTo != nil:
				k.Root = id.EventID(rel.InReplyTo.EventID)
			}
		}
		msg.Thread = core.Thread{Channel: ChannelName, Key: k.String()}
		out = append(out, msg)
	}
	return out
}

// runsOf counts runs in the store.
func (e *env) runs() []*core.Run {
	e.t.Helper()
	runs, _, err := e.h.Store.RunList(context.Background(), core.RunListParams{Limit: 100})
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

func eventType(t string) event.Type { return event.Type{Type: t, Class: event.MessageEventType} }
