package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/internal/oidctest"
)

// The sign-in tests run the console against a real OpenID Provider
// (internal/oidctest) on loopback: discovery, keys, the code flow with
// PKCE and nonce, signed ID tokens and userinfo are the provider's. A
// browser is an http.Client with a cookie jar that follows redirects;
// TestBrowserIDPSignIn does it in Chromium too.

const idpSecret = "opsgate-client-secret-0123456789"

// idpUsers: alice is listed under people; carol only has the IdP group
// sre (an approver group); mallory has groups opsgate does not know; dave's
// email is unverified.
var idpUsers = []oidctest.User{
	{Username: "alice", Password: "pw-alice", Email: "Alice@Example.com", FirstName: "Alice", LastName: "Liddell", Groups: []string{"devs"}},
	{Username: "carol", Password: "pw-carol", Email: "carol@example.com", FirstName: "Carol", LastName: "Ops", Groups: []string{"sre", "devs"}},
	{Username: "mallory", Password: "pw-mallory", Email: "mallory@example.com", Groups: []string{"devs", "Everyone"}},
	{Username: "dave", Password: "pw-dave", Email: "dave@example.com", EmailUnverified: true},
}

// livePeople is the live configuration's people and approver groups; a
// test changes it as a reload would.
type livePeople struct {
	mu     sync.Mutex
	people map[string][]string
	groups map[string][]string
}

func (p *livePeople) Known(identity string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return approvals.NewDirectory(p.people, p.groups).Known(identity)
}

func (p *livePeople) ApproverGroup(name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.groups[name]
	return ok
}

func (p *livePeople) forget(person string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.people, person)
}

// clock is the console's clock: real time plus an offset a test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }
func (c *clock) reset()                  { c.offset.Store(0) }

// swapTransport is the console's connection to the provider. Armed with a
// token response, it answers the console's next token request with it
// instead of the provider's: a genuine response the provider issued for
// another attempt, client or provider, as an attacker on the path (or a
// provider bug) would hand it over. Everything else goes to the provider.
type swapTransport struct {
	base  http.RoundTripper
	armed atomic.Pointer[[]byte]
}

func (s *swapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/token") {
		if b := s.armed.Swap(nil); b != nil {
			// The real request still reaches the provider (and spends
			// the code); only its answer is replaced.
			if res, err := s.base.RoundTrip(r); err == nil {
				res.Body.Close()
			}
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(string(*b))), Request: r}, nil
		}
	}
	return s.base.RoundTrip(r)
}

type idpBundle struct {
	*bundle
	idp    *oidctest.Provider
	url    string
	people *livePeople
	clock  *clock
	swap   *swapTransport
	logs   *strings.Builder
}

type idpOpts struct {
	noTokenLogin bool
	host         string // the provider's host (a browser test uses localhost)
}

// setupIDP starts a provider and a console that signs in with it, over
// the harness's engine and store (approver group sre: console:admin,
// console:bob, slack:U1).
func setupIDP(t *testing.T, o idpOpts) *idpBundle {
	t.Helper()
	b := setup(t, setupOpts{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	idp := oidctest.Start(t, oidctest.Options{Host: o.host, Users: idpUsers, IDTokenLifetime: 2 * time.Minute,
		Clients: []oidctest.Client{{ID: "opsgate", Secret: idpSecret, RedirectURIs: []string{base + "/auth/callback"}},
			{ID: "other-app", Secret: "other-secret", RedirectURIs: []string{"http://127.0.0.1:9/cb"}}}})
	ib := &idpBundle{bundle: b, idp: idp, url: base, clock: &clock{}, logs: &strings.Builder{},
		people: &livePeople{people: map[string][]string{"alice": {"console:alice@example.com", "slack:UALICE"}},
			groups: map[string][]string{"sre": {"console:admin", "console:bob", "slack:U1"}}},
		swap: &swapTransport{base: http.DefaultTransport}}
	client, err := oidc.New(oidc.Config{Issuer: idp.Issuer, ClientID: "opsgate", ClientSecret: idpSecret,
		RedirectURL: base + "/auth/callback", GroupsClaim: "groups", Scopes: []string{"openid", "email", "profile", "groups"},
		HTTPClient: &http.Client{Transport: ib.swap, Timeout: 10 * time.Second}, Now: ib.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	h, err := New(Options{Engine: b.eng, Store: b.store, Now: ib.clock.Now, StreamTick: time.Second,
		Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, ib.logs}, nil)),
		Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}},
		OIDC:   client, People: ib.people, NoTokenLogin: o.noTokenLogin})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ib
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// browser is a cookie jar that follows redirects; callback records the
// last /auth/callback URL it was sent to and the attempt cookie it held.
type idpBrowser struct {
	t        *testing.T
	hc       *http.Client
	jar      *cookiejar.Jar
	callback string
	attempt  string
	// state is the last sign-in attempt's, as the console sent it to the
	// provider.
	state string
}

