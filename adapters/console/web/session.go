package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
)

// Cookie names. The session cookie is HttpOnly and SameSite=Strict; the
// sign-in cookie carries the double-submit nonce of the sign-in form, the
// only form shown before a session exists.
const (
	sessionCookie = "opsgate_session"
	signinCookie  = "opsgate_signin"
	csrfField     = "_csrf"
	maxCookieLen  = 1024
)

// session is what a signed cookie holds. The token is named by its tag, not
// stored, and the actor is looked up again on every request, so removing a
// token from the config ends its sessions. A session begun at the
// identity provider (IDP) names no token: its identity and groups are in
// the store under its id (console_signins), read on every request.
type session struct {
	ID  string `json:"sid"`
	Tag string `json:"tok,omitempty"`
	Exp int64  `json:"exp"`
	IDP bool   `json:"idp,omitempty"`
}

// ErrBadSession is any session cookie that does not verify: forged,
// truncated, expired, signed out, or for a token no longer configured.
var ErrBadSession = errors.New("web: invalid session")

// tag is a keyed digest of v in a domain, so tags for different purposes
// never collide.
func (s *server) tag(domain, v string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *server) encodeSession(ss session) string {
	b, _ := json.Marshal(ss) // only strings and ints
	p := base64.RawURLEncoding.EncodeToString(b)
	return p + "." + s.tag("session", p)
}

// decodeSession verifies a cookie value: signature, expiry, that its token
// is still configured (or, for a sign-in at the identity provider, that
// the store still holds it and the live configuration still knows the
// person), and (in the store, so a sign-out anywhere counts) that it was
// not signed out. Any cookie that does not verify is ErrBadSession; a
// store that cannot answer is another error, so a database blip does not
// sign everybody out. The result lacks only the CSRF token.
func (s *server) decodeSession(ctx context.Context, v string, now time.Time) (reqInfo, error) {
	ss, actor, err := s.verifyCookie(v, now)
	if err != nil {
		return reqInfo{}, err
	}
	if ss.IDP {
		// Signing out ends the stored sign-in, so no revocation lookup.
		return s.idpSession(ctx, ss, now)
	}
	revoked, err := s.sessions.ConsoleSessionRevoked(ctx, ss.ID, now)
	if err != nil {
		return reqInfo{}, fmt.Errorf("web: check session: %w", err)
	}
	if revoked {
		return reqInfo{}, ErrBadSession
	}
	tok := s.tokenOf(ss.Tag)
	return reqInfo{sess: ss, actor: actor, scopes: tok.scopes, auth: tok.auth}, nil
}

// verifyCookie is decodeSession without the store: signature, expiry, and
// that the token is still configured and token sign-in is on (a session
// begun at the identity provider returns no actor: the store has it).
func (s *server) verifyCookie(v string, now time.Time) (session, core.Actor, error) {
	if len(v) > maxCookieLen {
		return session{}, core.Actor{}, ErrBadSession
	}
	p, sig, ok := strings.Cut(v, ".")
	if !ok || subtle.ConstantTimeCompare([]byte(sig), []byte(s.tag("session", p))) != 1 {
		return session{}, core.Actor{}, ErrBadSession
	}
	b, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return session{}, core.Actor{}, ErrBadSession
	}
	var ss session
	if err := json.Unmarshal(b, &ss); err != nil || ss.ID == "" || now.Unix() >= ss.Exp {
		return session{}, core.Actor{}, ErrBadSession
	}
	if ss.IDP {
		if s.idp == nil || ss.Tag != "" {
			return session{}, core.Actor{}, ErrBadSession
		}
		return ss, core.Actor{}, nil
	}
	if s.o.NoTokenLogin {
		return session{}, core.Actor{}, ErrBadSession
	}
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t.tag), []byte(ss.Tag)) == 1 {
			return ss, t.actor, nil
		}
	}
	return session{}, core.Actor{}, ErrBadSession
}

// csrfToken is the per-session token every form carries: it is derived
// from the session id, so it needs no storage and dies with the session.
func (s *server) csrfToken(ss session) string { return s.tag("csrf", ss.ID) }

type ctxKey struct{}

type reqInfo struct {
	sess   session
	actor  core.Actor
	scopes core.Scopes
	// auth is the session's actor as core/authority judges it.
	auth authority.Actor
	csrf string
	// groups are the approver groups the identity provider vouches the
	// actor belongs to (sessions begun there); decisions carry them.
	groups []string
}

// tokenOf returns the configured token a session names.
func (s *server) tokenOf(tag string) tokenEntry {
	for _, t := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t.tag), []byte(tag)) == 1 {
			return t
		}
	}
	return tokenEntry{}
}

func infoFrom(ctx context.Context) reqInfo {
	i, _ := ctx.Value(ctxKey{}).(reqInfo)
	return i
}

