package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/adapters/console"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// consoleRecording is the console channel's Platform (a delivery.Recorder:
// the outbox row is the console's record) with what it recorded
// remembered, as the chat view reads it.
type consoleRecording struct {
	*delivery.Recorder
	adaptertest.Log
}

func (r *consoleRecording) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	ref, err := r.Recorder.Send(ctx, m)
	if err == nil {
		// The chat view shows every outbox row as said, an update the
		// Recorder took as an edit included: a reader sees a new message.
		m.Edit = nil
		r.Sent(m, ref)
	}
	return ref, err
}

// conformanceTokens sign the conformance actors in: the requester and the
// approver.
var conformanceTokens = map[string]string{"console:req": "req-token-0123456789", "console:boss": "boss-token-0123456789"}

// consoleChat speaks to the console as a person in a browser does: signed
// in with their token, it posts the chat form, a card's decision form
// ("Approve all") and a run's answer form.
type consoleChat struct {
	t       *testing.T
	h       *adaptertest.Harness
	url     string
	seq     *atomic.Int64
	mu      sync.Mutex
	clients map[string]*client
	csrf    map[string]string
}

var (
	_ adaptertest.Presser   = (*consoleChat)(nil)
	_ adaptertest.Submitter = (*consoleChat)(nil)
	_ adaptertest.Direct    = (*consoleChat)(nil)
)

// as is actor's signed-in browser and its form token.
func (c *consoleChat) as(t *testing.T, actor string) (*client, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[actor]; ok {
		return cl, c.csrf[actor]
	}
	cl := newClient(t, c.url)
	c.clients[actor], c.csrf[actor] = cl, cl.signIn(conformanceTokens[actor])
	return cl, c.csrf[actor]
}

func (c *consoleChat) post(t *testing.T, actor, path string, form url.Values) {
	t.Helper()
	cl, csrf := c.as(t, actor)
	form.Set("_csrf", csrf)
	if r := cl.do("POST", path, form, nil); r.status != http.StatusSeeOther {
		t.Fatalf("POST %s %v: %d %s", path, form, r.status, r.body)
	}
}

func (c *consoleChat) Say(t *testing.T, actor, text string) {
	c.post(t, actor, "/chat", url.Values{"thread": {fmt.Sprintf("conv-%d", c.seq.Add(1))}, "text": {text}})
}

func (c *consoleChat) Reply(t *testing.T, actor string, to adaptertest.Message, text string) {
	c.post(t, actor, "/chat", url.Values{"thread": {to.Thread.Key}, "text": {text}})
}

// SayDirect writes in the actor's own thread: a console thread is one
// conversation.
func (c *consoleChat) SayDirect(t *testing.T, actor, text string) {
	c.post(t, actor, "/chat", url.Values{"thread": {"direct-" + strings.TrimPrefix(actor, "console:")}, "text": {text}})
}

var (
	approvalIDRe = regexp.MustCompile(`Approval id: (\S+)`)
	runLinkRe    = regexp.MustCompile(`/runs/([A-Za-z0-9-]+)`)
)

// Press uses the console's control for label: a card's "Approve all", or
// a question's choice, Yes, No or Skip on its run's answer form.
func (c *consoleChat) Press(t *testing.T, actor string, on adaptertest.Message, label string) {
	if label == "Approve all" {
		m := approvalIDRe.FindStringSubmatch(on.Text)
		if m == nil {
			t.Fatalf("no approval id on the card:\n%s", on.Text)
		}
		c.post(t, actor, "/approvals/"+m[1]+"/decision", url.Values{"action": {"approve_all"}})
		return
	}
	value := label
	switch label {
	case "Yes", "No":
		value = strings.ToLower(label)
	case "Skip":
		value = ""
	}
	c.answer(t, actor, on, value)
}

// Submit fills the question's field on its run's answer form.
func (c *consoleChat) Submit(t *testing.T, actor string, on adaptertest.Message, _, text string) {
	c.answer(t, actor, on, text)
}

func (c *consoleChat) answer(t *testing.T, actor string, on adaptertest.Message, value string) {
	t.Helper()
	m := runLinkRe.FindStringSubmatch(on.Text)
	if m == nil {
		t.Fatalf("the question links no run:\n%s", on.Text)
	}
	qs, err := c.h.Engine.PendingQuestions(context.Background(), m[1])
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions of %s: %v %v", m[1], qs, err)
	}
	form := url.Values{"action_id": {qs[0].ActionID}}
	for _, q := range qs[0].Ask.Questions {
		form.Set("q:"+q.ID, value)
	}
	c.post(t, actor, "/runs/"+m[1]+"/answer", form)
}

func TestConformance(t *testing.T) {
	var mu sync.Mutex
	urls := map[*adaptertest.Harness]string{}
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			rec := &consoleRecording{Recorder: console.New()}
			o.Approvers = []string{"console:boss"}
			o.Platform = func(*adaptertest.Harness) delivery.Platform { return rec }
			h := adaptertest.NewHarness(t, o)
			st, ok := h.Store.(Store)
			if !ok {
				t.Fatalf("the harness's store %T is no console Store", h.Store)
			}
			var tokens []Token
			for actor, tok := range conformanceTokens {
				tokens = append(tokens, Token{Name: strings.TrimPrefix(actor, "console:"), Token: tok, Actor: actor})
			}
			hd, err := New(Options{Engine: h.Engine, Store: st, Authority: h.Engine.Authority(), Tokens: tokens})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(hd)
			t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
			mu.Lock()
			urls[h] = srv.URL
			mu.Unlock()
			return h, rec
		},
		Chat: func(t *testing.T, h *adaptertest.Harness) adaptertest.Chat {
			mu.Lock()
			defer mu.Unlock()
			return &consoleChat{t: t, h: h, url: urls[h], seq: &atomic.Int64{}, clients: map[string]*client{}, csrf: map[string]string{}}
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapEdit: "the console's record is the outbox: a question's answer is shown after it, " +
				"and its run page shows it answered",
		},
		Thread:    core.Thread{Channel: console.Channel, Key: "conformance"},
		Requester: "console:req",
		Approver:  "console:boss",
		// The console escapes text when it shows it (html/template): the
		// record keeps it exactly as authored.
		Inert: func(in, out string) error {
			if in != out {
				return fmt.Errorf("text changed in recording")
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			mu.Lock()
			u := urls[h]
			mu.Unlock()
			c := newClient(t, u)
			// Not signed in, and signed in without the form token.
			if r := c.do("POST", "/chat", url.Values{"thread": {"x"}, "text": {"deploy api 1.2.3"}}, nil); r.status != http.StatusSeeOther && r.status != http.StatusForbidden {
				t.Errorf("POST /chat without a session: %d", r.status)
			}
			c.signIn(conformanceTokens["console:req"])
			if r := c.do("POST", "/chat", url.Values{"thread": {"x"}, "text": {"deploy api 1.2.3"}}, nil); r.status != http.StatusForbidden {
				t.Errorf("POST /chat without the form token: %d", r.status)
			}
			if r := c.do("POST", "/chat", url.Values{"thread": {"x"}, "text": {"deploy"}, "_csrf": {c.csrf()}},
				map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
				t.Errorf("a cross-site POST /chat: %d", r.status)
			}
		},
	})
}
