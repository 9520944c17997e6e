package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/tools"
	"github.com/opsgate/opsgate/internal/mcpfake"
)

// httpFake serves mcpfake over Streamable HTTP on loopback, requiring
// "Authorization: Bearer <token>".
func httpFake(t *testing.T, token string) (*httptest.Server, Server) {
	t.Helper()
	f := &mcpfake.Fake{Mode: mcpfake.ModeOK, Secret: "hunter2-secret"}
	srv := httptest.NewServer(f.Handler(token))
	t.Cleanup(srv.Close)
	return srv, Server{
		Name: "h", URL: srv.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer " + token},
		ConnectTimeout: 5 * time.Second, CallTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	}
}

// closedURL is a loopback URL nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/mcp"
}

func TestHTTPServerWithHeaders(t *testing.T) {
	t.Parallel()
	_, s := httpFake(t, "tok-1234567")
	r, _ := start(t, s)
	res, err := call(t, r, "h.echo", map[string]any{"text": "over http"})
	if err != nil || res.Output != "echo: over http" {
		t.Fatalf("echo: %q %v", res.Output, err)
	}
	if tl := lookup(t, r, "h.write"); !tl.Destructive || tl.Idempotent {
		t.Fatalf("write: %+v", tl)
	}
	_, err = call(t, r, "h.fail", nil)
	var te *ToolError
	if !errors.As(err, &te) {
		t.Fatalf("isError over http: %v", err)
	}
}

func TestHTTPWrongCredentialFailsClearlyAndMasked(t *testing.T) {
	t.Parallel()
	_, s := httpFake(t, "right-token")
	s.Headers = map[string]string{"Authorization": "Bearer wrong-token"}
	r, logs := start(t, s)
	_, err := r.LookupTool(context.Background(), "h.echo")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("lookup: %v", err)
	}
	waitLog(t, logs, "upstream server unavailable", "server=h")
	if strings.Contains(logs.String()+err.Error(), "wrong-token") {
		t.Fatal("the credential reached an error or the log")
	}
}

func TestHTTPServerDownIsAToolErrorNotAHang(t *testing.T) {
	t.Parallel()
	u := closedURL(t) + "?access_token=qs-secret-value"
	s := Server{Name: "h", URL: u, ConnectTimeout: 5 * time.Second, MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}
	r, logs := start(t, s)
	_, err := r.LookupTool(context.Background(), "h.echo")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("lookup: %v", err)
	}
	rep := r.Reports(context.Background())[0]
	waitLog(t, logs, "upstream server unavailable")
	if all := err.Error() + rep.Err + rep.Target + logs.String(); strings.Contains(all, "qs-secret-value") {
		t.Fatalf("a URL credential leaked: %s", all)
	}
}

func TestHTTPServerGoneAfterListingFailsTheCall(t *testing.T) {
	t.Parallel()
	srv, s := httpFake(t, "tok-1234567")
	r, _ := start(t, s)
	echo := lookup(t, r, "h.echo")
	srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	// The first call may meet a kept-alive connection the server closed
	// (outcome unknown: it might have read the request); once opsgate must
	// dial, the request provably was not sent.
	if _, err := echo.Runner.Run(ctx, tools.Call{Args: map[string]any{"text": "x"}}); err == nil || !strings.Contains(err.Error(), "upstream h") {
		t.Fatalf("call to a gone server: %v", err)
	}
	_, err := echo.Runner.Run(ctx, tools.Call{Args: map[string]any{"text": "x"}})
	if !errors.Is(err, ErrUnavailable) || !containsAll(err.Error(), "upstream h", "connection refused") {
		t.Fatalf("second call to a gone server: %v", err)
	}
}

func TestHTTPHangTimesOut(t *testing.T) {
	t.Parallel()
	_, s := httpFake(t, "tok-1234567")
	s.CallTimeout = 300 * time.Millisecond
	r, _ := start(t, s)
	if _, err := call(t, r, "h.hang", nil); !errors.Is(err, tools.ErrTimeout) {
		t.Fatalf("hang: %v", err)
	}
	if res, err := call(t, r, "h.echo", map[string]any{"text": "ok"}); err != nil || res.Output != "echo: ok" {
		t.Fatalf("after a timeout: %q %v", res.Output, err)
	}
}

