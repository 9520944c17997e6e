package tools

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// seen is what a test server received.
type seen struct {
	method string
	uri    string
	path   string // escaped path
	query  url.Values
	header http.Header
	body   string
}

// recorder starts a loopback server that records every request and answers
// with the given handler (or 200 "ok"). Requests arrive on the channel.
func recorder(t *testing.T, answer http.HandlerFunc) (*httptest.Server, chan seen, *atomic.Int64) {
	t.Helper()
	ch := make(chan seen, 16)
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		select {
		case ch <- seen{r.Method, r.RequestURI, r.URL.EscapedPath(), r.URL.Query(), r.Header.Clone(), string(b)}:
		default:
		}
		if answer != nil {
			answer(w, r)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, ch, &hits
}

func TestHTTPRun(t *testing.T) {
	t.Parallel()

	t.Run("RendersMethodURLHeadersBody", func(t *testing.T) {
		t.Parallel()
		srv, ch, _ := recorder(t, nil)
		h := &HTTP{
			Method:  "{{.verb}}",
			URL:     srv.URL + "/api/{{.service}}/items?q={{.q}}&p={{query .q}}",
			Headers: map[string]string{"X-Team": "{{.team}}", "content-type": "application/json"},
			Body:    `{"service": {{json .service}}, "n": {{.n}}}`,
		}
		args := map[string]any{"verb": "post", "service": `a/b c"?#`, "q": "x&admin=1", "team": "sre ops", "n": 3.0}
		res, err := h.Run(context.Background(), Call{RunID: "run-7", IdempotencyKey: "key-7", Args: args, Receipt: "h.p.s"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 200 || res.Output != "ok" {
			t.Fatalf("result %+v", res)
		}
		got := <-ch
		if got.method != "POST" {
			t.Errorf("method %q", got.method)
		}
		if want := "/api/a%2Fb%20c%22%3F%23/items"; got.path != want {
			t.Errorf("path %q, want %q", got.path, want)
		}
		if len(got.query) != 2 || got.query.Get("q") != "x&admin=1" || got.query.Get("p") != "x&admin=1" {
			t.Errorf("query %v: an argument added parameters", got.query)
		}
		if got.header.Get("Idempotency-Key") != "key-7" || got.header.Get("X-Opsgate-Run-Id") != "run-7" || got.header.Get("Opsgate-Receipt") != "h.p.s" {
			t.Errorf("opsgate headers %v", got.header)
		}
		if got.header.Get("X-Team") != "sre ops" || got.header.Get("Content-Type") != "application/json" {
			t.Errorf("tool headers %v", got.header)
		}
		var body struct {
			Service string
			N       int
		}
		if err := json.Unmarshal([]byte(got.body), &body); err != nil || body.Service != `a/b c"?#` || body.N != 3 {
			t.Errorf("body %q (%v)", got.body, err)
		}
	})

	t.Run("RawInsertsUnescaped", func(t *testing.T) {
		t.Parallel()
		srv, ch, _ := recorder(t, nil)
		h := &HTTP{URL: srv.URL + "/{{raw .path}}"}
		if _, err := h.Run(context.Background(), call(map[string]any{"path": "v1/status"})); err != nil {
			t.Fatal(err)
		}
		if got := <-ch; got.path != "/v1/status" {
			t.Fatalf("path %q", got.path)
		}
	})

	t.Run("DefaultMethodIsGETWithoutBody", func(t *testing.T) {
		t.Parallel()
		srv, ch, _ := recorder(t, nil)
		h := &HTTP{URL: srv.URL + "/x"}
		if _, err := h.Run(context.Background(), call(nil)); err != nil {
			t.Fatal(err)
		}
		if got := <-ch; got.method != "GET" || got.body != "" {
			t.Fatalf("got %+v", got)
		}
	})

	t.Run("Non2xxIsStatusError", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := recorder(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "down for maintenance")
		})
		h := &HTTP{URL: srv.URL}
		res, err := h.Run(context.Background(), call(nil))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != 503 {
			t.Fatalf("err %v, want StatusError 503", err)
		}
		if res.Status != 503 || res.Output != "down for maintenance" {
			t.Fatalf("result %+v", res)
		}
	})

	t.Run("ResponseIsCappedWithLength", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := recorder(t, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("y", 10000))
		})
		h := &HTTP{URL: srv.URL, MaxOutput: 100}
		res, err := h.Run(context.Background(), call(nil))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("y", 100) + "\n[… truncated 9900 bytes]"; !res.Truncated || res.Output != want {
			t.Fatalf("output %q", res.Output)
		}
	})

	t.Run("ResponseIsCappedChunked", func(t *testing.T) {
		t.Parallel()
		srv, _, _ := recorder(t, func(w http.ResponseWriter, _ *http.Request) {
			for range 10 {
				_, _ = io.WriteString(w, strings.Repeat("z", 1000))
				w.(http.Flusher).Flush()
			}
		})
		h := &HTTP{URL: srv.URL, MaxOutput: 100}
		res, err := h.Run(context.Background(), call(nil))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Repeat("z", 100) + "\n[… truncated 9900 bytes]"; !res.Truncated || res.Output != want {
			t.Fatalf("output %q", res.Output)
		}
	})

	t.Run("HeaderInjectionRefused", func(t *testing.T) {
		t.Parallel()
		srv, _, hits := recorder(t, nil)
		h := &HTTP{URL: srv.URL, Headers: map[string]string{"X-Note": "{{.note}}"}}
		for _, v := range []string{"a\r\nX-Evil: 1", "a\nb", "a\rb"} {
			if _, err := h.Run(context.Background(), call(map[string]any{"note": v})); err == nil || !strings.Contains(err.Error(), "CR") {
				t.Errorf("value %q: err %v", v, err)
			}
		}
		if hits.Load() != 0 {
			t.Fatal("a request with an injected header was sent")
		}
	})

	t.Run("RedirectToOtherHostRefused", func(t *testing.T) {
		t.Parallel()
		other, _, otherHits := recorder(t, nil)
		srv, _, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		})
		h := &HTTP{URL: srv.URL + "/x", Client: &http.Client{}}
		_, err := h.Run(context.Background(), call(nil))
		if !errors.Is(err, ErrRedirectRefused) {
			t.Fatalf("err %v, want ErrRedirectRefused", err)
		}
		if otherHits.Load() != 0 {
			t.Fatal("the other host was contacted")
		}
	})

	t.Run("RedirectOnSameHostFollowed", func(t *testing.T) {
		t.Parallel()
		srv, ch, _ := recorder(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", http.StatusTemporaryRedirect)
				return
			}
			_, _ = io.WriteString(w, "moved")
		})
		h := &HTTP{Method: "PUT", URL: srv.URL + "/old", Body: "payload"}
		res, err := h.Run(context.Background(), call(nil))
		if err != nil || res.Output != "moved" {
			t.Fatalf("got %+v, %v", res, err)
		}
		<-ch
		if got := <-ch; got.path != "/new" || got.body != "payload" || got.header.Get("Idempotency-Key") != "idem-1" {
			t.Fatalf("redirected request %+v", got)
		}
	})

	t.Run("TimeoutIsErrTimeout", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		srv, _, _ := recorder(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		h := &HTTP{URL: srv.URL, Timeout: 200 * time.Millisecond}
		// The server holds the request until the test ends: a Run that
		// returns at all returned on its own timeout, whatever the load.
		_, err := h.Run(context.Background(), call(nil))
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("err %v, want ErrTimeout", err)
		}
	})

	t.Run("ContextCancel", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		t.Cleanup(func() { close(release) })
		srv, _, _ := recorder(t, func(_ http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := (&HTTP{URL: srv.URL}).Run(ctx, call(nil))
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Fatalf("err %v, want context.Canceled", err)
		}
	})

	t.Run("MissingKeyIsTemplateError", func(t *testing.T) {
		t.Parallel()
		srv, _, hits := recorder(t, nil)
		for _, h := range []*HTTP{
			{URL: srv.URL + "/{{.nope}}"},
			{URL: srv.URL, Headers: map[string]string{"X-A": "{{.nope}}"}},
			{URL: srv.URL, Body: "{{.nope}}"},
		} {
			if _, err := h.Run(context.Background(), call(map[string]any{"x": 1})); !errors.Is(err, ErrTemplate) {
				t.Errorf("err %v, want ErrTemplate", err)
			}
		}
		if hits.Load() != 0 {
			t.Fatal("a request was sent")
		}
	})

	t.Run("ArgumentCannotChangeHost", func(t *testing.T) {
		t.Parallel()
		h := &HTTP{URL: "http://127.0.0.1:1/{{.p}}"}
		got, err := h.Preview(context.Background(), call(map[string]any{"p": "@evil.example/x"}))
		if err != nil || !strings.HasPrefix(got, "GET http://127.0.0.1:1/%40evil.example%2Fx\n") {
			t.Fatalf("got %q, %v", got, err)
		}
	})
}

