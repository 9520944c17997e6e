package web

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
)

// client is a browser stand-in: a cookie jar, no redirect following, and
// Sec-Fetch-Site/Origin headers the test chooses.
type client struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newClient(t *testing.T, base string) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: base, hc: &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type resp struct {
	status int
	header http.Header
	body   string
}

func (c *client) do(method, path string, form url.Values, hdr map[string]string) resp {
	c.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: string(b)}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// signIn walks the sign-in form and returns the CSRF token of a page.
func (c *client) signIn(token string) string {
	c.t.Helper()
	r := c.do("GET", "/signin", nil, nil)
	m := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(r.body)
	if r.status != 200 || m == nil {
		c.t.Fatalf("sign-in page: %d %s", r.status, r.body)
	}
	r = c.do("POST", "/signin", url.Values{"nonce": {m[1]}, "token": {token}, "next": {"/runs"}}, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/runs" {
		c.t.Fatalf("sign-in: %d %v %s", r.status, r.header, r.body)
	}
	return c.csrf()
}

func (c *client) csrf() string {
	c.t.Helper()
	r := c.do("GET", "/runs", nil, nil)
	m := csrfRe.FindStringSubmatch(r.body)
	if r.status != 200 || m == nil {
		c.t.Fatalf("runs page: %d", r.status)
	}
	return m[1]
}

func TestNoSessionRedirectsToSignIn(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	for _, p := range []string{"/", "/chat", "/approvals", "/runs/x", "/audit?actor=a", "/deliveries"} {
		r := c.do("GET", p, nil, nil)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/signin?next=") {
			t.Errorf("GET %s without session: %d %q", p, r.status, r.header.Get("Location"))
		}
	}
	if r := c.do("GET", "/audit?actor=a", nil, nil); r.header.Get("Location") != "/signin?next="+url.QueryEscape("/audit?actor=a") {
		t.Errorf("next is not the requested page: %q", r.header.Get("Location"))
	}
	if r := c.do("GET", "/events", nil, nil); r.status != http.StatusUnauthorized {
		t.Errorf("event stream without session: %d", r.status)
	}
	// A forged cookie is no session either.
	u, _ := url.Parse(b.url)
	c.hc.Jar.SetCookies(u, []*http.Cookie{{Name: sessionCookie, Value: "eyJzaWQiOiJ4In0.forged"}})
	if r := c.do("GET", "/chat", nil, nil); r.status != http.StatusSeeOther {
		t.Errorf("forged session accepted: %d", r.status)
	}
}

func TestSignInCookieAndSignOut(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	r := c.do("GET", "/signin", nil, nil)
	nonce := regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(r.body)[1]
	if r := c.do("POST", "/signin", url.Values{"nonce": {nonce}, "token": {"wrong"}}, nil); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", r.status)
	}
	if r := c.do("POST", "/signin", url.Values{"nonce": {"other"}, "token": {adminToken}}, nil); r.status != http.StatusForbidden {
		t.Fatalf("sign-in without the form's nonce: %d", r.status)
	}
	r = c.do("GET", "/signin", nil, nil)
	nonce = regexp.MustCompile(`name="nonce" value="([^"]+)"`).FindStringSubmatch(r.body)[1]
	r = c.do("POST", "/signin", url.Values{"nonce": {nonce}, "token": {adminToken}, "next": {"//evil.example/x"}}, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/chat" {
		t.Fatalf("sign-in with an off-site next: %d %q", r.status, r.header.Get("Location"))
	}
	sc := strings.Join(r.header.Values("Set-Cookie"), "\n")
	for _, want := range []string{sessionCookie + "=", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(sc, want) {
			t.Errorf("session cookie %q lacks %q", sc, want)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("plain-http session cookie marked Secure: %q", sc)
	}
	csrf := c.csrf()
	if r := c.do("GET", "/chat", nil, nil); r.status != 200 || !strings.Contains(r.body, "console:admin") {
		t.Fatalf("chat after sign-in: %d", r.status)
	}
	// Keep a copy of the cookie: after sign-out it must not work here.
	u, _ := url.Parse(b.url)
	old := c.hc.Jar.Cookies(u)
	if r := c.do("POST", "/signout", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", r.status)
	}
	c.hc.Jar.SetCookies(u, old)
	if r := c.do("GET", "/chat", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("signed-out session still works: %d", r.status)
	}
}

