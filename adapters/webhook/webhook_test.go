package webhook

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
)

func TestSignedRequestRunsAndRepliesStayVisible(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks()})
	r := e.signed(t, "ci", ciSecret, `{"text":"deploy api 1.2.3"}`, "")
	if r.status != http.StatusAccepted || r.resp.RunID == "" || r.resp.Duplicate {
		t.Fatalf("got %d %s, want 202 with a new run", r.status, r.body)
	}
	if !strings.HasPrefix(r.resp.EventID, "ci/") {
		t.Errorf("event_id = %q, want the hook name as prefix", r.resp.EventID)
	}
	run, err := e.h.Store.RunGet(context.Background(), r.resp.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Requester != "webhook:ci" || run.Thread != (core.Thread{Channel: Channel, Key: "ci/ci"}) || run.Flow != "deploy" {
		t.Errorf("run = requester %q thread %v flow %q; want webhook:ci in webhook:ci/ci running deploy", run.Requester, run.Thread, run.Flow)
	}
	ap := e.h.WaitApprovalPending(r.resp.RunID)
	if len(e.h.Dispatches()) != 0 {
		t.Fatal("the tool ran before anyone approved it")
	}
	if _, err := e.h.Decide("console:admin", ap.ID, "approve", ""); err != nil {
		t.Fatalf("approve: %v", err)
	}
	e.h.WaitRun(r.resp.RunID, core.RunSucceeded)
	e.h.WaitIdle()
	if d := e.h.Dispatches(); len(d) != 1 || d[0].Args["service"] != "api" || d[0].Args["version"] != "1.2.3" {
		t.Fatalf("dispatches = %+v, want one deploy of api 1.2.3", d)
	}
	// The card and the result went through the webhook Platform and are
	// recorded in the outbox as sent, where the API shows them.
	var card, result bool
	for _, m := range e.rec.Received() {
		if m.Thread != run.Thread {
			t.Errorf("message to %v, want %v", m.Thread, run.Thread)
		}
		card = card || strings.Contains(m.Text, "deploy")
		result = result || strings.Contains(m.Text, "deployed api 1.2.3 to staging")
	}
	if !card || !result {
		t.Errorf("received %+v; want the card and the result", e.rec.Received())
	}
	for _, d := range e.h.Deliveries() {
		if d.Status != core.DeliverySent || len(d.Refs) == 0 || d.Refs[0].Channel != Channel {
			t.Errorf("delivery %s: status %s refs %+v, want sent with a webhook ref", d.ID, d.Status, d.Refs)
		}
	}
}

func TestReplayedBodyIsDuplicate(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks()})
	body := `{"text":"deploy api 1.2.3"}`
	first := e.signed(t, "ci", ciSecret, body, "")
	again := e.signed(t, "ci", ciSecret, body, "")
	if first.status != http.StatusAccepted || again.status != http.StatusAccepted {
		t.Fatalf("statuses %d, %d; want 202 twice", first.status, again.status)
	}
	if !again.resp.Duplicate || again.resp.RunID != first.resp.RunID || again.resp.EventID != first.resp.EventID {
		t.Fatalf("replay = %+v, want a duplicate of %+v", again.resp, first.resp)
	}
	e.h.WaitApprovalPending(first.resp.RunID)
	if c := e.h.Counts(); c.Runs != 1 || c.Approvals != 1 {
		t.Fatalf("counts %+v, want one run and one approval", c)
	}
}

func TestEventIDFieldIsTheDedupKey(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks()})
	a := e.signed(t, "ci", ciSecret, `{"text":"deploy api 1.2.3","event_id":"build-77"}`, "")
	// A retry of event build-77 with a re-serialized body is still the
	// same event.
	b := e.signed(t, "ci", ciSecret, `{ "event_id": "build-77", "text": "deploy api 1.2.3" }`, "")
	// The same command as a new event is new work.
	c := e.signed(t, "ci", ciSecret, `{"text":"deploy api 1.2.3","event_id":"build-78"}`, "")
	if a.resp.EventID != "ci/build-77" || !b.resp.Duplicate || b.resp.RunID != a.resp.RunID {
		t.Errorf("a=%+v b=%+v; want b a duplicate of event build-77", a.resp, b.resp)
	}
	if c.resp.Duplicate || c.resp.RunID == "" || c.resp.RunID == a.resp.RunID {
		t.Errorf("c=%+v; want a second run", c.resp)
	}
	for _, bad := range []string{`{"text":"x","event_id":""}`, `{"text":"x","event_id":7}`,
		`{"text":"x","event_id":"` + strings.Repeat("d", MaxDeliveryID+1) + `"}`} {
		if got := e.signed(t, "ci", ciSecret, bad, ""); got.status != http.StatusUnprocessableEntity {
			t.Errorf("%s: %d, want 422", bad, got.status)
		}
	}
}

