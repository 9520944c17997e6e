package local_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/local"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/delivery"
)

// recording is the local channel's Platform with what it recorded
// remembered: the outbox row is the channel's record, and this is what a
// client's stream reads of it.
type recording struct {
	*local.Adapter
	adaptertest.Log
}

func (r *recording) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	ref, err := r.Adapter.Send(ctx, m)
	if err == nil {
		// A client's stream shows every outbox row as a new line, an
		// update the adapter took as an edit included.
		m.Edit = nil
		r.Sent(m, ref)
	}
	return ref, err
}

// tokens of the conformance actors: the requester, and the approver.
var conformanceTokens = map[string]string{"console:req": "req-token", "console:boss": "boss-token"}

// localChat speaks to the channel as `opsgate chat` does: POST
// /local/v1/messages with the actor's token, in a thread of its own or the
// thread of the message it answers.
type localChat struct {
	url string
	seq *atomic.Int64
}

var _ adaptertest.Direct = localChat{}

func (c localChat) post(t *testing.T, actor, thread, text string) {
	t.Helper()
	b := &bundle{url: c.url}
	code, body := b.post(t, "/local/v1/messages", conformanceTokens[actor], map[string]string{"thread": thread, "text": text})
	if code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("POST messages %q: %d %v", text, code, body)
	}
}

func (c localChat) Say(t *testing.T, actor, text string) {
	c.post(t, actor, fmt.Sprintf("local:conv-%d", c.seq.Add(1)), text)
}

func (c localChat) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	c.post(t, actor, to.Thread.String(), text)
}

// SayDirect writes in the actor's own thread: a terminal conversation is
// one thread, and every line continues it.
func (c localChat) SayDirect(t *testing.T, actor, text string) {
	c.post(t, actor, "local:"+strings.TrimPrefix(actor, "console:"), text)
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	urls := map[*adaptertest.Harness]string{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			ts, err := api.NewTokenSet([]api.Token{
				{Name: "req", Token: conformanceTokens["console:req"], Actor: "console:req"},
				{Name: "boss", Token: conformanceTokens["console:boss"], Actor: "console:boss"},
			})
			if err != nil {
				t.Fatal(err)
			}
			var rec *recording
			o.Approvers = []string{"console:boss"}
			o.Platform = func(h *adaptertest.Harness) delivery.Platform {
				a, err := local.New(local.Config{}, local.Deps{Sink: h.Engine, Cards: h.Engine, Store: h.Store, Auth: ts,
					Authority: h.Engine.Authority(), PollInterval: 50 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				rec = &recording{Adapter: a}
				return rec
			}
			h := adaptertest.NewHarness(t, o)
			mux := http.NewServeMux()
			for p, hd := range rec.Routes() {
				mux.Handle(p, hd)
			}
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			mu.Lock()
			urls[h] = srv.URL
			mu.Unlock()
			return h, rec
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			mu.Lock()
			defer mu.Unlock()
			return localChat{url: urls[h], seq: &atomic.Int64{}}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapButtons: "a terminal has no buttons: a question is answered by typing the answer (a choice's number, " +
				"\"yes\", \"skip\"), a batch by typing the approve-all command the card shows",
			adaptertest.CapForms: "the answer in words is typed in the thread",
			adaptertest.CapEdit:  "the stream is a record: a question's answer follows it as a new line",
		},
		Thread:    core.Thread{Channel: local.Channel, Key: "conformance"},
		Requester: "console:req",
		Approver:  "console:boss",
		// The terminal prints text as authored (the client renders the
		// Markdown subset itself, escaping the rest).
		Inert: func(in, out string) error {
			if in != out {
				return fmt.Errorf("text changed in recording")
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			url := urls[h]
			mu.Unlock()
			b := &bundle{h: h, url: url}
			for _, c := range []struct {
				tok  string
				body any
				want int
			}{
				{"forged", map[string]string{"thread": "local:x", "text": "deploy api 1.2.3"}, http.StatusUnauthorized},
				{"req-token", `{"thread":`, http.StatusBadRequest},
				{"req-token", map[string]string{"thread": "local:x", "text": ""}, http.StatusUnprocessableEntity},
				{"req-token", map[string]any{"thread": "local:x", "text": "hi", "extra": 1}, http.StatusBadRequest},
			} {
				if code, _ := b.post(t, "/local/v1/messages", c.tok, c.body); code != c.want {
					t.Errorf("%v: %d, want %d", c.body, code, c.want)
				}
			}
		},
	})
}
