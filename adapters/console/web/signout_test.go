package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/opsgate/opsgate/store/sqlite"
)

// replica serves another console handler (another replica, or this one
// after a restart: no state of the first) on store st.
func (b *bundle) replica(t *testing.T, st Store) string {
	t.Helper()
	h, err := New(Options{Engine: b.eng, Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tokens: []Token{{Name: "admin", Token: adminToken, Actor: "console:admin"}, {Name: "bob", Token: bobToken, Actor: "console:bob"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestAttack_SignedOutCookieWorksElsewhere: a cookie copied before sign-out
// (a shared machine, a stolen cookie) must stop working on every replica
// and after a restart, not only in the process that signed it out.
func TestAttack_SignedOutCookieWorksElsewhere(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	other := b.replica(t, b.store)

	c := newClient(t, b.url)
	csrf := c.signIn(adminToken)
	u, _ := url.Parse(b.url)
	stolen := c.hc.Jar.Cookies(u)

	// The stolen copy works on the other replica while the session lives.
	thief := newClient(t, other)
	ou, _ := url.Parse(other)
	thief.hc.Jar.SetCookies(ou, stolen)
	if r := thief.do("GET", "/chat", nil, nil); r.status != http.StatusOK {
		t.Fatalf("a live session is refused by another replica: %d", r.status)
	}

	if r := c.do("POST", "/signout", url.Values{csrfField: {csrf}}, nil); r.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", r.status)
	}
	thief.hc.Jar.SetCookies(ou, stolen)
	if r := thief.do("GET", "/chat", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("signed-out cookie still works on another replica: %d", r.status)
	}

	// After a restart: the database reopened, a fresh handler.
	st2, err := sqlite.Open(context.Background(), b.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	restarted := b.replica(t, st2)
	late := newClient(t, restarted)
	ru, _ := url.Parse(restarted)
	late.hc.Jar.SetCookies(ru, stolen)
	if r := late.do("GET", "/chat", nil, nil); r.status != http.StatusSeeOther {
		t.Fatalf("signed-out cookie works after a restart: %d", r.status)
	}

	// Signing in again gives a new session, which works.
	c2 := newClient(t, other)
	c2.signIn(adminToken)
	if r := c2.do("GET", "/chat", nil, nil); r.status != http.StatusOK {
		t.Fatalf("a new sign-in after sign-out: %d", r.status)
	}
}

// failingSessions is a store whose session checks fail, as a database
// outage would.
type failingSessions struct{ Store }

var errDown = errors.New("database unreachable")

func (failingSessions) ConsoleSessionRevoked(context.Context, string, time.Time) (bool, error) {
	return false, errDown
}
func (failingSessions) ConsoleSessionRevoke(context.Context, string, time.Time, time.Time) error {
	return errDown
}

// TestSessionCheckFailsClosedWithoutSigningOut: when the store cannot say
// whether a session was signed out, the page is refused (503) and the
// cookie is kept, so an outage neither lets a signed-out cookie in nor
// signs everybody out.
func TestSessionCheckFailsClosedWithoutSigningOut(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOpts{})
	c := newClient(t, b.url)
	c.signIn(adminToken)
	u, _ := url.Parse(b.url)
	cookies := c.hc.Jar.Cookies(u)
	down := b.replica(t, failingSessions{b.store})
	dc := newClient(t, down)
	du, _ := url.Parse(down)
	dc.hc.Jar.SetCookies(du, cookies)
	r := dc.do("GET", "/chat", nil, nil)
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("session check during an outage: %d, want 503", r.status)
	}
	for _, sc := range r.header.Values("Set-Cookie") {
		if len(sc) > 0 {
			t.Errorf("the outage cleared a cookie: %q", sc)
		}
	}
}