func TestHTTPValidate(t *testing.T) {
	t.Parallel()
	cases := map[string]*HTTP{
		"EmptyURL":           {},
		"UnparsableURL":      {URL: "http://x/{{.a"},
		"NotHTTP":            {URL: "file:///etc/passwd"},
		"NoHost":             {URL: "http:///x"},
		"BadHeaderName":      {URL: "http://x", Headers: map[string]string{"X Bad": "v"}},
		"ReservedHeader":     {URL: "http://x", Headers: map[string]string{"idempotency-key": "v"}},
		"RunIDHeader":        {URL: "http://x", Headers: map[string]string{"X-Opsgate-Run-Id": "v"}},
		"ReceiptHeader":      {URL: "http://x", Headers: map[string]string{"opsgate-receipt": "v"}},
		"DuplicateHeader":    {URL: "http://x", Headers: map[string]string{"x-a": "1", "X-A": "2"}},
		"UnparsableBody":     {URL: "http://x", Body: "{{if}}"},
		"UnparsableHeader":   {URL: "http://x", Headers: map[string]string{"X-A": "{{"}},
		"NegativeTimeout":    {URL: "http://x", Timeout: -time.Second},
		"UnparsableMethod":   {URL: "http://x", Method: "{{.m"},
		"NegativePreviewCap": {URL: "http://x", PreviewMax: -1},
	}
	for name, h := range cases {
		if err := h.Validate(); err == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
	ok := &HTTP{Method: "POST", URL: "https://status.internal/api/{{.service}}", Headers: map[string]string{"Authorization": "Bearer x"}, Body: "{{json .}}"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid tool refused: %v", err)
	}
}

func TestHTTPPreview(t *testing.T) {
	t.Parallel()

	t.Run("RendersWithoutSendingAndMasksSecrets", func(t *testing.T) {
		t.Parallel()
		srv, _, hits := recorder(t, nil)
		base, _ := url.Parse(srv.URL)
		h := &HTTP{
			Method: "POST",
			URL:    "http://deployer:s3cret@" + base.Host + "/deploy/{{.service}}?api_token={{.tok}}&env={{.env}}",
			Headers: map[string]string{
				"Authorization": "Bearer {{.tok}}",
				"X-Api-Key":     "k-123",
				"X-Team":        "sre",
				"X-Custom":      "Basic dXNlcjpwYXNz",
			},
			Body: `{"service": {{json .service}}}`,
		}
		got, err := h.Preview(context.Background(), Call{RunID: "r1", IdempotencyKey: "k1", Args: map[string]any{"service": "api", "tok": "tok-999", "env": "prod"}})
		if err != nil {
			t.Fatal(err)
		}
		if hits.Load() != 0 {
			t.Fatal("Preview sent the request")
		}
		for _, secret := range []string{"tok-999", "k-123", "s3cret", "dXNlcjpwYXNz"} {
			if strings.Contains(got, secret) {
				t.Errorf("preview shows secret %q:\n%s", secret, got)
			}
		}
		for _, want := range []string{
			"POST http://deployer:****@" + base.Host + "/deploy/api?",
			"api_token=****", "env=prod",
			"Authorization: Bearer ****\n", "X-Api-Key: ****\n", "X-Team: sre\n", "X-Custom: Basic ****\n",
			"Idempotency-Key: k1\n", "X-Opsgate-Run-Id: r1\n",
			"\n\n{\"service\": \"api\"}",
		} {
			if !strings.Contains(got, want) {
				t.Errorf("preview lacks %q:\n%s", want, got)
			}
		}
	})

	t.Run("BoundedInSize", func(t *testing.T) {
		t.Parallel()
		h := &HTTP{URL: "http://127.0.0.1:1/x", Body: "{{.big}}", PreviewMax: 64}
		got, err := h.Preview(context.Background(), call(map[string]any{"big": strings.Repeat("b", 1000)}))
		if err != nil || !strings.Contains(got, "[… truncated ") || len(got) > 64+40 {
			t.Fatalf("got %q, %v", got, err)
		}
	})

	t.Run("RenderFailureIsError", func(t *testing.T) {
		t.Parallel()
		h := &HTTP{URL: "http://127.0.0.1:1/x", Headers: map[string]string{"X-A": "{{.v}}"}}
		if _, err := h.Preview(context.Background(), call(map[string]any{"v": "a\r\nb"})); err == nil {
			t.Fatal("preview of an injected header succeeded")
		}
	})
}

func FuzzRenderURL(f *testing.F) {
	f.Add("api")
	f.Add("../../admin?x=1#frag")
	f.Add("@evil.example:80/%2e%2e")
	f.Add("a b&c=d+e")
	ts, err := compile("url", "http://127.0.0.1:8080/api/{{.s}}/status?q={{.s}}")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		raw, err := render(ts, escapeArgs(map[string]any{"s": s}))
		if err != nil {
			t.Fatal(err)
		}
		u, err := checkURL(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if u.Host != "127.0.0.1:8080" || u.User != nil || u.Fragment != "" {
			t.Fatalf("argument %q changed the URL: %q", s, raw)
		}
		segs := strings.Split(u.EscapedPath(), "/")
		if len(segs) != 4 || segs[1] != "api" || segs[3] != "status" {
			t.Fatalf("argument %q changed the path: %q", s, u.EscapedPath())
		}
		if got, _ := url.PathUnescape(segs[2]); got != s {
			t.Fatalf("segment %q does not decode to %q", segs[2], s)
		}
		if q := u.Query(); len(q) != 1 || q.Get("q") != s {
			t.Fatalf("argument %q changed the query: %v", s, q)
		}
	})
}
