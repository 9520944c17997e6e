package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/store/pgtest"
)

// The malformed-input sweep (issue 32, "keep what held"): every route the
// server serves — the listener's mounts and each surface's own route table
// (authority.Router), so a route added later is swept without anyone
// adding it here — gets NUL
// bytes, invalid UTF-8, control characters and oversized values in its path
// segments and query, the wrong methods, bodies that are not JSON or hold
// NULs and invalid UTF-8 in their strings, and an oversized body. Every
// answer must be 4xx where the input is malformed and never 5xx, and
// afterwards no table holds a row more than before: nothing was stored. On
// both stores.

const sweepToken = "sweep-admin-token-0123456789"

// sweepBadSegments are path segments (percent-encoded as sent) that name
// nothing that can exist.
var sweepBadSegments = []string{"%00", "%FF%FE", "x%00y", "%C0%80", "%7F", "a%0Ab", strings.Repeat("a", core.MaxIdentifier+1)}

// sweepNULObject sets the request fields the routes read to values holding
// a NUL, as JSON escapes.
const sweepNULObject = `{"thread":"acc\u0000bi","text":"deploy api 1.2.3\u0000","event_id":"e\u0000","action":"approve",
"reason":"r\u0000","scope":"call","args":{"service":"a\u0000"},"session_id":"s\u0000","sessionId":"s\u0000",
"request_id":"q\u0000","requestId":"q\u0000","decision":"allowOnce","agent":"o\u0000","action_id":"a\u0000",
"answer":"\u0000","answers":["\u0000"],"run_id":"\u0000","approval_id":"\u0000","token":"\u0000","id":"\u0000",
"jsonrpc":"2.0","method":"tools/call","params":{"name":"get_run","arguments":{"runId":"\u0000"}}}`

// sweepBodies are the malformed bodies every route that takes one gets.
var sweepBodies = []struct {
	name, contentType string
	body              []byte
}{
	{"truncated", "application/json", []byte(`{"thread":`)},
	{"array", "application/json", []byte(`[]`)},
	{"string", "application/json", []byte(`"x"`)},
	{"nul strings", "application/json", []byte(sweepNULObject)},
	{"invalid utf-8", "application/json", []byte("{\"thread\":\"\xff\xfe\",\"text\":\"deploy \xc0\x80\",\"event_id\":\"\xed\xa0\x80\"}")},
	{"nul form", "application/x-www-form-urlencoded", []byte("thread=acc%00bi&text=deploy%00&token=%00&reason=%FF&action=approve&answer=%00")},
	{"oversized", "application/json", append(append([]byte(`{"thread":"t","text":"`), bytes.Repeat([]byte("a"), 3<<20)...), `"}`...)},
}

func TestMalformedInputSweep(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sweep(t, backend)
		})
	}
}

// sweepServer is the server under the sweep and what it needs to sign in.
type sweepServer struct {
	url      string
	client   *http.Client
	patterns []string
	db       *sql.DB
	driver   string
}

func newSweepServer(t *testing.T, backend string) *sweepServer {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Server.DataDir = t.TempDir()
	cfg.Server.PublicURL = "https://ops.example.com"
	cfg.Store.DSN = filepath.Join(cfg.Server.DataDir, "opsgate.db")
	if backend == "postgres" {
		cfg.Store.Driver, cfg.Store.DSN = "postgres", pgtest.DSN(t)
	}
	// Platforms whose requests the sweep cannot sign are swept all the
	// same: their receivers must refuse garbage with 4xx too.
	cfg.Channels.Slack = config.Slack{Enabled: true, BotToken: "xoxb-test", SigningSecret: "s3cret", APIURL: "http://127.0.0.1:1/api/"}
	cfg.Channels.Telegram = config.Telegram{Enabled: true, BotToken: "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11", WebhookSecret: "hook-secret", APIURL: "http://127.0.0.1:1"}
	cfg.Channels.Discord = config.Discord{Enabled: true, BotToken: "bot", ApplicationID: "1234567890",
		PublicKey: strings.Repeat("ab", 32), APIURL: "http://127.0.0.1:1/api/v10"}
	cfg.Channels.Webhooks = []config.Webhook{{Name: "ci", Secret: "webhook-secret"}}
	cfg.Channels.Local = config.Local{Enabled: true}
	h, patterns, st := inProcessServer(t, cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &sweepServer{url: srv.URL, client: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}, patterns: patterns, db: st.(interface{ DB() *sql.DB }).DB(), driver: backend}
	s.signIn(t)
	return s
}