// authed requires a valid session: without one, a page request is
// redirected to sign-in (and back afterwards), the event stream gets 401.
// Every non-GET request must also carry the session's CSRF token, on top
// of the Origin / Sec-Fetch-Site check ServeHTTP applies to all requests.
func (s *server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := s.o.Now()
		c, err := r.Cookie(sessionCookie)
		var info reqInfo
		if err == nil {
			info, err = s.decodeSession(r.Context(), c.Value, now)
		}
		if err != nil && c != nil && !errors.Is(err, ErrBadSession) {
			s.log.ErrorContext(r.Context(), "web: session check failed", "err", err)
			s.plainError(w, http.StatusServiceUnavailable, "The console cannot check your session right now; try again in a moment.")
			return
		}
		if err != nil {
			if c != nil {
				s.clearCookie(w, r, sessionCookie)
			}
			if r.URL.Path == "/events" {
				s.plainError(w, http.StatusUnauthorized, "Sign in first.")
				return
			}
			next := r.URL.RequestURI()
			if r.Method != http.MethodGet {
				next = ""
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(localPath(next, "/chat")), http.StatusSeeOther)
			return
		}
		info.csrf = s.csrfToken(info.sess)
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			r.Body = http.MaxBytesReader(w, r.Body, 256<<10)
			got := r.PostFormValue(csrfField)
			if got == "" {
				got = r.Header.Get("X-CSRF-Token")
			}
			if subtle.ConstantTimeCompare([]byte(got), []byte(info.csrf)) != 1 {
				s.log.WarnContext(r.Context(), "web: CSRF token missing or wrong", "method", r.Method, "path", r.URL.Path, "actor", info.actor.ID)
				s.plainError(w, http.StatusForbidden, "Forbidden: the form's security token is missing or stale. Reload the page and try again.")
				return
			}
		}
		ctx := authority.WithActor(context.WithValue(r.Context(), ctxKey{}, info), info.auth)
		h(w, r.WithContext(ctx))
	}
}

func (s *server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: int(maxAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure || r.TLS != nil,
	})
}

func (s *server) clearCookie(w http.ResponseWriter, r *http.Request, name string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secure || r.TLS != nil})
}

func randomID() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *server) signinPage(w http.ResponseWriter, r *http.Request) {
	s.renderSignin(w, r, http.StatusOK, "")
}

func (s *server) renderSignin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	// Reuse a nonce the browser already holds, so two sign-in pages open at
	// once (or a stray background request) do not invalidate each other.
	nonce := randomID()
	if c, err := r.Cookie(signinCookie); err == nil && len(c.Value) >= 20 && len(c.Value) <= 64 {
		nonce = c.Value
	}
	s.setCookie(w, r, signinCookie, nonce, 30*time.Minute)
	next := localPath(r.FormValue("next"), "/chat")
	// Here is the sign-in page whatever the path (a refused callback's URL
	// carries the provider's code, which the page must not repeat).
	data := map[string]any{"Title": "Sign in", "Nonce": nonce, "Next": next, "Error": msg, "TokenLogin": !s.o.NoTokenLogin,
		"Here": "/signin?next=" + url.QueryEscape(next)}
	if s.idp != nil {
		data["IDP"] = s.idp.Issuer()
		data["IDPLogin"] = "/auth/login?next=" + url.QueryEscape(next)
	}
	s.render(w, r, status, "signin", data)
}

// signin exchanges an API token for a session cookie. The form carries a
// nonce that must equal the sign-in cookie (double submit), so another
// site cannot sign a browser in under the attacker's token.
func (s *server) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.renderSignin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	if s.o.NoTokenLogin {
		s.log.WarnContext(r.Context(), "web: token sign-in refused: turned off", "remote", r.RemoteAddr)
		s.renderSignin(w, r, http.StatusForbidden, "Sign-in with an API token is turned off here; sign in with your identity provider.")
		return
	}
	c, err := r.Cookie(signinCookie)
	if err != nil || c.Value == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue("nonce"))) != 1 {
		s.renderSignin(w, r, http.StatusForbidden, "The sign-in form expired; please try again.")
		return
	}
	tok := strings.TrimSpace(r.PostFormValue("token"))
	tag := s.tag("token", tok)
	var actor *core.Actor
	for i := range s.tokens {
		// Compare against every token so timing does not reveal which matched.
		if subtle.ConstantTimeCompare([]byte(s.tokens[i].tag), []byte(tag)) == 1 && tok != "" {
			actor = &s.tokens[i].actor
		}
	}
	if actor == nil {
		s.log.WarnContext(r.Context(), "web: sign-in refused", "remote", r.RemoteAddr)
		s.renderSignin(w, r, http.StatusUnauthorized, "That token is not valid.")
		return
	}
	ss := session{ID: randomID(), Tag: tag, Exp: s.o.Now().Add(s.o.SessionTTL).Unix()}
	s.clearCookie(w, r, signinCookie)
	s.setCookie(w, r, sessionCookie, s.encodeSession(ss), s.o.SessionTTL)
	s.log.InfoContext(r.Context(), "web: signed in", "actor", actor.ID)
	http.Redirect(w, r, localPath(r.PostFormValue("next"), "/chat"), http.StatusSeeOther)
}

// signout ends the session for every replica and restart: its id is
// stored as revoked until it would have expired (migration 0006), a
// sign-in at the identity provider is deleted (migration 0023), and the
// browser's cookie is cleared. If the store cannot record it, the user is
// told so rather than shown a sign-out that a copied cookie would outlive.
func (s *server) signout(w http.ResponseWriter, r *http.Request) {
	info := infoFrom(r.Context())
	if info.sess.IDP {
		if err := s.signins.ConsoleSigninEnd(r.Context(), info.sess.ID); err != nil {
			s.log.ErrorContext(r.Context(), "web: record sign-out", "actor", info.actor.ID, "err", err)
			s.plainError(w, http.StatusServiceUnavailable, "Sign-out could not be recorded; try again in a moment.")
			return
		}
	}
	// Recorded for identity provider sessions too: open event streams
	// watch the revocations (stream.go).
	if err := s.sessions.ConsoleSessionRevoke(r.Context(), info.sess.ID, time.Unix(info.sess.Exp, 0), s.o.Now()); err != nil {
		s.log.ErrorContext(r.Context(), "web: record sign-out", "actor", info.actor.ID, "err", err)
		s.plainError(w, http.StatusServiceUnavailable, "Sign-out could not be recorded; try again in a moment.")
		return
	}
	s.clearCookie(w, r, sessionCookie)
	s.log.InfoContext(r.Context(), "web: signed out", "actor", info.actor.ID)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}
