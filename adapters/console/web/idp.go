package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// Sign-in with the identity provider (channels.console.oidc,
// docs/console.md): GET /auth/login starts an attempt — fresh state, nonce
// and PKCE verifier, kept in a signed cookie bound to this browser for
// attemptTTL — and sends the browser to the provider; GET /auth/callback
// takes the provider's answer: the state must be this browser's and is
// spent in the store (single-use across replicas), the code is redeemed
// with the verifier, the ID token checked (package oidc), and the person
// must be one the live configuration knows. Then a session begins like a
// token's, with the identity and groups stored (console_signins).

// SigninStore keeps sign-ins at the identity provider (store/sqlite and
// store/postgres implement it; migration 0023).
type SigninStore interface {
	ConsoleSigninCreate(ctx context.Context, si core.ConsoleSignin, now time.Time) error
	// ConsoleSigninGet returns core.ErrNotFound for an unknown, ended or
	// expired sign-in.
	ConsoleSigninGet(ctx context.Context, id string, now time.Time) (*core.ConsoleSignin, error)
	ConsoleSigninEnd(ctx context.Context, id string) error
	// ConsoleStateUse returns core.ErrConflict for a state already used.
	ConsoleStateUse(ctx context.Context, state string, expires, now time.Time) error
}

// People is who the live configuration knows; it changes on a reload
// (SIGHUP), and the console asks on every request of a session begun at
// the identity provider.
type People interface {
	// Known reports whether identity is listed under people or in an
	// approver group.
	Known(identity string) bool
	// ApproverGroup reports whether an approver group of that name is
	// configured.
	ApproverGroup(name string) bool
}

const (
	// attemptCookie carries one sign-in attempt. SameSite=Lax, because the
	// provider sends the browser back with a cross-site top-level GET, and
	// scoped to /auth/.
	attemptCookie = "opsgate_oidc"
	attemptTTL    = 10 * time.Minute
	// maxNext bounds the page to return to that an attempt carries.
	maxNext = 400
)

// idpScopes are what a session begun at the identity provider may do:
// read, start runs and decide (eligibility is still the approvers'); the
// admin pages need an admin token.
var idpScopes = core.Scopes{core.ScopeRead, core.ScopeRequest, core.ScopeDecide}

// attempt is what the attempt cookie holds.
type attempt struct {
	oidc.Attempt
	Next string `json:"next"`
	Exp  int64  `json:"exp"`
}

func (s *server) encodeAttempt(a attempt) string {
	b, _ := json.Marshal(a) // only strings and ints
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + s.tag("oidc-attempt", p)
}

func (s *server) decodeAttempt(v string, now time.Time) (attempt, bool) {
	p, sig, ok := strings.Cut(v, ".")
	if !ok || len(v) > maxCookieLen || subtle.ConstantTimeCompare([]byte(sig), []byte(s.tag("oidc-attempt", p))) != 1 {
		return attempt{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	var a attempt
	if err != nil || json.Unmarshal(b, &a) != nil || a.State == "" || a.Nonce == "" || a.Verifier == "" || now.Unix() >= a.Exp {
		return attempt{}, false
	}
	return a, true
}

func (s *server) setAttemptCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: attemptCookie, Value: value, Path: "/auth/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure || r.TLS != nil})
}

// idpLogin starts a sign-in attempt at the identity provider.
// The routes exist only when it is configured (web.go).
func (s *server) idpLogin(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.FormValue("next"), "/chat")
	if len(next) > maxNext {
		next = "/chat" // the attempt cookie must stay under maxCookieLen
	}
	a := attempt{Attempt: oidc.NewAttempt(), Next: next, Exp: s.o.Now().Add(attemptTTL).Unix()}
	to, err := s.idp.AuthURL(r.Context(), a.Attempt)
	if err != nil {
		s.log.ErrorContext(r.Context(), "web: identity provider unavailable", "issuer", s.idp.Issuer(), "err", err)
		s.renderSignin(w, r, http.StatusServiceUnavailable, "Sign-in with the identity provider is unavailable right now; try again in a moment (the server log says why).")
		return
	}
	s.setAttemptCookie(w, r, s.encodeAttempt(a), int(attemptTTL.Seconds()))
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, to, http.StatusFound)
}

