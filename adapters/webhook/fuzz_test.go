package webhook

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/router"
)

// fakeSink records what it is handed, for tests that need no engine.
type fakeSink struct {
	mu  sync.Mutex
	evs []core.ChannelEvent
}

func (s *fakeSink) HandleEvent(_ context.Context, ev core.ChannelEvent) (core.Receipt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evs = append(s.evs, ev)
	return core.Receipt{RunID: "run-1"}, nil
}

func (s *fakeSink) events() []core.ChannelEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]core.ChannelEvent(nil), s.evs...)
}

func newServer(t *testing.T, a *Adapter) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func postRaw(t *testing.T, srv *httptest.Server, name string, body []byte, sig string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/hooks/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if sig != "" {
		req.Header.Set(SignatureHeader, sig)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestNormalizeEvent(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{}
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.FixedZone("x", 3600))
	a, err := New(Config{Hooks: defaultHooks()}, Deps{Sink: sink, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, a)
	body := []byte(`{"text":"  status api  ","n":12345678901}`)
	if got := postRaw(t, srv, "ci", body, Sign(ciSecret, body)); got != http.StatusAccepted {
		t.Fatalf("status %d, want 202", got)
	}
	evs := sink.events()
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	ev := evs[0]
	want := core.ChannelEvent{
		Channel: Channel, Actor: core.Actor{ID: "webhook:ci", Name: "ci"},
		Thread: core.Thread{Channel: Channel, Key: "ci/ci"}, Text: "status api", ReceivedAt: at.UTC(),
	}
	if ev.Channel != want.Channel || ev.Actor != want.Actor || ev.Thread != want.Thread || ev.Text != want.Text || !ev.ReceivedAt.Equal(want.ReceivedAt) || ev.ReceivedAt.Location() != time.UTC {
		t.Errorf("event = %+v, want %+v", ev, want)
	}
	if !strings.HasPrefix(ev.EventID, "ci/") || len(ev.EventID) != len("ci/")+64 {
		t.Errorf("event id %q, want ci/<sha256 hex>", ev.EventID)
	}
	if !bytes.Equal(ev.Raw, body) {
		t.Errorf("raw = %s, want the body as received", ev.Raw)
	}
}

// TestAttack_WebhookValueAddsArgument is issue 26's proof: with text
// 'silence {{.labels.alertname}}' a label "HighCPU duration=720h" must stay
// the alert's name and never set duration.
func TestAttack_WebhookValueAddsArgument(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{}
	a, err := New(Config{Hooks: []Hook{{Name: "am", Secret: "s", Text: "silence {{.labels.alertname}}"}}}, Deps{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"labels":{"alertname":"HighCPU duration=720h"}}`)
	if got := postRaw(t, newServer(t, a), "am", body, Sign("s", body)); got != http.StatusAccepted {
		t.Fatalf("status %d", got)
	}
	evs := sink.events()
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	p, err := router.ParsePattern("silence {alert} {duration=1h}")
	if err != nil {
		t.Fatal(err)
	}
	args, ok := p.Match(evs[0].Text)
	if !ok || args["alert"] != "HighCPU duration=720h" || args["duration"] != "1h" {
		t.Fatalf("text %q routes to %v (matched %v); want the label as one value and duration left at 1h", evs[0].Text, args, ok)
	}
}

func TestTemplatePrintsNumbersAsSent(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{}
	a, err := New(Config{Hooks: []Hook{{Name: "n", Secret: "s", Text: "deploy api {{.build}}"}}}, Deps{Sink: sink})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"build":12345678901}`)
	if got := postRaw(t, newServer(t, a), "n", body, Sign("s", body)); got != http.StatusAccepted {
		t.Fatalf("status %d", got)
	}
	if evs := sink.events(); len(evs) != 1 || evs[0].Text != `deploy api "12345678901"` {
		t.Fatalf("events %+v, want text with the number as sent", evs)
	}
}

// FuzzHandler feeds arbitrary names, bodies, signatures and delivery ids
// through the handler. It must never panic; only a correctly signed request
// to a known hook may reach the sink, and what reaches it is well formed.
func FuzzHandler(f *testing.F) {
	am, err := os.ReadFile("testdata/alertmanager.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("ci", []byte(`{"text":"deploy api 1.2.3"}`), true, "", "")
	f.Add("alertmanager", am, true, "", "d-1")
	f.Add("alertmanager", []byte(`{"alerts":[]}`), true, "", "")
	f.Add("alertmanager", []byte(`{"alerts":[{"labels":null}],"groupKey":"\u0000"}`), true, "", "")
	f.Add("ci", []byte(`{"text":"x"} trailing`), true, "", "")
	f.Add("ci", []byte(`[1,2]`), false, "sha256=00", "")
	f.Add("nope", []byte(`{"text":"x"}`), true, "", "")
	f.Add("ci", []byte(`{"text":"\xff"}`), true, "", "\x01")
	sink := &fakeSink{}
	a, err := New(Config{Hooks: defaultHooks(), MaxBodyBytes: 8 << 10}, Deps{Sink: sink})
	if err != nil {
		f.Fatal(err)
	}
	h := a.Handler()
	secrets := map[string]string{"ci": ciSecret, "alertmanager": amSecret}
	f.Fuzz(func(t *testing.T, name string, body []byte, sign bool, sig, deliveryID string) {
		if strings.ContainsAny(name, "/?#%") || !utf8.ValidString(name) || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return // not a single path segment; the mux is not under test
		}
		if sign {
			sig = Sign(secrets[name], body)
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks/"+name, bytes.NewReader(body))
		req.Header.Set(SignatureHeader, sig)
		if deliveryID != "" && !strings.ContainsAny(deliveryID, "\r\n\x00") {
			req.Header.Set(ignoredDeliveryHeader, deliveryID)
		}
		before := len(sink.events())
		rw := httptest.NewRecorder()
		h.ServeHTTP(rw, req)
		evs := sink.events()
		switch rw.Code {
		case http.StatusAccepted:
			secret, known := secrets[name]
			if !known || secret == "" || sig != Sign(secret, body) && !verify([]byte(secret), body, sig) {
				t.Fatalf("202 for hook %q with signature %q", name, sig)
			}
			if len(evs) != before+1 {
				t.Fatalf("202 but %d new events", len(evs)-before)
			}
			ev := evs[len(evs)-1]
			if ev.Channel != Channel || ev.Actor.ID != "webhook:"+name || !strings.HasPrefix(ev.Thread.Key, name+"/") ||
				!strings.HasPrefix(ev.EventID, name+"/") || ev.Text == "" || len(ev.Text) > MaxText || !utf8.ValidString(ev.Text) {
				t.Fatalf("malformed event %+v", ev)
			}
		case http.StatusUnauthorized, http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
			if len(evs) != before {
				t.Fatalf("status %d but the sink got an event", rw.Code)
			}
		case http.StatusNotFound:
			if name != "" {
				t.Fatalf("404 for hook %q", name)
			}
		default:
			t.Fatalf("unexpected status %d: %s", rw.Code, rw.Body)
		}
	})
}
