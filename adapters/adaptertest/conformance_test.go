package adaptertest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/store/pgtest"
)

// chatFake is a minimal chat platform on 127.0.0.1: POST /send takes
// {"thread","text","edit"} and answers {"id"}; it records what it accepted.
type chatFake struct {
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []adaptertest.Message
	// noEdit makes the fake refuse edits (a platform without them).
	noEdit bool
}

func newChatFake(t *testing.T) *chatFake {
	f := &chatFake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Thread, Text, Edit string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		th, err := core.ParseThread(req.Thread)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if req.Edit != "" && f.noEdit {
			w.WriteHeader(http.StatusNotImplemented)
			return
		}
		id := req.Edit
		if id == "" {
			id = fmt.Sprintf("m%d", len(f.msgs)+1)
		}
		f.msgs = append(f.msgs, adaptertest.Message{Thread: th, ID: id, EditOf: req.Edit, Text: req.Text})
		json.NewEncoder(w).Encode(map[string]string{"id": id})
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *chatFake) Received() []adaptertest.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]adaptertest.Message(nil), f.msgs...)
}

// chat is the adapter under test: HTML-escaping renderer, 500-byte limit,
// a shared-secret inbound handler.
type chat struct {
	url  string
	sink core.Sink
}

var _ delivery.Platform = (*chat)(nil)

func (c *chat) Channel() string { return "chat" }

func (c *chat) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	body := map[string]string{"thread": m.Thread.String(), "text": m.Text}
	if m.Edit != nil {
		body["edit"] = m.Edit.ID
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/send", bytes.NewReader(b))
	if err != nil {
		return core.MessageRef{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return core.MessageRef{}, fmt.Errorf("chat: send: %w", err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotImplemented:
		return core.MessageRef{}, core.ErrNotSupported
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return core.MessageRef{}, &core.PermanentError{Err: fmt.Errorf("chat: send: %s", resp.Status)}
	case resp.StatusCode != http.StatusOK:
		return core.MessageRef{}, fmt.Errorf("chat: send: %s", resp.Status)
	}
	var out struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return core.MessageRef{}, fmt.Errorf("chat: send: decode: %w", err)
	}
	return core.MessageRef{Channel: "chat", ID: out.ID}, nil
}

func (c *chat) Format() delivery.Format {
	return delivery.Format{Limit: 500, Unit: chunk.Bytes, Syntax: chunk.HTML, Render: func(s string) string {
		return strings.ReplaceAll(html.EscapeString(s), "@", "@\u200b")
	}}
}

func (c *chat) Pacing() delivery.Pacing {
	return delivery.Pacing{Conversation: delivery.Rate{Every: time.Millisecond, Burst: 5}}
}

func (c *chat) Buckets(t core.Thread) delivery.Buckets { return delivery.Buckets{Conversation: t.Key} }

// ServeHTTP is the inbound endpoint: X-Secret must match, the body must be
// {"id","user","thread","text"}.
func (c *chat) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Secret") != "s3cret" {
		http.Error(w, "forbidden", http.StatusUnauthorized)
		return
	}
	var in struct{ ID, User, Thread, Text, ReplyTo string }
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil || in.ID == "" || in.User == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	th := core.Thread{Channel: "chat", Key: in.Thread}
	ev := core.ChannelEvent{Channel: "chat", EventID: in.ID, Actor: core.Actor{ID: "chat:" + in.User}, Thread: th, Text: in.Text, ReceivedAt: time.Now()}
	if in.ReplyTo != "" {
		ev.ReplyTo = &core.MessageRef{Channel: "chat", ID: in.ReplyTo}
	}
	if ref, ok := core.ParseApproveAll(in.Text); ok && ref != "" {
		ev.Decision = &core.Decision{ApprovalID: ref, Action: core.ActionApproveAll}
	}
	if _, err := c.sink.HandleEvent(r.Context(), ev); err != nil {
		if _, refused := core.Refusal(err); !refused {
			http.Error(w, "error", http.StatusInternalServerError)
		}
	}
}

// chatDriver posts to the example adapter's inbound endpoint as its
// platform would: a new message in room-1, or a reply naming the
// message it answers.
type chatDriver struct {
	c   *chat
	seq *atomic.Int64
}

func (d chatDriver) post(t *testing.T, actor, thread, text, replyTo string) {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("in-%d", d.seq.Add(1)), "user": strings.TrimPrefix(actor, "chat:"),
		"thread": thread, "text": text, "replyTo": replyTo})
	r := httptest.NewRequest(http.MethodPost, "/chat", bytes.NewReader(body))
	r.Header.Set("X-Secret", "s3cret")
	w := httptest.NewRecorder()
	d.c.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("inbound %q: %d", text, w.Code)
	}
}

func (d chatDriver) Say(t *testing.T, actor, text string) {
	d.post(t, actor, fmt.Sprintf("room-%d", d.seq.Add(1)), text, "")
}