// idpCallback takes the provider's answer and begins a session.
func (s *server) idpCallback(w http.ResponseWriter, r *http.Request) {
	ctx, now, q := r.Context(), s.o.Now(), r.URL.Query()
	refuse := func(status int, why, msg string, err error) {
		s.log.WarnContext(ctx, "web: identity provider sign-in refused", "why", why, "err", err, "remote", r.RemoteAddr)
		s.renderSignin(w, r, status, msg)
	}
	c, err := r.Cookie(attemptCookie)
	if err != nil {
		refuse(http.StatusBadRequest, "no attempt cookie", "This sign-in did not start in this browser, or it took longer than 10 minutes. Please start again.", nil)
		return
	}
	// Whatever happens next, this attempt is over.
	s.setAttemptCookie(w, r, "", -1)
	a, ok := s.decodeAttempt(c.Value, now)
	if !ok {
		refuse(http.StatusBadRequest, "attempt cookie invalid or expired", "This sign-in took longer than 10 minutes or its cookie was altered. Please start again.", nil)
		return
	}
	state := q.Get("state")
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(a.State)) != 1 {
		refuse(http.StatusBadRequest, "state mismatch", "The identity provider's answer does not belong to this browser's sign-in attempt. Please start again.", nil)
		return
	}
	// Only an answer to this browser's attempt shows the provider's words.
	if e := q.Get("error"); e != "" {
		refuse(http.StatusUnauthorized, "provider answered "+e, "The identity provider did not sign you in ("+clip(e+": "+q.Get("error_description"), 200)+").", nil)
		return
	}
	if err := s.signins.ConsoleStateUse(ctx, state, time.Unix(a.Exp, 0), now); err != nil {
		if errors.Is(err, core.ErrConflict) {
			refuse(http.StatusBadRequest, "state replayed", "This sign-in answer was already used. Please start again.", err)
			return
		}
		s.log.ErrorContext(ctx, "web: record sign-in state", "err", err)
		s.renderSignin(w, r, http.StatusServiceUnavailable, "The console cannot record the sign-in right now; try again in a moment.")
		return
	}
	id, err := s.idp.Finish(ctx, a.Attempt, q.Get("code"))
	if err != nil {
		status, msg := idpRefusal(err)
		refuse(status, "token refused", msg, err)
		return
	}
	identity := Channel + ":" + id.Person
	groups := s.approverGroups(id.Groups)
	if !s.o.People.Known(identity) && len(groups) == 0 {
		refuse(http.StatusForbidden, "unknown person "+identity, fmt.Sprintf("You signed in at the identity provider as %s, but opsgate's configuration does not know %s. "+
			"Ask an operator to list it under people (or in an approver group, or to give you an identity provider group that names one).", id.Person, identity), nil)
		return
	}
	exp := now.Add(s.o.SessionTTL)
	ss := session{ID: randomID(), Exp: exp.Unix(), IDP: true}
	if err := s.signins.ConsoleSigninCreate(ctx, core.ConsoleSignin{ID: ss.ID, Identity: identity, Name: id.Name,
		Groups: id.Groups, CreatedAt: now, ExpiresAt: exp}, now); err != nil {
		s.log.ErrorContext(ctx, "web: record sign-in", "actor", identity, "err", err)
		s.renderSignin(w, r, http.StatusServiceUnavailable, "The console cannot record the sign-in right now; try again in a moment.")
		return
	}
	s.setCookie(w, r, sessionCookie, s.encodeSession(ss), s.o.SessionTTL)
	s.log.InfoContext(ctx, "web: signed in at the identity provider", "actor", identity, "subject", id.Subject, "approver_groups", groups)
	// A page that moves on by itself rather than a redirect: the browser
	// arrived here from the provider's site, and a strict session cookie
	// set in a navigation that began cross-site is not sent on its
	// redirects; a navigation this page starts is same-site.
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_ = continuePage.Execute(w, a.Next)
}

