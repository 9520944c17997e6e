// Package oidc signs people in to the web console with the company's
// identity provider: the OpenID Connect authorization code flow with PKCE,
// a state and a nonce per attempt, and the ID token checked for issuer,
// audience, expiry, signature (the provider's published keys) and nonce.
// It is the relying party only; the console (adapters/console/web) keeps
// the attempt in the browser, makes each state single-use in the store,
// and turns the Identity it returns into a session. docs/console.md has the
// operator's side.
//
// The protocol is github.com/coreos/go-oidc and golang.org/x/oauth2; this
// package adds the configuration, discovery on first use (a provider that
// is down does not stop opsgate starting), the claims opsgate reads, and
// refusals a person can act on.
package oidc

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ErrConfig is the sentinel of every configuration problem (Config.Validate).
var ErrConfig = errors.New("console oidc: invalid configuration")

// Config is channels.console.oidc, with the redirect URL opsgate serves.
type Config struct {
	// Issuer is the identity provider's issuer URL exactly as its discovery
	// document (<issuer>/.well-known/openid-configuration) states it.
	Issuer string
	// ClientID and ClientSecret are the app registered at the provider.
	// Without a secret opsgate is a public client (PKCE still applies).
	ClientID     string
	ClientSecret string
	// RedirectURL is where the provider sends the browser back:
	// <server.public_url>/auth/callback, registered at the provider.
	RedirectURL string
	// PersonClaim names the claim whose value makes the identity
	// console:<value>; default "email".
	PersonClaim string
	// GroupsClaim, when set, names the claim listing the person's groups
	// (an array of strings, or one string).
	GroupsClaim string
	// Scopes requested; default openid, profile, email. openid is always
	// requested.
	Scopes []string
	// HTTPClient makes every call to the provider (discovery, keys, token,
	// userinfo); default one with a 15 s timeout.
	HTTPClient *http.Client
	// Now is the clock the ID token's expiry is judged by; default time.Now.
	Now func() time.Time
}

// DefaultPersonClaim is the claim naming the person when none is configured.
const DefaultPersonClaim = "email"

// DefaultScopes are requested when Config.Scopes is empty.
var DefaultScopes = []string{"openid", "profile", "email"}

// Validate reports every problem of c as a *core.ConfigError (fields
// named as the keys under channels.console.oidc).
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if msg := urlProblem(c.Issuer); msg != "" {
		bad("issuer", "%s", msg)
	}
	if c.ClientID == "" {
		bad("client_id", "missing required value: the client id of the app registered at the identity provider")
	}
	if u, err := url.Parse(c.RedirectURL); c.RedirectURL == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		bad("redirect_url", "%q is not an absolute http(s) URL; set server.public_url", c.RedirectURL)
	}
	if c.PersonClaim == "" {
		c.PersonClaim = DefaultPersonClaim
	}
	for field, v := range map[string]string{"person_claim": c.PersonClaim, "groups_claim": c.GroupsClaim} {
		if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			bad(field, "a claim name has no spaces or control characters, not %q", v)
		}
	}
	if len(c.Scopes) == 0 {
		c.Scopes = DefaultScopes
	}
	for _, s := range c.Scopes {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '"' || r == '\\' }) {
			bad("scopes", "%q is not a scope name", s)
		}
	}
	if !slices.Contains(c.Scopes, "openid") {
		c.Scopes = append([]string{"openid"}, c.Scopes...)
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Issuer = strings.TrimSpace(c.Issuer)
	return c, core.ConfigErrorOf(ErrConfig, probs)
}

// urlProblem explains why issuer is not usable: it must be an absolute
// https URL without query or fragment; http only on a loopback address
// (a provider on the same machine, tests).
func urlProblem(issuer string) string {
	if issuer == "" {
		return "missing required value: the identity provider's issuer URL, e.g. https://idp.example.com"
	}
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Sprintf("%q is not an issuer URL (scheme://host[/path], no query)", issuer)
	}
	switch u.Scheme {
	case "https":
		return ""
	case "http":
		if h := u.Hostname(); h == "localhost" || net.ParseIP(h).IsLoopback() {
			return ""
		}
		return fmt.Sprintf("%q: use https (http is accepted only for a provider on a loopback address)", issuer)
	}
	return fmt.Sprintf("%q: the scheme must be https", issuer)
}