func (d chatDriver) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	d.post(t, actor, to.Thread.Key, text, to.ID)
}

// lacks is what the example platform has not: buttons, forms and private
// chats always, edits in the NoEdits variant.
func lacks(noEdit bool) map[adaptertest.Capability]string {
	m := map[adaptertest.Capability]string{
		adaptertest.CapButtons: "a reply answers, and the card shows the approve-all command",
		adaptertest.CapForms:   "a reply answers",
		adaptertest.CapDirect:  "a reply continues the conversation",
	}
	if noEdit {
		m[adaptertest.CapEdit] = "the question's update arrives as a new message"
	}
	return m
}

func suite(noEdit bool) adaptertest.Suite {
	return adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			fake := newChatFake(t)
			fake.noEdit = noEdit
			o.Approvers = []string{"chat:boss"}
			o.Platform = func(h *adaptertest.Harness) delivery.Platform {
				return &chat{url: fake.srv.URL, sink: h.Engine}
			}
			return adaptertest.NewHarness(t, o), fake
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			return chatDriver{c: h.Platform.(*chat), seq: &atomic.Int64{}}
		},
		Lacks:     lacks(noEdit),
		Thread:    core.Thread{Channel: "chat", Key: "room-1"},
		Requester: "chat:dev",
		Approver:  "chat:boss",
		Inert: func(in, out string) error {
			if strings.ContainsAny(out, "<>") {
				return errors.New("raw angle bracket")
			}
			if strings.Contains(out, "@everyone") || strings.Contains(out, "@here") {
				return errors.New("live mass mention")
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			c := h.Platform.(*chat)
			for _, tc := range []struct {
				secret, body string
				want         int
			}{
				{"wrong", `{"id":"1","user":"u","thread":"r","text":"deploy api 1"}`, http.StatusUnauthorized},
				{"", `{"id":"1","user":"u","thread":"r","text":"deploy api 1"}`, http.StatusUnauthorized},
				{"s3cret", `{"id":`, http.StatusBadRequest},
				{"s3cret", `{"text":"deploy api 1"}`, http.StatusBadRequest},
			} {
				r := httptest.NewRequest(http.MethodPost, "/chat", strings.NewReader(tc.body))
				r.Header.Set("X-Secret", tc.secret)
				w := httptest.NewRecorder()
				c.ServeHTTP(w, r)
				if w.Code != tc.want {
					t.Errorf("secret %q body %q: status %d, want %d", tc.secret, tc.body, w.Code, tc.want)
				}
			}
		},
	}
}

// The example adapter passes every rule, with edits and without them (the
// card update then arrives as a new message).
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("EditsInPlace", func(t *testing.T) { t.Parallel(); adaptertest.RunConformance(t, suite(false)) })
	t.Run("NoEdits", func(t *testing.T) { t.Parallel(); adaptertest.RunConformance(t, suite(true)) })
}

// CheckLines catches loss, duplication and reordering.
func TestCheckLines(t *testing.T) {
	t.Parallel()
	text, n := adaptertest.LongReply(2000)
	if err := adaptertest.CheckLines(text, n); err != nil {
		t.Fatalf("intact text: %v", err)
	}
	lines := strings.Split(text, "\n")
	for name, bad := range map[string]string{
		"lost":       strings.Join(append(append([]string{}, lines[:3]...), lines[4:]...), "\n"),
		"duplicated": strings.Join(append(append([]string{}, lines[:4]...), lines[3:]...), "\n"),
		"reordered":  strings.Join(append([]string{lines[1], lines[0]}, lines[2:]...), "\n"),
		"truncated":  strings.Join(lines[:len(lines)-3], "\n"),
	} {
		if err := adaptertest.CheckLines(bad, n); err == nil {
			t.Errorf("%s text passed CheckLines", name)
		}
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }

// The harness runs the same deploy round trip on Postgres.
func TestHarnessOnPostgres(t *testing.T) {
	t.Parallel()
	fake := newChatFake(t)
	h := adaptertest.NewHarness(t, adaptertest.HarnessOptions{
		Postgres: true, Approvers: []string{"chat:boss"},
		Platform: func(h *adaptertest.Harness) delivery.Platform { return &chat{url: fake.srv.URL, sink: h.Engine} },
	})
	th := core.Thread{Channel: "chat", Key: "room-pg"}
	rc := h.Send("chat:dev", th, "deploy api 2.0.0 prod")
	ap := h.WaitApprovalPending(rc.RunID)
	if _, err := h.Decide("chat:boss", ap.ID, "approve", "ok"); err != nil {
		t.Fatal(err)
	}
	h.WaitRun(rc.RunID, core.RunSucceeded)
	h.WaitIdle()
	if calls := h.Dispatches(); len(calls) != 1 || calls[0].Args["env"] != "prod" {
		t.Fatalf("dispatches %+v", calls)
	}
}