func TestSecureCookieBehindHTTPSPublicURL(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{publicURL: "https://ops.example.com"})
	c := newClient(t, b.url)
	r := c.do("GET", "/signin", nil, nil)
	if !strings.Contains(r.header.Get("Set-Cookie"), "Secure") {
		t.Fatalf("cookie not Secure with an https public URL: %q", r.header.Get("Set-Cookie"))
	}
}

func TestCrossSitePostRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	form := func(tok string) url.Values {
		return url.Values{csrfField: {tok}, "thread": {"csrf"}, "text": {"deploy api 1.2.3"}}
	}
	cases := []struct {
		name string
		form url.Values
		hdr  map[string]string
		want string
	}{
		{"OriginOfAnotherSite", form(csrf), map[string]string{"Origin": "http://evil.example"}, "cross-site request refused"},
		{"SecFetchSiteCrossSite", form(csrf), map[string]string{"Sec-Fetch-Site": "cross-site"}, "cross-site request refused"},
		{"SecFetchSiteSameSite", form(csrf), map[string]string{"Sec-Fetch-Site": "same-site"}, "cross-site request refused"},
		{"MissingToken", form(""), nil, "security token"},
		{"WrongToken", form(csrf + "x"), map[string]string{"Sec-Fetch-Site": "same-origin"}, "security token"},
	}
	for _, tc := range cases {
		r := c.do("POST", "/chat", tc.form, tc.hdr)
		if r.status != http.StatusForbidden || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, r.status, r.body)
		}
	}
	runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: "console:csrf"})
	if err != nil || len(runs) != 0 {
		t.Fatalf("a refused POST started %d runs (%v)", len(runs), err)
	}
	// The same request from the console itself goes through.
	r := c.do("POST", "/chat", form(csrf), map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": b.url})
	if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/chat?thread=csrf") {
		t.Fatalf("same-origin POST: %d %v", r.status, r.header)
	}
	b.waitPending(t, "console:csrf")
}