// A captured request replayed with a different unsigned delivery header is
// still the same event: nothing outside the signed body counts.
func TestReplayWithNewHeaderIsADuplicate(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks()})
	first := e.signed(t, "ci", ciSecret, `{"text":"deploy api 1.2.3"}`, "delivery-1")
	replay := e.signed(t, "ci", ciSecret, `{"text":"deploy api 1.2.3"}`, "delivery-2")
	if first.resp.RunID == "" || !replay.resp.Duplicate || replay.resp.RunID != first.resp.RunID {
		t.Fatalf("first=%+v replay=%+v; want the replay a duplicate of the first run", first.resp, replay.resp)
	}
}

func TestAlertmanagerTemplate(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks()})
	body, err := os.ReadFile("testdata/alertmanager.json")
	if err != nil {
		t.Fatal(err)
	}
	r := e.post(t, "alertmanager", body, Sign(amSecret, body), "")
	if r.status != http.StatusAccepted || r.resp.RunID == "" {
		t.Fatalf("got %d %s, want 202 with a run", r.status, r.body)
	}
	run, err := e.h.Store.RunGet(context.Background(), r.resp.RunID)
	if err != nil {
		t.Fatal(err)
	}
	wantThread := core.Thread{Channel: Channel, Key: `alertmanager/{}:{alertname="ApiErrorRate"}`}
	if run.Thread != wantThread || run.Args["service"] != "api" || run.Args["version"] != "1.2.2" || run.Requester != "webhook:alertmanager" {
		t.Fatalf("run thread %v args %v requester %q; want %v, api 1.2.2, webhook:alertmanager", run.Thread, run.Args, run.Requester, wantThread)
	}
	if run.Reason != `deploy "api" "1.2.2"` {
		t.Errorf("reason = %q, want the rendered command", run.Reason)
	}
}

// TestAttack_WebhookLabelSetsEnv: an alert label that reads as two words,
// the second "env=prod", must not move the deploy to production. Every
// value a template interpolates is one argument — written plainly or with
// {{quote}} — and env keeps its default; only a template that opts into
// raw text ({{verbatim}}) lets a value's words through.
func TestAttack_WebhookLabelSetsEnv(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: []Hook{
		{Name: "quoted", Secret: amSecret, Text: `deploy {{quote .labels.service}} {{quote .labels.version}}`},
		{Name: "bare", Secret: amSecret, Text: `deploy {{.labels.service}} {{.labels.version}}`},
		{Name: "verbatim", Secret: amSecret, Text: `deploy {{.labels.service}} {{verbatim .labels.version}}`},
	}})
	body := []byte(`{"labels":{"service":"api","version":"1.2.3 env=prod"}}`)
	for _, hook := range []string{"quoted", "bare"} {
		r := e.post(t, hook, body, Sign(amSecret, body), "")
		if r.status != http.StatusAccepted || r.resp.RunID == "" {
			t.Fatalf("%s: got %d %s, want 202 with a run", hook, r.status, r.body)
		}
		run, err := e.h.Store.RunGet(context.Background(), r.resp.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Args["env"] != "staging" || run.Args["version"] != "1.2.3 env=prod" || run.Args["service"] != "api" {
			t.Fatalf("%s labels routed to %v; want env left at staging", hook, run.Args)
		}
	}
	r := e.post(t, "verbatim", body, Sign(amSecret, body), "")
	if run, err := e.h.Store.RunGet(context.Background(), r.resp.RunID); err != nil || run.Args["env"] != "prod" {
		t.Fatalf("verbatim template: %v %v; the opt-in must pass the value's words as written", run, err)
	}
}