func (ib *idpBundle) browser(t *testing.T) *idpBrowser {
	jar, _ := cookiejar.New(nil)
	br := &idpBrowser{t: t, jar: jar}
	br.hc = &http.Client{Jar: jar, Timeout: 15 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		if st := r.URL.Query().Get("state"); st != "" && strings.HasPrefix(r.URL.String(), ib.idp.Issuer) {
			br.state = st
		}
		if r.URL.Path == "/auth/callback" {
			br.callback = r.URL.String()
			u, _ := url.Parse(ib.url + "/auth/")
			for _, c := range jar.Cookies(u) {
				if c.Name == attemptCookie {
					br.attempt = c.Value
				}
			}
		}
		if len(via) > 20 {
			return fmt.Errorf("too many redirects")
		}
		return nil
	}}
	return br
}

type page struct {
	status int
	url    string
	body   string
}

func (br *idpBrowser) get(u string) page {
	br.t.Helper()
	res, err := br.hc.Get(u)
	if err != nil {
		br.t.Fatal(err)
	}
	return readPage(br.t, res)
}

// begin starts a sign-in: the browser ends on the provider's sign-in page
// (the response, body closed).
func (br *idpBrowser) begin(ib *idpBundle) *http.Response {
	br.t.Helper()
	res, err := br.hc.Get(ib.url + "/auth/login")
	if err != nil {
		br.t.Fatal(err)
	}
	res.Body.Close()
	return res
}

func readPage(t *testing.T, res *http.Response) page {
	t.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return page{status: res.StatusCode, url: res.Request.URL.String(), body: string(b)}
}

// signIn goes from the console's sign-in link through the provider's form
// and back; it returns the page the browser ends on.
func (ib *idpBundle) signIn(br *idpBrowser, user, password string) page {
	br.t.Helper()
	res, err := br.hc.Get(ib.url + "/auth/login?next=%2Fapprovals")
	if err != nil {
		br.t.Fatal(err)
	}
	res.Body.Close()
	return readPage(br.t, ib.idp.Login(br.t, br.hc, res, user, password))
}

// continued follows the sign-in's "continue" page (a meta refresh, which
// an http.Client does not follow by itself).
var continueRe = regexp.MustCompile(`http-equiv="refresh" content="0;url=([^"]+)"`)

func (ib *idpBundle) continued(br *idpBrowser, p page) page {
	br.t.Helper()
	m := continueRe.FindStringSubmatch(p.body)
	if p.status != http.StatusOK || m == nil {
		br.t.Fatalf("sign-in did not end on the continue page: %d %s\n%s", p.status, p.url, p.body)
	}
	return br.get(ib.url + m[1])
}

func TestIDPSignInKnownPerson(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	br := ib.browser(t)
	// The sign-in page offers the provider.
	if p := br.get(ib.url + "/signin"); !strings.Contains(p.body, `id="idp-signin"`) || !strings.Contains(p.body, ib.idp.Issuer) {
		t.Fatalf("sign-in page does not offer the identity provider:\n%s", p.body)
	}
	p := ib.continued(br, ib.signIn(br, "alice", "pw-alice"))
	if p.status != http.StatusOK || !strings.HasSuffix(p.url, "/approvals") {
		t.Fatalf("after sign-in: %d %s", p.status, p.url)
	}
	// The identity is console:<email>, the provider's Alice@Example.com lower-cased.
	if !strings.Contains(p.body, "Signed in as <strong>console:alice@example.com</strong>") {
		t.Fatalf("the page does not name console:alice@example.com:\n%s", p.body)
	}
	// The provider's answer was used once: the attempt cookie is gone.
	for _, c := range br.jar.Cookies(mustURL(t, ib.url+"/auth/")) {
		if c.Name == attemptCookie {
			t.Errorf("the attempt cookie outlived the sign-in")
		}
	}

	// Removed from the configuration (a reload): the session ends.
	ib.people.forget("alice")
	if p := br.get(ib.url + "/approvals"); !strings.Contains(p.url, "/signin") {
		t.Fatalf("a person the configuration forgot still has a session: %d %s", p.status, p.url)
	}
}