func TestOutsideTextIsEscaped(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	runID := b.send(t, "xss", "xss")
	b.waitRun(t, runID, core.RunSucceeded)
	for _, p := range []string{"/runs/" + runID, "/chat?thread=xss", "/audit", "/deliveries?status=pending"} {
		r := c.do("GET", p, nil, nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d", p, r.status)
		}
		if strings.Contains(r.body, "<script>window") || strings.Contains(r.body, "<img src=x") {
			t.Errorf("%s renders tool output as HTML", p)
		}
		if p != "/audit" && !strings.Contains(r.body, "&lt;script&gt;window.__xss=1&lt;/script&gt;&lt;img src=x onerror=") {
			t.Errorf("%s does not show the tool output as text", p)
		}
		// opsgate's own replies are Markdown: the fenced tool output is a
		// code block, still escaped inside.
		if strings.HasPrefix(p, "/chat") && !strings.Contains(r.body, "<pre><code>") {
			t.Errorf("%s does not render the reply's code fence as a code block", p)
		}
	}
	if csp := c.do("GET", "/runs/"+runID, nil, nil).header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

func TestEditShowsValidatorMessageNextToField(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(bobToken)
	b.send(t, "edit", "deploy api 1.2.3") // requested by console:bob
	_, a := b.waitPending(t, "console:edit")
	if r := c.do("GET", "/approvals/"+a.ID, nil, nil); r.status != 200 || !strings.Contains(r.body, "Nothing is decided until you press") {
		t.Fatalf("approval page: %d", r.status)
	}
	if cur, _ := b.store.ApprovalGet(context.Background(), a.ID); cur.Status != approvals.StatusPending {
		t.Fatalf("GET changed the approval: %s", cur.Status)
	}
	// bob is the requester of this run (send acts as bob): self-approval is refused with the engine's message.
	r := c.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf}, "action": {"approve"}}, nil)
	if r.status != http.StatusForbidden || !strings.Contains(r.body, `data-field="decision-error"`) {
		t.Fatalf("self-approval: %d %s", r.status, r.body)
	}
	c2 := newClient(t, b.url)
	csrf2 := c2.signIn(adminToken)
	r = c2.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf2}, "action": {"edit"},
		"arg:service": {"Bad Name!"}, "arg:version": {"1.2.4"}, "arg:env": {"staging"}}, nil)
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("invalid edit: %d %s", r.status, r.body)
	}
	m := regexp.MustCompile(`(?s)id="arg-[^"]+-service"[^>]*aria-invalid="true".*?data-field-error="service">([^<]+)<`).FindStringSubmatch(r.body)
	if m == nil || !strings.Contains(m[1], "service") {
		t.Fatalf("no validator message next to the service field:\n%s", r.body)
	}
	if !strings.Contains(r.body, `value="Bad Name!"`) {
		t.Errorf("the edit form lost what was typed")
	}
	r = c2.do("POST", "/approvals/"+a.ID+"/decision", url.Values{csrfField: {csrf2}, "action": {"edit"},
		"arg:service": {"api"}, "arg:version": {"1.2.4"}, "arg:env": {"staging"}, "return": {"/approvals"}}, nil)
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/approvals?done=edit" {
		t.Fatalf("valid edit: %d %v %s", r.status, r.header, r.body)
	}
	run := b.waitRun(t, a.RunID, core.RunSucceeded)
	if run.Steps[0].Args["version"] != "1.2.4" {
		t.Fatalf("executed args %v", run.Steps[0].Args)
	}
	r = c2.do("GET", "/runs/"+a.RunID, nil, nil)
	// The run page shows the arguments once and the edit as a diff.
	diff := regexp.MustCompile(`(?s)data-field="edit-diff">(.*?)</pre>`).FindStringSubmatch(r.body)
	if diff == nil || !strings.Contains(diff[1], `<span class="d del">- version: &#34;1.2.3&#34;</span>`) ||
		!strings.Contains(diff[1], `<span class="d add">&#43; version: &#34;1.2.4&#34;</span>`) ||
		!strings.Contains(diff[1], `<span class="d">  service: &#34;api&#34;</span>`) {
		t.Fatalf("run page lacks the edit diff:\n%s", r.body)
	}
	if strings.Contains(r.body, `data-field="exec-diff"`) || strings.Contains(r.body, `data-field="step-args"`) {
		t.Errorf("run page repeats arguments that did not change after the edit")
	}
	r = c2.do("GET", "/approvals?status=decided", nil, nil)
	if !strings.Contains(r.body, "console:admin") || !strings.Contains(r.body, ">edit") {
		t.Fatalf("decided list does not say who edited")
	}
}