// TestRefusalsRecordNothing posts every kind of bad request and checks the
// status, and that the store holds nothing afterwards.
func TestRefusalsRecordNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, Config{Hooks: defaultHooks(), MaxBodyBytes: 4 << 10})
	good := []byte(`{"text":"deploy api 1.2.3"}`)
	big := []byte(`{"text":"deploy api 1.2.3","pad":"` + strings.Repeat("x", 5<<10) + `"}`)
	cases := []struct {
		name, hook string
		body       []byte
		sig        string
		want       int
	}{
		{"MissingSignature", "ci", good, "", http.StatusUnauthorized},
		{"WrongSecret", "ci", good, Sign("not-the-secret", good), http.StatusUnauthorized},
		{"OtherHooksSecret", "ci", good, Sign(amSecret, good), http.StatusUnauthorized},
		{"SignatureOfAnotherBody", "ci", good, Sign(ciSecret, []byte(`{"text":"status"}`)), http.StatusUnauthorized},
		{"NoPrefix", "ci", good, strings.TrimPrefix(Sign(ciSecret, good), "sha256="), http.StatusUnauthorized},
		{"NotHex", "ci", good, "sha256=zz", http.StatusUnauthorized},
		{"Truncated", "ci", good, Sign(ciSecret, good)[:40], http.StatusUnauthorized},
		{"UnknownHook", "nope", good, Sign(ciSecret, good), http.StatusUnauthorized},
		{"UnknownHookUnsigned", "nope", good, "", http.StatusUnauthorized},
		{"MalformedJSON", "ci", []byte(`{"text":`), "", http.StatusBadRequest},
		{"NotAnObject", "ci", []byte(`["deploy api 1.2.3"]`), "", http.StatusBadRequest},
		{"TrailingData", "ci", []byte(`{"text":"deploy api 1.2.3"} {}`), "", http.StatusBadRequest},
		{"Oversize", "ci", big, "", http.StatusRequestEntityTooLarge},
		{"OversizeUnknownHook", "nope", big, "", http.StatusRequestEntityTooLarge},
		{"NoText", "ci", []byte(`{"msg":"deploy"}`), "", http.StatusUnprocessableEntity},
		{"TextNotString", "ci", []byte(`{"text":42}`), "", http.StatusUnprocessableEntity},
		{"BlankText", "ci", []byte(`{"text":"  "}`), "", http.StatusUnprocessableEntity},
		{"TemplateMissingKey", "alertmanager", []byte(`{"groupKey":"g"}`), "", http.StatusUnprocessableEntity},
		{"ThreadTemplateMissingKey", "alertmanager", []byte(`{"alerts":[{"labels":{"service":"api","version":"1"}}]}`), "", http.StatusUnprocessableEntity},
	}
	secrets := map[string]string{"ci": ciSecret, "alertmanager": amSecret}
	var unauthorized []byte
	for _, c := range cases {
		sig := c.sig
		if sig == "" && c.want != http.StatusUnauthorized {
			sig = Sign(secrets[c.hook], c.body) // well signed, bad content
		}
		r := e.post(t, c.hook, c.body, sig, "")
		if r.status != c.want {
			t.Errorf("%s: got %d %s, want %d", c.name, r.status, r.body, c.want)
		}
		if c.want == http.StatusUnauthorized {
			// Unknown hook and bad signature must be indistinguishable.
			if unauthorized == nil {
				unauthorized = r.body
			} else if !bytes.Equal(unauthorized, r.body) {
				t.Errorf("%s: 401 body %q differs from %q", c.name, r.body, unauthorized)
			}
		}
	}
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/hooks/ci", nil)
	if res, err := e.srv.Client().Do(req); err != nil || res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v, want 405", res.StatusCode, err)
	}
	// The adapter does all its work before it answers: it has no
	// background work to wait for (no core.Drainer), so the refusals above
	// have left all they ever will.
	if _, ok := any(e.a).(core.Drainer); ok {
		t.Fatal("the webhook adapter now works after answering: Drain it before asserting emptiness")
	}
	e.h.StoreEmpty(t)
	if got := e.h.Counts(); got != (adaptertest.Counts{}) {
		t.Errorf("counts %+v after refusals, want zero", got)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	sink := &fakeSink{}
	cases := map[string]Config{
		"BadName":       {Hooks: []Hook{{Name: "a/b", Secret: "s"}}},
		"EmptyName":     {Hooks: []Hook{{Name: "", Secret: "s"}}},
		"Duplicate":     {Hooks: []Hook{{Name: "a", Secret: "s"}, {Name: "a", Secret: "t"}}},
		"EmptySecret":   {Hooks: []Hook{{Name: "a"}}},
		"BadText":       {Hooks: []Hook{{Name: "a", Secret: "s", Text: "{{.x"}}},
		"BadThreadTmpl": {Hooks: []Hook{{Name: "a", Secret: "s", Thread: "{{end}}"}}},
	}
	for name, cfg := range cases {
		if _, err := New(cfg, Deps{Sink: sink}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
	if _, err := New(Config{Hooks: defaultHooks()}, Deps{}); !errors.Is(err, ErrConfig) {
		t.Errorf("no sink: err = %v, want ErrConfig", err)
	}
	if _, err := New(Config{}, Deps{Sink: sink}); err != nil {
		t.Errorf("no hooks: %v, want a working adapter that refuses every request", err)
	}
}

func TestSendRecordsOnlyWebhookThreads(t *testing.T) {
	t.Parallel()
	a, err := New(Config{}, Deps{Sink: &fakeSink{}})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := a.Send(context.Background(), core.Outbound{Key: "o1:0", Thread: core.Thread{Channel: Channel, Key: "ci/ci"}, Kind: core.KindReply, Text: "hi"})
	if err != nil || ref != (core.MessageRef{Channel: Channel, ID: "o1:0"}) {
		t.Errorf("Send = %+v, %v; want the outbox key as reference", ref, err)
	}
	_, err = a.Send(context.Background(), core.Outbound{Key: "o2:0", Thread: core.Thread{Channel: "slack", Key: "C1"}})
	var pe *core.PermanentError
	if !errors.As(err, &pe) {
		t.Errorf("Send to a slack thread: %v, want a PermanentError", err)
	}
}

func TestConformance(t *testing.T) {
	adaptertest.RunConformance(t, adaptertest.Suite{
		New: func(t *testing.T, o adaptertest.HarnessOptions) (*adaptertest.Harness, adaptertest.Fake) {
			e := setupWith(t, Config{Hooks: defaultHooks()}, o)
			return e.h, e.rec
		},
		Lacks: map[adaptertest.Capability]string{
			adaptertest.CapChat: "a webhook only sends requests: its runs' questions and approvals are answered " +
				"in the console (or any chat channel), which the question and the card link to",
		},
		Thread:    core.Thread{Channel: Channel, Key: "ci/ci"},
		Requester: "webhook:ci",
		// Nothing renders webhook text as markup here: the console escapes
		// it when it shows it. So it must arrive exactly as authored.
		Inert: func(input, rendered string) error {
			if input != rendered {
				return errors.New("text changed in rendering")
			}
			return nil
		},
		BadInput: func(t *testing.T, h *adaptertest.Harness) {
			a, err := New(Config{Hooks: defaultHooks(), MaxBodyBytes: 1 << 10}, Deps{Sink: h.Engine})
			if err != nil {
				t.Fatal(err)
			}
			srv := newServer(t, a)
			for _, c := range []struct {
				body, sig string
				want      int
			}{
				{`{"text":"deploy api 1.2.3"}`, "", http.StatusUnauthorized},
				{`{"text":"deploy api 1.2.3"}`, Sign("forged", []byte(`{"text":"deploy api 1.2.3"}`)), http.StatusUnauthorized},
				{`{"text":`, Sign(ciSecret, []byte(`{"text":`)), http.StatusBadRequest},
				{strings.Repeat(" ", 2<<10) + `{"text":"deploy api 1.2.3"}`, "", http.StatusRequestEntityTooLarge},
			} {
				if got := postRaw(t, srv, "ci", []byte(c.body), c.sig); got != c.want {
					t.Errorf("body %.30q: got %d, want %d", c.body, got, c.want)
				}
			}
		},
	})
}