// TestIDPLongNextStillSignsIn: a return path too long for the attempt
// cookie falls back to the chat instead of failing the sign-in.
func TestIDPLongNextStillSignsIn(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	br := ib.browser(t)
	res, err := br.hc.Get(ib.url + "/auth/login?next=" + url.QueryEscape("/runs?flow="+strings.Repeat("x", 2000)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	p := ib.continued(br, readPage(t, ib.idp.Login(t, br.hc, res, "alice", "pw-alice")))
	if !strings.HasSuffix(p.url, "/chat") || !strings.Contains(p.body, "console:alice@example.com") {
		t.Fatalf("after a long next: %d %s", p.status, p.url)
	}
}

func TestIDPSignOutEndsTheSession(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	br := ib.browser(t)
	p := ib.continued(br, ib.signIn(br, "alice", "pw-alice"))
	csrf := csrfRe.FindStringSubmatch(p.body)
	if csrf == nil {
		t.Fatalf("no CSRF token on %s", p.url)
	}
	var session string
	for _, c := range br.jar.Cookies(mustURL(t, ib.url)) {
		if c.Name == sessionCookie {
			session = c.Value
		}
	}
	res, err := br.hc.PostForm(ib.url+"/signout", url.Values{csrfField: {csrf[1]}})
	if err != nil {
		t.Fatal(err)
	}
	if p := readPage(t, res); !strings.HasSuffix(p.url, "/signin") {
		t.Fatalf("sign-out ended on %s", p.url)
	}
	// The old cookie, replayed, no longer works.
	req, _ := http.NewRequest("GET", ib.url+"/approvals", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
	res, err = (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/signin") {
		t.Fatalf("a signed-out cookie still works: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
}

// TestIDPGroupMakesApprover: carol is in no people or group of the
// configuration, but the provider says she is in group sre, an approver
// group: she signs in and approves a call that asks group:sre; the audit
// entry names the group. Once the provider's group no longer names an
// approver group (a reload removed it), her session ends.
func TestIDPGroupMakesApprover(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	br := ib.browser(t)
	p := ib.continued(br, ib.signIn(br, "carol", "pw-carol"))
	if !strings.Contains(p.body, "console:carol@example.com") {
		t.Fatalf("carol is not signed in: %d %s", p.status, p.url)
	}
	csrf := csrfRe.FindStringSubmatch(p.body)[1]
	run := ib.send(t, "idp-group", "deploy api 1.2.3")
	_, a := ib.waitPending(t, "console:idp-group")
	res, err := br.hc.PostForm(ib.url+"/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	readPage(t, res)
	ib.waitRun(t, run, core.RunSucceeded)
	got, err := ib.store.ApprovalGet(context.Background(), a.ID)
	if err != nil || got.Status != approvals.StatusApproved || len(got.Decisions) != 1 || got.Decisions[0].Actor != "console:carol@example.com" {
		t.Fatalf("approval %+v (%v): want approved by console:carol@example.com", got, err)
	}
	entries, err := ib.store.AuditList(context.Background(), approvals.AuditListParams{ApprovalID: a.ID, Kind: string(approvals.AuditApprovalDecided)})
	if err != nil || len(entries) != 1 {
		t.Fatalf("audit: %v %v", entries, err)
	}
	var d map[string]any
	if err := json.Unmarshal(entries[0].Detail, &d); err != nil || d["via_group"] != "sre" {
		t.Fatalf("audit detail %s: want via_group sre", entries[0].Detail)
	}

	// Alice is known but in no approver group, here or at the provider:
	// her decision is refused and changes nothing.
	bra := ib.browser(t)
	pa := ib.continued(bra, ib.signIn(bra, "alice", "pw-alice"))
	ib.send(t, "idp-group-2", "deploy web 2.0.0")
	_, a2 := ib.waitPending(t, "console:idp-group-2")
	res, err = bra.hc.PostForm(ib.url+"/approvals/"+a2.ID+"/decision", url.Values{csrfField: {csrfRe.FindStringSubmatch(pa.body)[1]}, "action": {"approve"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := readPage(t, res); !strings.Contains(p.body, "not an approver") {
		t.Fatalf("alice (IdP group devs only) was not refused:\n%s", p.body)
	}
	if got, _ := ib.store.ApprovalGet(context.Background(), a2.ID); got.Status != approvals.StatusPending {
		t.Fatalf("alice's refused decision changed the approval: %s", got.Status)
	}

	// The approver group sre is removed from the configuration: carol's
	// IdP group names nothing now, and she is no one opsgate knows.
	ib.people.mu.Lock()
	delete(ib.people.groups, "sre")
	ib.people.mu.Unlock()
	if p := br.get(ib.url + "/approvals"); !strings.Contains(p.url, "/signin") {
		t.Fatalf("carol's session outlived the group that let her in: %s", p.url)
	}
}

func TestIDPRefusals(t *testing.T) {
	ib := setupIDP(t, idpOpts{})
	other := oidctest.Start(t, oidctest.Options{Users: idpUsers,
		Clients: []oidctest.Client{{ID: "opsgate", Secret: idpSecret, RedirectURIs: []string{ib.url + "/auth/callback"}}}})

	// signedOut asserts the browser has no session after a refusal.
	signedOut := func(t *testing.T, br *idpBrowser) {
		t.Helper()
		if p := br.get(ib.url + "/approvals"); !strings.Contains(p.url, "/signin") {
			t.Fatalf("refused, yet the browser has a session: %s", p.url)
		}
	}
	// substituted signs alice in while the console's token request is
	// answered with tok instead.
	substituted := func(t *testing.T, tok []byte) page {
		t.Helper()
		br := ib.browser(t)
		ib.swap.armed.Store(&tok)
		p := ib.signIn(br, "alice", "pw-alice")
		if ib.swap.armed.Load() != nil {
			ib.swap.armed.Store(nil)
			t.Fatal("the console never asked for a token")
		}
		signedOut(t, br)
		return p
	}
	cases := []struct {
		name   string
		run    func(t *testing.T) page
		status int
		want   string
	}{
		{"UnknownPerson", func(t *testing.T) page {
			br := ib.browser(t)
			p := ib.signIn(br, "mallory", "pw-mallory")
			signedOut(t, br)
			return p
		}, http.StatusForbidden, "does not know console:mallory@example.com"},
		{"UnverifiedEmail", func(t *testing.T) page {
			br := ib.browser(t)
			p := ib.signIn(br, "dave", "pw-dave")
			signedOut(t, br)
			return p
		}, http.StatusForbidden, "not verified your email"},
		{"WrongIssuer", func(t *testing.T) page {
			return substituted(t, tokenResponse(t, other, "opsgate", idpSecret, ib.url+"/auth/callback", "any-nonce", "alice", "pw-alice"))
		}, http.StatusUnauthorized, "issued by another identity provider"},
		{"WrongAudience", func(t *testing.T) page {
			return substituted(t, tokenResponse(t, ib.idp, "other-app", "other-secret", "http://127.0.0.1:9/cb", "any-nonce", "alice", "pw-alice"))
		}, http.StatusUnauthorized, "issued for another application"},
		{"WrongNonce", func(t *testing.T) page {
			return substituted(t, tokenResponse(t, ib.idp, "opsgate", idpSecret, ib.url+"/auth/callback", "another-attempts-nonce", "alice", "pw-alice"))
		}, http.StatusUnauthorized, "does not belong to this sign-in attempt (nonce)"},
		{"MissingNonce", func(t *testing.T) page {
			return substituted(t, tokenResponse(t, ib.idp, "opsgate", idpSecret, ib.url+"/auth/callback", "", "alice", "pw-alice"))
		}, http.StatusUnauthorized, "does not belong to this sign-in attempt (nonce)"},
		{"ExpiredToken", func(t *testing.T) page {
			// The provider issues 2-minute ID tokens; by the console's
			// clock the callback comes 3 minutes after the attempt began
			// (within the attempt's 10 minutes).
			br := ib.browser(t)
			res := br.begin(ib)
			ib.clock.advance(3 * time.Minute)
			defer ib.clock.reset()
			p := readPage(t, ib.idp.Login(t, br.hc, res, "alice", "pw-alice"))
			signedOut(t, br)
			return p
		}, http.StatusUnauthorized, "has expired"},
		{"ReplayedState", func(t *testing.T) page {
			br := ib.browser(t)
			ib.continued(br, ib.signIn(br, "alice", "pw-alice"))
			if br.callback == "" || br.attempt == "" {
				t.Fatal("the sign-in's callback was not seen")
			}
			// Another browser replays the answer with the copied cookie.
			req, _ := http.NewRequest("GET", br.callback, nil)
			req.AddCookie(&http.Cookie{Name: attemptCookie, Value: br.attempt})
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			p := readPage(t, res)
			if strings.Contains(res.Header.Get("Set-Cookie"), sessionCookie+"=") && !strings.Contains(res.Header.Get("Set-Cookie"), sessionCookie+"=;") {
				t.Fatal("the replay got a session cookie")
			}
			return p
		}, http.StatusBadRequest, "already used"},
		{"StateOfAnotherBrowser", func(t *testing.T) page {
			// The victim's browser gets an answer for the attacker's attempt.
			attacker, victim := ib.browser(t), ib.browser(t)
			res := attacker.begin(ib)
			victim.begin(ib) // the victim has an attempt of its own
			attacker.hc.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
				if r.URL.Path == "/auth/callback" {
					return http.ErrUseLastResponse
				}
				return nil
			}
			res = ib.idp.Login(t, attacker.hc, res, "mallory", "pw-mallory")
			res.Body.Close()
			p := victim.get(res.Header.Get("Location"))
			signedOut(t, victim)
			return p
		}, http.StatusBadRequest, "does not belong to this browser"},
		{"NoAttemptCookie", func(t *testing.T) page {
			return ib.browser(t).get(ib.url + "/auth/callback?code=x&state=y")
		}, http.StatusBadRequest, "did not start in this browser"},
		{"ProviderError", func(t *testing.T) page {
			br := ib.browser(t)
			br.begin(ib)
			if br.state == "" {
				t.Fatal("the attempt's state was not seen")
			}
			return br.get(ib.url + "/auth/callback?error=access_denied&state=" + url.QueryEscape(br.state) +
				"&error_description=" + url.QueryEscape("<b>user said no</b>"))
		}, http.StatusUnauthorized, "access_denied: &lt;b&gt;user said no&lt;/b&gt;"},
		{"ProviderErrorForAnotherAttempt", func(t *testing.T) page {
			// Words on our page only for this browser's own attempt.
			br := ib.browser(t)
			br.begin(ib)
			p := br.get(ib.url + "/auth/callback?error=access_denied&state=forged&error_description=" + url.QueryEscape("call +1-555-SCAM"))
			if strings.Contains(p.body, "SCAM") {
				t.Fatal("the page repeats words of an answer to another attempt")
			}
			return p
		}, http.StatusBadRequest, "does not belong to this browser"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.run(t)
			if p.status != c.status || !strings.Contains(p.body, c.want) {
				t.Fatalf("got %d, want %d with %q:\n%s\nlog:\n%s", p.status, c.status, c.want, p.body, ib.logs.String())
			}
		})
	}
}

func TestIDPTokenLoginTurnedOff(t *testing.T) {
	ib := setupIDP(t, idpOpts{noTokenLogin: true})
	c := newClient(t, ib.url)
	r := c.do("GET", "/signin", nil, nil)
	if r.status != http.StatusOK || strings.Contains(r.body, `id="token"`) || !strings.Contains(r.body, `id="idp-signin"`) {
		t.Fatalf("sign-in page with token_login off: %d\n%s", r.status, r.body)
	}
	// A token sign-in is refused even with a valid token and nonce.
	r = c.do("POST", "/signin", url.Values{"nonce": {strings.Repeat("n", 24)}, "token": {adminToken}}, nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, "turned off") {
		t.Fatalf("token sign-in with token_login off: %d\n%s", r.status, r.body)
	}
	for _, ck := range c.hc.Jar.Cookies(mustURL(t, ib.url)) {
		if ck.Name == sessionCookie {
			t.Fatal("a token sign-in got a session with token_login off")
		}
	}
	// A cookie from a token session (made while token login was on) is refused.
	on, err := New(Options{Engine: ib.eng, Store: ib.store, Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: on}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	old := newClient(t, "http://"+ln.Addr().String())
	old.signIn(adminToken)
	var session string
	for _, ck := range old.hc.Jar.Cookies(mustURL(t, old.base)) {
		if ck.Name == sessionCookie {
			session = ck.Value
		}
	}
	req, _ := http.NewRequest("GET", ib.url+"/runs", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: session})
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/signin") {
		t.Fatalf("a token session works with token_login off: %d", res.StatusCode)
	}
	// Sign-in at the provider works.
	br := ib.browser(t)
	if p := ib.continued(br, ib.signIn(br, "alice", "pw-alice")); !strings.Contains(p.body, "console:alice@example.com") {
		t.Fatalf("provider sign-in with token_login off: %d %s", p.status, p.url)
	}
}

func TestIDPProviderUnavailable(t *testing.T) {
	b := setup(t, setupOpts{})
	// Nothing listens at the issuer: discovery fails, sign-in says so.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	issuer := "http://" + ln.Addr().String()
	ln.Close()
	client, err := oidc.New(oidc.Config{Issuer: issuer, ClientID: "opsgate", RedirectURL: "http://127.0.0.1:1/auth/callback"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Engine: b.eng, Store: b.store, Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}},
		OIDC: client, People: &livePeople{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c := newClient(t, "http://"+ln.Addr().String())
	r := c.do("GET", "/auth/login", nil, nil)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, "unavailable right now") {
		t.Fatalf("login with the provider down: %d\n%s", r.status, r.body)
	}
	// Token sign-in still works.
	c.signIn(adminToken)
}

func TestNewRefusesNoWayToSignIn(t *testing.T) {
	b := setup(t, setupOpts{})
	if _, err := New(Options{Engine: b.eng, Store: b.store, NoTokenLogin: true}); err == nil || !strings.Contains(err.Error(), "nobody could sign in") {
		t.Fatalf("token login off without a provider: %v", err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tokenResponse signs user in at provider p for client id with nonce (none
// when empty), as that client would, and returns the provider's raw token
// response: a genuine answer for another attempt, client or provider.
func tokenResponse(t *testing.T, p *oidctest.Provider, id, secret, redirect, nonce, user, password string) []byte {
	t.Helper()
	var disc struct {
		Auth  string `json:"authorization_endpoint"`
		Token string `json:"token_endpoint"`
	}
	res, err := http.Get(p.Issuer + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(res.Body).Decode(&disc)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	jar, _ := cookiejar.New(nil)
	var code string
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), redirect) {
			code = r.URL.Query().Get("code")
			return http.ErrUseLastResponse
		}
		return nil
	}}
	q := url.Values{"client_id": {id}, "redirect_uri": {redirect}, "response_type": {"code"},
		"scope": {"openid email profile groups"}, "state": {"s-" + user}}
	if nonce != "" {
		q.Set("nonce", nonce)
	}
	res, err = hc.Get(disc.Auth + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res = p.Login(t, hc, res, user, password)
	res.Body.Close()
	if code == "" {
		t.Fatalf("no code from %s for %s", p.Issuer, id)
	}
	req, _ := http.NewRequest("POST", disc.Token, strings.NewReader(url.Values{"grant_type": {"authorization_code"},
		"code": {code}, "redirect_uri": {redirect}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id_token"`) {
		t.Fatalf("token from %s for %s: %d %s", p.Issuer, id, res.StatusCode, b)
	}
	return b
}

// TestIDPRoutesOnlyWhenConfigured: without channels.console.oidc there is
// no /auth/ route: the path is like any unknown page (sign in first).
func TestIDPRoutesOnlyWhenConfigured(t *testing.T) {
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	for _, p := range []string{"/auth/login", "/auth/callback?code=x&state=y"} {
		if r := c.do("GET", p, nil, nil); r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/signin?next=") {
			t.Errorf("%s without a provider: %d %s", p, r.status, r.header.Get("Location"))
		}
	}
}