var continuePage = template.Must(template.New("continue").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0;url={{.}}">
<title>Signed in · opsgate</title><link rel="stylesheet" href="/static/console.css"></head>
<body><main><p id="continue">Signed in. <a href="{{.}}">Continue</a>.</p></main></body></html>`))

// idpRefusal is the status and words a refused identity provider answer
// gets.
func idpRefusal(err error) (int, string) {
	switch {
	case errors.Is(err, oidc.ErrUnavailable):
		return http.StatusServiceUnavailable, "The identity provider cannot be reached right now; try again in a moment."
	case errors.Is(err, oidc.ErrNoPerson):
		return http.StatusForbidden, "The identity provider did not say who you are (the configured person claim is missing); ask an operator to check channels.console.oidc.person_claim."
	case errors.Is(err, oidc.ErrUnverifiedEmail):
		return http.StatusForbidden, "The identity provider has not verified your email address; verify it there and sign in again."
	case errors.Is(err, oidc.ErrExchange):
		return http.StatusUnauthorized, "The identity provider refused this sign-in's code. Please start again."
	}
	// Issuer, audience, expiry, nonce, signature: the token is not
	// accepted; the log has the detail.
	msg := "The identity provider's answer was refused: " + strings.TrimPrefix(rootMessage(err), "the ") + ". Please start again."
	return http.StatusUnauthorized, msg
}

// rootMessage is the sentinel's text of an oidc refusal.
func rootMessage(err error) string {
	for _, s := range []error{oidc.ErrWrongIssuer, oidc.ErrWrongAudience, oidc.ErrExpired, oidc.ErrNonce, oidc.ErrBadToken} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return oidc.ErrBadToken.Error()
}

// approverGroups are those of the identity provider's groups that name an
// approver group of the live configuration.
func (s *server) approverGroups(groups []string) []string {
	var out []string
	for _, g := range groups {
		if s.o.People.ApproverGroup(g) {
			out = append(out, g)
		}
	}
	return out
}

// idpSession completes decodeSession for a session begun at the identity
// provider: the stored sign-in, judged against the live configuration.
func (s *server) idpSession(ctx context.Context, ss session, now time.Time) (reqInfo, error) {
	si, err := s.signins.ConsoleSigninGet(ctx, ss.ID, now)
	if errors.Is(err, core.ErrNotFound) {
		return reqInfo{}, ErrBadSession
	}
	if err != nil {
		return reqInfo{}, fmt.Errorf("web: check session: %w", err)
	}
	groups := s.approverGroups(si.Groups)
	if !s.o.People.Known(si.Identity) && len(groups) == 0 {
		s.log.InfoContext(ctx, "web: session ended: the configuration no longer knows the person", "actor", si.Identity)
		return reqInfo{}, ErrBadSession
	}
	return reqInfo{sess: ss, actor: core.Actor{ID: si.Identity, Name: si.Name}, scopes: idpScopes, groups: groups,
		auth: authority.SignedInActor(si.Identity, idpScopes, groups)}, nil
}

// setupIDP checks the options of sign-in at the identity provider and,
// when it is on, routes decisions through groupEngine.
func (s *server) setupIDP() error {
	if s.o.OIDC == nil {
		if s.o.NoTokenLogin {
			return errors.New("web: token sign-in is off and no identity provider is configured: nobody could sign in")
		}
		return nil
	}
	if s.o.People == nil {
		return errors.New("web: Options.People is required with OIDC")
	}
	st, ok := s.o.Store.(SigninStore)
	if !ok {
		return fmt.Errorf("web: store %T does not keep sign-ins (SigninStore), required with OIDC", s.o.Store)
	}
	s.idp, s.signins = s.o.OIDC, st
	s.o.Engine = groupEngine{s.o.Engine}
	return nil
}

// groupEngine is the console's engine when sign-in at the identity
// provider is on: every decision made through it carries the approver
// groups the provider vouches the signed-in person belongs to.
type groupEngine struct{ Engine }

func (e groupEngine) Decide(ctx context.Context, actor core.Actor, channel string, d core.Decision) (*approvals.Approval, error) {
	d.Groups = infoFrom(ctx).groups
	return e.Engine.Decide(ctx, actor, channel, d)
}

// clip shortens outside text to n characters for a page.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
