// Package oidctest starts a real OpenID Provider on a loopback port for
// tests: github.com/zitadel/oidc's op package (an OpenID Certified
// provider implementation) over the in-memory storage that module ships,
// with users, groups and clients a test chooses, and a username/password
// login form. Discovery, the keys (JWKS), the authorization code flow with
// PKCE and nonce, signed ID tokens and the userinfo endpoint are the
// library's, not ours. Only tests import it.
//
// Why this and not Dex: Dex's module cannot be required at a release
// version (its v2 module path lacks /v2) and its build drags in Kubernetes,
// etcd and cgo SQLite (minutes on CI's 2 cores, a cached binary to
// manage); this provider compiles into the test binary in seconds and
// runs in-process, so a test can shape users, groups and token lifetimes.
package oidctest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// User is an account at the provider.
type User struct {
	Username, Password string
	Email              string
	// EmailUnverified marks the email address unverified (email_verified
	// false).
	EmailUnverified bool
	FirstName       string
	LastName        string
	// Groups are sent as the "groups" claim when the client asks for the
	// "groups" scope: in the ID token and at the userinfo endpoint.
	Groups []string
}

// Client is an app registered at the provider (a confidential web client,
// HTTP Basic client authentication).
type Client struct {
	ID, Secret   string
	RedirectURIs []string
}

// Options shape a provider.
type Options struct {
	// Host is the issuer's host: "127.0.0.1" (default) or "localhost", so
	// a browser test can make the provider another site than the console.
	Host    string
	Users   []User
	Clients []Client
	// IDTokenLifetime is how long ID tokens last; default 1 h.
	IDTokenLifetime time.Duration
}

// Provider is a running OpenID Provider.
type Provider struct {
	// Issuer is the issuer URL (http://<host>:<port>, no trailing slash).
	Issuer string
	users  map[string]*storage.User
	groups map[string][]string
}

// Start starts a provider; it stops when the test ends.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.IDTokenLifetime == 0 {
		o.IDTokenLifetime = time.Hour
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Issuer: fmt.Sprintf("http://%s:%d", o.Host, ln.Addr().(*net.TCPAddr).Port),
		users: map[string]*storage.User{}, groups: map[string][]string{}}
	for i, u := range o.Users {
		id := fmt.Sprintf("user-%d", i+1)
		p.users[id] = &storage.User{ID: id, Username: u.Username, Password: u.Password, Email: u.Email,
			EmailVerified: !u.EmailUnverified, FirstName: u.FirstName, LastName: u.LastName}
		p.groups[id] = u.Groups
	}
	clients := map[string]*storage.Client{}
	for _, c := range o.Clients {
		clients[c.ID] = storage.WebClient(c.ID, c.Secret, c.RedirectURIs...)
	}
	st := &store{Storage: storage.NewStorageWithClients(users{p}, clients), p: p, lifetime: o.IDTokenLifetime}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	prov, err := op.NewProvider(&op.Config{
		CryptoKey: sha256.Sum256([]byte(p.Issuer)), CodeMethodS256: true, AuthMethodPost: true,
	}, st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure(), op.WithLogger(quiet))
	if err != nil {
		t.Fatalf("oidctest: provider: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle(loginPath, loginForm(st, op.AuthCallbackURL(prov), op.NewIssuerInterceptor(prov.IssuerFromRequest)))
	mux.Handle("/", prov)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return p
}

// users is the storage's view of the provider's accounts.
type users struct{ p *Provider }

func (u users) GetUserByID(id string) *storage.User { return u.p.users[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	for _, x := range u.p.users {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (users) ExampleClientID() string { return storage.ServiceUserID }

// store is the library's in-memory storage with a "groups" scope and
// claim, and the configured ID token lifetime.
type store struct {
	*storage.Storage
	p        *Provider
	lifetime time.Duration
}

// groupsScope asks for the groups claim.
const groupsScope = "groups"

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil {
		return nil, err
	}
	return client{Client: c, lifetime: s.lifetime}, nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *store) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	if slices.Contains(scopes, groupsScope) {
		ui.AppendClaims("groups", s.p.groups[req.GetSubject()])
	}
	return nil
}

// SetUserinfoFromToken fills the userinfo endpoint's answer.
func (s *store) SetUserinfoFromToken(ctx context.Context, ui *zoidc.UserInfo, tokenID, subject, origin string) error {
	if err := s.Storage.SetUserinfoFromToken(ctx, ui, tokenID, subject, origin); err != nil {
		return err
	}
	ui.AppendClaims("groups", s.p.groups[subject])
	if u := s.p.users[subject]; u != nil && ui.Email != "" && !u.EmailVerified {
		// Said outright, as Keycloak and Okta do (the library omits a
		// false email_verified).
		ui.AppendClaims("email_verified", false)
	}
	return nil
}

// client allows the groups scope and sets the ID token lifetime.
type client struct {
	op.Client
	lifetime time.Duration
}

func (c client) IsScopeAllowed(scope string) bool {
	return scope == groupsScope || c.Client.IsScopeAllowed(scope)
}
func (c client) IDTokenLifetime() time.Duration { return c.lifetime }

// loginPath is where the storage's clients send the browser to sign in
// (the library's example storage uses /login/username?authRequestID=…).
const loginPath = "/login/username"

// loginForm is the provider's own sign-in page: a username and password
// form; a right answer completes the auth request and sends the browser
// on through the library's callback.
func loginForm(st *store, callback func(context.Context, string) string, issuer *op.IssuerInterceptor) http.Handler {
	return issuer.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id := r.FormValue("authRequestID")
		msg := ""
		if r.Method == http.MethodPost {
			id = r.FormValue("id")
			err := st.CheckUsernamePassword(r.FormValue("username"), r.FormValue("password"), id)
			if err == nil {
				http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
				return
			}
			msg = err.Error()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Test IdP</title><h1>Test IdP sign-in</h1><p id="error">%s</p>
<form method="post" action="%s"><input type="hidden" name="id" value="%s">
<input id="username" name="username"><input id="password" name="password" type="password">
<button id="submit" type="submit">Sign in</button></form>`, html.EscapeString(msg), loginPath, html.EscapeString(id))
	}))
}

// Login answers the provider's sign-in form the browser c was sent to
// (page is the response that landed on it) and returns what the browser
// ends on after following every redirect (back to the relying party).
func (p *Provider) Login(t testing.TB, c *http.Client, page *http.Response, username, password string) *http.Response {
	t.Helper()
	if page.Request == nil || !strings.HasPrefix(page.Request.URL.String(), p.Issuer+loginPath) {
		t.Fatalf("oidctest: the browser is not on the provider's sign-in page but on %v (status %d)", page.Request.URL, page.StatusCode)
	}
	id := page.Request.URL.Query().Get("authRequestID")
	resp, err := c.PostForm(p.Issuer+loginPath, url.Values{"id": {id}, "username": {username}, "password": {password}})
	if err != nil {
		t.Fatalf("oidctest: sign in as %s: %v", username, err)
	}
	return resp
}
