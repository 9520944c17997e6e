package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/testkit"
)

// mentionRoot is the ts of the app_mention in testdata: the root of the
// thread the mention starts.
const mentionRoot = "1700000100.000200"

// followUpEvent is a person's message without a mention in the thread
// rooted at root, whose root a person (not the bot) wrote.
func followUpEvent(t *testing.T, eventID, root, ts, text string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"type": "event_callback", "team_id": "T1", "api_app_id": "A0APP", "event_id": eventID,
		"event_time": 1700000500,
		"event": map[string]any{
			"type": "message", "text": text, "user": "UREQ", "ts": ts, "team": "T1",
			"thread_ts": root, "parent_user_id": "UREQ", "channel": "C1", "channel_type": "channel",
		},
		"authorizations": []map[string]any{{"team_id": "T1", "user_id": "UBOT", "is_bot": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve mounts a's handlers on a new loopback server, as cmd would on
// another replica or after a restart.
func serve(t *testing.T, a *Adapter) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for p, hd := range a.Routes() {
		mux.Handle(p, hd)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// postEvent posts a signed Events API body to srv and checks the answer.
func postEvent(t *testing.T, srv *httptest.Server, body []byte, want int) {
	t.Helper()
	ts := time.Now().Unix()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/slack/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("X-Slack-Signature", sign(testSecret, ts, body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != want {
		t.Fatalf("POST /slack/events: status %d, want %d", res.StatusCode, want)
	}
}

// recorded reports whether an inbound message with text was recorded in
// the thread rooted at root.
func (e *env) recorded(root, text string) bool {
	e.t.Helper()
	items, _, err := e.h.Store.ThreadMessages(context.Background(), core.ThreadMessagesParams{
		Thread: threadKey{Team: "T1", Channel: "C1", TS: root}.thread(), Limit: 100,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, m := range items {
		if m.Direction == core.MessageIn && m.Text == text {
			return true
		}
	}
	return false
}

// newReplica builds a second adapter on the same harness (engine and
// store) with mem as its thread memory: an empty in-memory set, as after a
// restart or on another replica.
func (e *env) newReplica(mem ThreadMemory, log *slog.Logger) (*Adapter, *httptest.Server) {
	e.t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a, err := New(e.cfg, Deps{Sink: e.h.Engine, Cards: e.h.Engine, Store: mem, Logger: log})
	if err != nil {
		e.t.Fatal(err)
	}
	return a, serve(e.t, a)
}

// mentionAndAnswer starts a run with the testdata mention and waits until
// the bot has posted in its thread.
func (e *env) mentionAndAnswer() {
	e.t.Helper()
	status(e.t, e.event(fill(e.t, "event_app_mention.json", nil), nil), http.StatusOK)
	e.h.Eventually("the bot's answer in the mention's thread", func() bool {
		return len(e.fake.Thread("C1", mentionRoot)) > 0
	})
}

// A follow-up without a mention in a thread started by a mention is
// handled by a new adapter sharing the store (a restart, another replica),
// because the store holds the mention's event and the bot's answer there;
// one in a thread the bot never took part in is ignored. Without the
// store, the new adapter forgets, as before. Answering wrote no thread
// record of its own (the adapter state stays empty).
func TestThreadMemorySurvivesRestart(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(h *adaptertest.Harness, d *Deps) { d.Store = h.Store })
	e.mentionAndAnswer()
	key := "T1/C1/" + mentionRoot
	if _, err := e.h.Store.StateGet(context.Background(), "slack:thread:"+key); !errors.Is(err, core.ErrNotFound) {
		t.Fatalf("answering wrote a thread record of its own (err = %v)", err)
	}

	_, replica := e.newReplica(e.h.Store, nil)
	postEvent(t, replica, followUpEvent(t, "EvFOLLOW1", mentionRoot, "1700000500.000100", "status please"), http.StatusOK)
	if !e.recorded(mentionRoot, "status please") {
		t.Fatal("follow-up in the bot's thread was ignored by the new adapter")
	}

	const stranger = "1700000400.000001" // a person's thread the bot never posted in
	postEvent(t, replica, followUpEvent(t, "EvFOLLOW2", stranger, "1700000500.000200", "just chatting"), http.StatusOK)
	if e.recorded(stranger, "just chatting") {
		t.Fatal("follow-up in a thread the bot never posted in was recorded")
	}

	_, forgetful := e.newReplica(nil, nil)
	postEvent(t, forgetful, followUpEvent(t, "EvFOLLOW3", mentionRoot, "1700000500.000300", "anyone there"), http.StatusOK)
	if e.recorded(mentionRoot, "anyone there") {
		t.Fatal("an adapter without a store knew a thread it never posted in")
	}
}

// A slash command's thread is known to the store once the command is
// acknowledged: its event is recorded in the thread.
func TestThreadMemoryRecordsSlashRoot(t *testing.T) {
	t.Parallel()
	e := setupWith(t, func(h *adaptertest.Harness, d *Deps) { d.Store = h.Store })
	status(t, e.slash("UREQ", "deploy api 1.2.3"), http.StatusOK)
	roots := e.roots()
	if len(roots) != 1 {
		t.Fatalf("roots = %d, want 1", len(roots))
	}
	th := threadKey{Team: "T1", Channel: "C1", TS: roots[0].TS}.thread()
	if seen, err := e.h.Store.ThreadSeen(context.Background(), th); err != nil || !seen {
		t.Fatalf("slash root thread not known to the store: seen %v, err %v", seen, err)
	}
}

// flakyMemory is a ThreadMemory whose lookups fail while broken and that
// knows the threads in seen.
type flakyMemory struct {
	broken atomic.Bool
	gets   atomic.Int64
	mu     sync.Mutex
	seen   map[core.Thread]bool
}

var errBroken = errors.New("store unreachable")

func (f *flakyMemory) ThreadSeen(_ context.Context, th core.Thread) (bool, error) {
	f.gets.Add(1)
	if f.broken.Load() {
		return false, errBroken
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[th], nil
}

// Sending never touches the thread memory (the posting adapter knows the
// thread in memory). A failed lookup is logged and treated as unknown (the
// follow-up is ignored, nothing recorded) and is not cached: once the
// store is back, the same thread is looked up again and found, then kept.
func TestThreadMemoryErrorsFailSafe(t *testing.T) {
	t.Parallel()
	e := setup(t)
	thread := threadKey{Team: "T1", Channel: "C1", TS: mentionRoot}
	mem := &flakyMemory{seen: map[core.Thread]bool{thread.thread(): true}}
	var logs testkit.LogBuffer
	a, srv := e.newReplica(mem, slog.New(slog.NewTextHandler(&logs, nil)))
	ctx := context.Background()

	mem.broken.Store(true)
	if _, err := a.Send(ctx, core.Outbound{Kind: core.KindReply, Thread: thread.thread(), Text: "on it"}); err != nil {
		t.Fatalf("Send with a failing store: %v", err)
	}
	postEvent(t, srv, followUpEvent(t, "EvFS1", mentionRoot, "1700000600.000100", "still here"), http.StatusOK)
	if !e.recorded(mentionRoot, "still here") || mem.gets.Load() != 0 {
		t.Fatalf("follow-up on the posting adapter: recorded %v, store lookups %d", e.recorded(mentionRoot, "still here"), mem.gets.Load())
	}

	// Lookup fails on a fresh adapter: the follow-up is ignored, logged,
	// and the miss is not cached.
	_, replica := e.newReplica(mem, slog.New(slog.NewTextHandler(&logs, nil)))
	before := e.h.Counts()
	postEvent(t, replica, followUpEvent(t, "EvFS2", mentionRoot, "1700000600.000200", "lost one"), http.StatusOK)
	if e.recorded(mentionRoot, "lost one") {
		t.Fatal("follow-up recorded although the thread lookup failed")
	}
	e.h.Unchanged(t, before)
	if !strings.Contains(logs.String(), "thread memory lookup failed") {
		t.Fatalf("failed lookup not logged: %s", logs.String())
	}
	mem.broken.Store(false)
	gets := mem.gets.Load()
	postEvent(t, replica, followUpEvent(t, "EvFS3", mentionRoot, "1700000600.000300", "found again"), http.StatusOK)
	if !e.recorded(mentionRoot, "found again") || mem.gets.Load() != gets+1 {
		t.Fatalf("after the store recovered: recorded %v, lookups %d (want 1)", e.recorded(mentionRoot, "found again"), mem.gets.Load()-gets)
	}
	// Now cached: no further lookups.
	postEvent(t, replica, followUpEvent(t, "EvFS4", mentionRoot, "1700000600.000400", "and again"), http.StatusOK)
	if !e.recorded(mentionRoot, "and again") || mem.gets.Load() != gets+1 {
		t.Fatalf("cached thread looked up again: lookups %d", mem.gets.Load()-gets)
	}
}