// inProcessServer opens, migrates and serves cfg's store in this process,
// with every mount serve serves (buildListener) behind the same root
// handler, and the admin token sweepToken; the engine is built but not
// run, so only the requests write. It returns the handler, every HTTP
// route (the mounts, and within a surface the routes its authority.Router
// lists) and the store, closed when the test ends.
func inProcessServer(t *testing.T, cfg *config.Config) (http.Handler, []string, store) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := openStoreWith(t.Context(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	tokens := []api.Token{{Name: "admin", Token: sweepToken, Actor: "console:admin"}}
	l, err := buildListener(cfg, st, tokens, serverKeys{audit: []byte("0123456789abcdef0123456789abcdef")}, nil, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, m := range l.mounts {
		patterns = append(patterns, m.pattern)
		if m.guards == nil {
			continue
		}
		for _, rt := range m.guards.Guards() {
			// HTTP patterns only ("/path", "METHOD /path"): MCP lists its
			// tools and JSON-RPC methods (tasks/get), swept through /mcp.
			isHTTP := strings.HasPrefix(rt.Entry, "/") || strings.Contains(rt.Entry, " /")
			if isHTTP && !slices.Contains(patterns, rt.Entry) {
				patterns = append(patterns, rt.Entry)
			}
		}
	}
	return rootHandler(l.mux()), patterns, st
}

// signIn opens a console session, so the console's routes are swept past
// their sign-in redirect.
func (s *sweepServer) signIn(t *testing.T) {
	t.Helper()
	res := s.do(t, "GET", "/signin", "", nil)
	u, _ := url.Parse(s.url)
	var nonce string
	for _, c := range s.client.Jar.Cookies(u) {
		if c.Name == "opsgate_signin" {
			nonce = c.Value
		}
	}
	if res.StatusCode != http.StatusOK || nonce == "" {
		t.Fatalf("GET /signin: %d, nonce %q", res.StatusCode, nonce)
	}
	form := url.Values{"token": {sweepToken}, "nonce": {nonce}}
	res = s.do(t, "POST", "/signin", "application/x-www-form-urlencoded", []byte(form.Encode()))
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("POST /signin: %d", res.StatusCode)
	}
}

// do sends one request with the admin token and the console session.
func (s *sweepServer) do(t *testing.T, method, target, contentType string, body []byte) *http.Response {
	t.Helper()
	// Cancelled once the answer's headers are in: a stream (SSE) answers
	// its status at once and would never end.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.url+target, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	req.Header.Set("Authorization", "Bearer "+sweepToken)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if strings.HasPrefix(target, "/hooks/") {
		mac := hmac.New(sha256.New, []byte("webhook-secret"))
		mac.Write(body)
		req.Header.Set("X-Opsgate-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	if strings.HasPrefix(target, "/mcp") || strings.HasPrefix(target, "/internal/mcp") {
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	res, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, target, err)
	}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		io.Copy(io.Discard, res.Body)
	}
	res.Body.Close()
	return res
}

