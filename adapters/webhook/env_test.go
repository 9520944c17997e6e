package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/opsgate/opsgate/adapters/adaptertest"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

const (
	amSecret = "alertmanager-secret"
	ciSecret = "ci-secret"
)

// recorder is the webhook Platform with what it was handed remembered, so
// tests (and the conformance suite) can see what reached the thread.
type recorder struct {
	*Adapter
	adaptertest.Log
}

func (r *recorder) Send(ctx context.Context, m core.Outbound) (core.MessageRef, error) {
	ref, err := r.Adapter.Send(ctx, m)
	if err == nil {
		r.Sent(m, ref)
	}
	return ref, err
}

var _ delivery.Platform = (*recorder)(nil)

// env is one harness with the webhook adapter inbound (on an httptest
// server at 127.0.0.1) and outbound (as the delivery Platform).
type env struct {
	h   *adaptertest.Harness
	a   *Adapter
	rec *recorder
	srv *httptest.Server
}

func defaultHooks() []Hook {
	return []Hook{
		{Name: "alertmanager", Secret: amSecret,
			Text:   `deploy {{(index .alerts 0).labels.service}} {{(index .alerts 0).labels.version}}`,
			Thread: `{{.groupKey}}`},
		{Name: "ci", Secret: ciSecret},
	}
}

func setup(t *testing.T, cfg Config) *env { return setupWith(t, cfg, adaptertest.HarnessOptions{}) }

// setupWith is setup on a harness with o's options (a case's agents and
// tools).
func setupWith(t *testing.T, cfg Config, o adaptertest.HarnessOptions) *env {
	t.Helper()
	e := &env{}
	o.Platform = func(h *adaptertest.Harness) delivery.Platform {
		a, err := New(cfg, Deps{Sink: h.Engine})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		e.a = a
		e.rec = &recorder{Adapter: a}
		return e.rec
	}
	e.h = adaptertest.NewHarness(t, o)
	e.srv = httptest.NewServer(e.a.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

type result struct {
	status int
	body   []byte
	resp   response
}

// ignoredDeliveryHeader is a header senders of other systems use for their
// delivery ids; opsgate must ignore it (it is outside the signature).
const ignoredDeliveryHeader = "X-Opsgate-Delivery"

// post sends body to /hooks/name with the given signature header (none
// when sig is "") and an unsigned delivery-id header (none when "").
func (e *env) post(t *testing.T, name string, body []byte, sig, deliveryID string) result {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/"+name, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set(SignatureHeader, sig)
	}
	if deliveryID != "" {
		req.Header.Set(ignoredDeliveryHeader, deliveryID)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := result{status: res.StatusCode}
	if r.body, err = io.ReadAll(res.Body); err != nil {
		t.Fatal(err)
	}
	if r.status == http.StatusAccepted {
		if err := json.Unmarshal(r.body, &r.resp); err != nil {
			t.Fatalf("202 body %q: %v", r.body, err)
		}
	}
	return r
}

// signed posts body to hook name signed with secret.
func (e *env) signed(t *testing.T, name, secret, body, deliveryID string) result {
	t.Helper()
	return e.post(t, name, []byte(body), Sign(secret, []byte(body)), deliveryID)
}