func TestHTTPOversizedAnswerRefused(t *testing.T) {
	t.Parallel()
	_, s := httpFake(t, "tok-1234567")
	s.MaxMessage = 8 << 10
	r, _ := start(t, s)
	if _, err := call(t, r, "h.huge", map[string]any{"bytes": 64 << 10}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Fatalf("oversized answer: %v", err)
	}
}

func TestHTTPRedirectToAnotherHostRefused(t *testing.T) {
	t.Parallel()
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		http.Error(w, "nope", http.StatusTeapot)
	}))
	defer other.Close()
	// Another host: same loopback address, another port is another host.
	redir := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer redir.Close()
	s := Server{Name: "h", URL: redir.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer tok-1234567"},
		ConnectTimeout: 5 * time.Second, MinBackoff: 20 * time.Millisecond}
	r, _ := start(t, s)
	_, err := r.LookupTool(context.Background(), "h.echo")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "redirect to a different host refused") {
		t.Fatalf("lookup: %v", err)
	}
	if leaked.Load() {
		t.Fatal("the credential followed the redirect")
	}
}

// TestHTTPServerDyingMidCallFailsAtOnce: a Streamable HTTP server whose
// connection drops while a call's answer streams fails the call as soon
// as the connection is gone — with the outcome unknown — not after the
// call's timeout (an hour here; the test's bound is far shorter).
func TestHTTPServerDyingMidCallFailsAtOnce(t *testing.T) {
	t.Parallel()
	f := &mcpfake.Fake{Mode: mcpfake.ModeOK}
	srv := httptest.NewServer(f.Handler(""))
	t.Cleanup(srv.Close)
	// The process dies: nothing listens any more, and the connection of
	// the call under way drops.
	f.OnDie = func() { _ = srv.Listener.Close() }
	s := Server{Name: "h", URL: srv.URL + "/mcp", ConnectTimeout: 5 * time.Second, CallTimeout: time.Hour,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	r, _ := start(t, s)
	_, err := call(t, r, "h.die", nil)
	if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, tools.ErrTimeout) || !strings.Contains(err.Error(), "upstream h") {
		t.Fatalf("a server dying mid-call: %v", err)
	}
}

// TestCallWaitsForReconnectBeyondItsTimeout: a call made while its server
// is reconnecting waits for the connection attempt (bounded by
// connect_timeout), and only then does its own timeout start — a server
// that takes longer than `timeout` to come back is not a tool that hung.
// The server is held down until the call has waited past its timeout.
func TestCallWaitsForReconnectBeyondItsTimeout(t *testing.T) {
	t.Parallel()
	f := &mcpfake.Fake{Mode: mcpfake.ModeOK}
	var down atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	var heldOnce sync.Once
	h := f.Handler("")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			heldOnce.Do(func() { close(held) })
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	var releaseOnce sync.Once
	open := func() { releaseOnce.Do(func() { down.Store(false); close(release) }) }
	t.Cleanup(open) // before srv.Close, which waits for held requests
	f.OnDie = func() { down.Store(true) }
	s := Server{Name: "h", URL: srv.URL + "/mcp", ConnectTimeout: bound, CallTimeout: 5 * time.Second,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	r, _ := start(t, s)
	if _, err := call(t, r, "h.die", nil); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("a server dying mid-call: %v", err)
	}
	type answer struct {
		res tools.Result
		err error
	}
	got := make(chan answer, 1)
	began := time.Now()
	go func() {
		res, err := call(t, r, "h.echo", map[string]any{"text": "back"})
		got <- answer{res, err}
	}()
	select {
	case <-held:
	case <-time.After(bound):
		t.Fatal("no reconnect attempt reached the server")
	}
	// Keep the server down until the waiting call is past its timeout
	// (a lower bound only: load makes it longer, never shorter).
	select {
	case a := <-got:
		t.Fatalf("the call ended while its server was still down: %q %v", a.res.Output, a.err)
	case <-time.After(s.CallTimeout - time.Since(began) + 500*time.Millisecond):
	}
	open()
	a := <-got
	if a.err != nil || a.res.Output != "echo: back" {
		t.Fatalf("after the server came back: %q %v", a.res.Output, a.err)
	}
}