// counts is the row count of every table.
func (s *sweepServer) counts(t *testing.T) map[string]int {
	t.Helper()
	q := `SELECT name FROM sqlite_master WHERE type = 'table'`
	if s.driver == "postgres" {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`
	}
	rows, err := s.db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	rows.Close()
	out := map[string]int{}
	for _, name := range tables {
		var n int
		if err := s.db.QueryRowContext(t.Context(), `SELECT count(*) FROM `+name).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", name, err)
		}
		out[name] = n
	}
	return out
}

// sweepPrefixTails complete a prefix route to one that exists, so its
// handler sees the malformed bodies (the webhook configured as "ci").
var sweepPrefixTails = map[string]string{"/hooks/": "ci"}

// wildcard is a {name}, {name...} or {$} in a route pattern.
var wildcard = regexp.MustCompile(`\{[^}]*\}`)

// sweepRoute is one pattern taken apart.
type sweepRoute struct {
	pattern, method, path string
}

func parseRoute(p string) sweepRoute {
	r := sweepRoute{pattern: p, path: p}
	if m, rest, ok := strings.Cut(p, " "); ok {
		r.method, r.path = m, strings.TrimSpace(rest)
	}
	return r
}

// fill replaces every wildcard with seg ({$} with nothing).
func (r sweepRoute) fill(seg string) string {
	return wildcard.ReplaceAllStringFunc(r.path, func(w string) string {
		if w == "{$}" {
			return ""
		}
		return seg
	})
}

func sweep(t *testing.T, backend string) {
	s := newSweepServer(t, backend)
	if len(s.patterns) < 40 {
		t.Fatalf("only %d routes listed: %v", len(s.patterns), s.patterns)
	}
	for _, want := range []string{"POST /api/v1/messages", "GET /runs/{id}", "/mcp", "POST /slack/events", "/hooks/"} {
		if !slices.Contains(s.patterns, want) {
			t.Errorf("the route list lacks %q: %v", want, s.patterns)
		}
	}
	before := s.counts(t)
	check := func(res *http.Response, what string, malformed bool) {
		t.Helper()
		switch {
		case res.StatusCode >= 500:
			t.Errorf("%s: %d, want 4xx (never 5xx)", what, res.StatusCode)
		case malformed && res.StatusCode < 400:
			t.Errorf("%s: %d, want 4xx", what, res.StatusCode)
		}
	}
	methods := []string{"GET", "POST", "PUT", "DELETE", "PATCH"}
	for _, p := range s.patterns {
		r := parseRoute(p)
		method := cmp.Or(r.method, "POST")
		// Malformed path segments: in every wildcard, or after a prefix.
		for _, seg := range sweepBadSegments {
			var target string
			switch {
			case wildcard.MatchString(r.path) && !strings.Contains(r.path, "{$}"):
				target = r.fill(seg)
			case strings.HasSuffix(r.path, "/"):
				target = r.path + seg
			default:
				target = r.path + "/" + seg
			}
			check(s.do(t, method, target, "application/json", []byte(`{}`)), fmt.Sprintf("%s: %s %s", p, method, target), true)
		}
		good := r.fill("x")
		if tail, ok := sweepPrefixTails[r.path]; ok {
			good = r.path + tail
		}
		check(s.do(t, method, good+"?status=%00&cursor=%FF%FE&limit=%00", "", nil), p+": query with NUL and invalid UTF-8", true)
		for _, m := range methods {
			check(s.do(t, m, good, "", nil), fmt.Sprintf("%s: %s %s", p, m, good), false)
		}
		if r.method == "GET" || r.method == "HEAD" {
			continue
		}
		for _, b := range sweepBodies {
			check(s.do(t, method, good, b.contentType, b.body), fmt.Sprintf("%s: %s body", p, b.name), b.name != "oversized" || r.method != "")
		}
	}
	// The requests of issue 32 themselves.
	for _, c := range []struct{ method, target, body string }{
		{"POST", "/api/v1/messages", `{"thread":"acc\u0000bi","text":"deploy api 1.2.3"}`},
		{"POST", "/api/v1/messages", `{"thread":"t","text":"deploy api 1.2.3","event_id":"e\u0000"}`},
		{"POST", "/api/v1/messages", "{\"thread\":\"acc\xffbi\",\"text\":\"deploy api 1.2.3\"}"},
		{"GET", "/api/v1/runs/%00", ""}, {"GET", "/api/v1/runs/%ff%fe", ""}, {"GET", "/api/v1/approvals/%00", ""},
		{"POST", "/api/v1/runs/%00/cancel", `{}`}, {"POST", "/api/v1/deliveries/%00/requeue", `{}`},
		{"POST", "/api/v1/approvals/%00/decision", `{"action":"approve"}`}, {"GET", "/runs/%00", ""}, {"GET", "/approvals/%00", ""},
		{"POST", "/local/v1/messages", `{"thread":"acc\u0000bi","text":"deploy api 1.2.3"}`},
		{"POST", "/hooks/ci", `{"text":"deploy api 1.2.3\u0000"}`},
		{"POST", "/hooks/ci", `{"text":"deploy api 1.2.3","event_id":"e\u0000"}`},
	} {
		res := s.do(t, c.method, c.target, "application/json", []byte(c.body))
		if res.StatusCode != http.StatusBadRequest && res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("%s %s %s: %d, want 400, 404 or 422", c.method, c.target, c.body, res.StatusCode)
		}
	}
	after := s.counts(t)
	for table, n := range after {
		if n != before[table] {
			t.Errorf("table %s: %d rows after the sweep, %d before: something malformed was stored", table, n, before[table])
		}
	}
	t.Logf("%d routes swept on %s", len(s.patterns), backend)
}