func TestRequeueDeadDeliveryNeedsPost(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	r := c.do("POST", "/deliveries/nope/requeue", url.Values{csrfField: {csrf}}, nil)
	if r.status != http.StatusNotFound {
		t.Fatalf("requeue unknown: %d", r.status)
	}
	if r := c.do("GET", "/deliveries/nope/requeue", nil, nil); r.status != http.StatusMethodNotAllowed && r.status != http.StatusNotFound {
		t.Fatalf("GET requeue: %d", r.status)
	}
	if r := c.do("GET", "/deliveries", nil, nil); r.status != 200 || !strings.Contains(r.body, "No dead deliveries") {
		t.Fatalf("deliveries: %d", r.status)
	}
	if r := c.do("GET", "/audit?actor=console:admin", nil, nil); r.status != 200 || !strings.Contains(r.body, "intact") {
		t.Fatalf("audit: %d", r.status)
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/runs?x=1": "/runs?x=1", "//evil": "/d", "https://evil": "/d", "/\\evil": "/d", "": "/d", "runs": "/d", "/a\nb": "/d",
	} {
		if got := localPath(in, "/d"); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseEditArgs(t *testing.T) {
	t.Parallel()
	args, err := parseEditArgs(url.Values{"arg:service": {"api"}, "arg:replicas": {"3"}, "argjson:replicas": {"1"},
		"newkey": {"env"}, "newvalue": {"prod"}, "_csrf": {"x"}})
	if err != nil || args["service"] != "api" || args["replicas"] != float64(3) || args["env"] != "prod" || len(args) != 3 {
		t.Fatalf("%v %v", args, err)
	}
	if _, err := parseEditArgs(url.Values{"arg:n": {"{"}, "argjson:n": {"1"}}); err == nil || err.Field != "n" {
		t.Fatalf("bad JSON: %v", err)
	}
}

func TestChatShowsMessagesRepliesAndHelp(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	for _, text := range []string{"hello <b>bot</b>", "xss"} {
		r := c.do("POST", "/chat", url.Values{csrfField: {csrf}, "thread": {"console:talk"}, "text": {text}}, nil)
		if r.status != http.StatusSeeOther {
			t.Fatalf("send %q: %d %s", text, r.status, r.body)
		}
	}
	runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: "console:talk"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v %v", runs, err)
	}
	b.waitRun(t, runs[0].ID, core.RunSucceeded)
	r := c.do("GET", "/chat?thread=talk", nil, nil)
	if r.status != 200 {
		t.Fatalf("chat: %d", r.status)
	}
	// The unknown command got the flow help as a reply; the run's request
	// and its result are in the conversation; the thread is listed.
	for _, want := range []string{"unknown command &#34;hello&#34;", `<div class="body text">xss</div>`, "succeeded", `href="/chat?thread=talk"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("chat lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "<b>bot</b>") {
		t.Errorf("message text rendered as HTML")
	}
}

// TestChatShowsRunlessMessageAndHelpReplyInOrder: "help" starts no run,
// yet the chat shows what the person typed and, after it, the help reply;
// the thread is listed although it has no run.
func TestChatShowsRunlessMessageAndHelpReplyInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	for _, text := range []string{"help", "deplyo api"} {
		r := c.do("POST", "/chat", url.Values{csrfField: {csrf}, "thread": {"console:helpme"}, "text": {text}}, nil)
		if r.status != http.StatusSeeOther {
			t.Fatalf("send %q: %d %s", text, r.status, r.body)
		}
	}
	if runs, _, err := b.store.RunList(context.Background(), core.RunListParams{Thread: "console:helpme"}); err != nil || len(runs) != 0 {
		t.Fatalf("runs %v %v, want none", runs, err)
	}
	r := c.do("GET", "/chat?thread=other", nil, nil)
	if r.status != 200 || !strings.Contains(r.body, `href="/chat?thread=helpme"`) {
		t.Fatalf("thread list lacks helpme: %d\n%s", r.status, r.body)
	}
	r = c.do("GET", "/chat?thread=helpme", nil, nil)
	if r.status != 200 {
		t.Fatalf("chat: %d", r.status)
	}
	list := r.body[strings.Index(r.body, `id="messages"`):]
	list = list[:strings.Index(list, "</ol>")]
	// Each message is one <li class="msg msg-KIND">; read them in order.
	var seq []string
	for _, part := range strings.Split(list, `class="msg msg-`)[1:] {
		kind, _, _ := strings.Cut(part, `"`)
		text := ""
		if _, body, ok := strings.Cut(part, `class="body `); ok {
			_, body, _ = strings.Cut(body, ">")
			text, _, _ = strings.Cut(body, "</div>")
		}
		seq = append(seq, kind+": "+strings.TrimSpace(text))
	}
	if len(seq) != 4 || seq[0] != "user: help" || !strings.HasPrefix(seq[1], "bot: ") ||
		seq[2] != "user: deplyo api" || !strings.HasPrefix(seq[3], "bot: ") {
		t.Fatalf("conversation = %q, want help, its reply, deplyo api, its reply", seq)
	}
	if !strings.Contains(seq[1], "deploy") || !strings.Contains(seq[3], "deploy") {
		t.Errorf("the replies do not list the flows: %q", seq)
	}
}
