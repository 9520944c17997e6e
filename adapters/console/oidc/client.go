package oidc

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Refusals of Finish, each a sentinel the console turns into a page and
// tests branch on. Every one leaves the browser signed out.
var (
	// ErrUnavailable: discovery (or the provider's keys) could not be
	// fetched, or the discovery document names another issuer.
	ErrUnavailable = errors.New("the identity provider is unavailable")
	// ErrExchange: the provider refused the authorization code (used,
	// expired, issued to another client, or a PKCE verifier that does not
	// match).
	ErrExchange = errors.New("the identity provider refused the sign-in code")
	// ErrWrongIssuer: the ID token was issued by another provider.
	ErrWrongIssuer = errors.New("the ID token was issued by another identity provider")
	// ErrWrongAudience: the ID token was issued for another application.
	ErrWrongAudience = errors.New("the ID token was issued for another application")
	// ErrExpired: the ID token has expired.
	ErrExpired = errors.New("the ID token has expired")
	// ErrNonce: the ID token's nonce is missing or not this attempt's.
	ErrNonce = errors.New("the ID token does not belong to this sign-in attempt (nonce)")
	// ErrBadToken: no ID token, or one whose signature or form is wrong.
	ErrBadToken = errors.New("the ID token is not valid")
	// ErrNoPerson: the person claim is missing or not a usable name.
	ErrNoPerson = errors.New("the identity provider did not say who you are")
	// ErrUnverifiedEmail: the person claim is an email address the
	// provider marks unverified.
	ErrUnverifiedEmail = errors.New("the identity provider has not verified your email address")
)

// Identity is who the provider says signed in.
type Identity struct {
	// Person is the person claim's value (an email address lower-cased);
	// the console acts as "console:<Person>".
	Person string
	// Subject is the provider's stable id of the user (sub), for logs.
	Subject string
	// Name is a display name (name, else preferred_username), may be "".
	Name string
	// Groups is the groups claim, when configured; nil otherwise.
	Groups []string
}

// Attempt is one sign-in attempt's secrets. The console keeps it in the
// browser (a signed cookie) between AuthURL and Finish: the state ties the
// provider's answer to this browser, the nonce ties the ID token to this
// attempt, and the PKCE verifier ties the code to it.
type Attempt struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
}

// NewAttempt makes fresh random secrets for one attempt.
func NewAttempt() Attempt {
	return Attempt{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier()}
}

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// Client is the console's relying party for one identity provider. Safe
// for concurrent use.
type Client struct {
	cfg Config

	mu       sync.Mutex
	provider *gooidc.Provider
}

// New validates cfg and returns a client. It does not contact the
// provider: discovery happens on the first sign-in and is retried on the
// next one after a failure.
func New(cfg Config) (*Client, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: c}, nil
}

// Issuer is the configured issuer URL.
func (c *Client) Issuer() string { return c.cfg.Issuer }

// PersonClaim is the claim that names the person.
func (c *Client) PersonClaim() string { return c.cfg.PersonClaim }

func (c *Client) ctx(ctx context.Context) context.Context {
	return gooidc.ClientContext(ctx, c.cfg.HTTPClient)
}

// discover returns the provider, fetching its discovery document once.
func (c *Client) discover(ctx context.Context) (*gooidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	p, err := gooidc.NewProvider(c.ctx(ctx), c.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery at %s: %v", ErrUnavailable, c.cfg.Issuer, err)
	}
	c.provider = p
	return p, nil
}

func (c *Client) oauth(p *gooidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: c.cfg.RedirectURL, Scopes: c.cfg.Scopes}
}

// AuthURL is where to send the browser to sign in for attempt a.
func (c *Client) AuthURL(ctx context.Context, a Attempt) (string, error) {
	p, err := c.discover(ctx)
	if err != nil {
		return "", err
	}
	return c.oauth(p).AuthCodeURL(a.State, oauth2.S256ChallengeOption(a.Verifier), gooidc.Nonce(a.Nonce)), nil
}

// Finish redeems the provider's code for attempt a (whose state the
// caller has already matched and spent) and returns who signed in, or a
// refusal matching one of the sentinels above.
func (c *Client) Finish(ctx context.Context, a Attempt, code string) (*Identity, error) {
	p, err := c.discover(ctx)
	if err != nil {
		return nil, err
	}
	ctx = c.ctx(ctx)
	tok, err := c.oauth(p).Exchange(ctx, code, oauth2.VerifierOption(a.Verifier))
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) {
			return nil, fmt.Errorf("%w: %s %s", ErrExchange, re.ErrorCode, re.ErrorDescription)
		}
		return nil, fmt.Errorf("%w: %v", ErrExchange, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fmt.Errorf("%w: the token response has no id_token", ErrBadToken)
	}
	idt, err := p.Verifier(&gooidc.Config{ClientID: c.cfg.ClientID, Now: c.cfg.Now}).Verify(ctx, raw)
	if err != nil {
		return nil, c.verifyRefusal(raw, err)
	}
	if len(idt.Audience) > 1 {
		// OIDC Core 3.1.3.7: with several audiences, azp must be us.
		var azp struct {
			AZP string `json:"azp"`
		}
		if err := idt.Claims(&azp); err != nil || azp.AZP != c.cfg.ClientID {
			return nil, fmt.Errorf("%w: authorized party %q, audiences %v", ErrWrongAudience, azp.AZP, idt.Audience)
		}
	}
	if idt.Nonce == "" {
		return nil, fmt.Errorf("%w: the ID token carries no nonce", ErrNonce)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(a.Nonce)) != 1 {
		return nil, fmt.Errorf("%w: another attempt's nonce", ErrNonce)
	}
	claims := map[string]any{}
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %v", ErrBadToken, err)
	}
	if c.needsUserInfo(claims) && p.UserInfoEndpoint() != "" {
		// The provider may keep profile claims for its userinfo endpoint
		// (OIDC Core 5.4); read them there, for the same subject only.
		ui, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
		if err != nil {
			return nil, fmt.Errorf("%w: userinfo: %v", ErrUnavailable, err)
		}
		if ui.Subject != idt.Subject {
			return nil, fmt.Errorf("%w: userinfo is for subject %q, the ID token for %q", ErrBadToken, ui.Subject, idt.Subject)
		}
		more := map[string]any{}
		if err := ui.Claims(&more); err != nil {
			return nil, fmt.Errorf("%w: userinfo claims: %v", ErrBadToken, err)
		}
		for k, v := range more {
			if _, ok := claims[k]; !ok {
				claims[k] = v
			}
		}
	}
	return c.identity(idt.Subject, claims)
}

// needsUserInfo reports whether a claim opsgate reads is not in the ID
// token.
func (c *Client) needsUserInfo(claims map[string]any) bool {
	if _, ok := claims[c.cfg.PersonClaim]; !ok {
		return true
	}
	if _, ok := claims[c.cfg.GroupsClaim]; c.cfg.GroupsClaim != "" && !ok {
		return true
	}
	return false
}

// identity reads the person, name and groups from the claims.
func (c *Client) identity(sub string, claims map[string]any) (*Identity, error) {
	v, _ := claims[c.cfg.PersonClaim].(string)
	person := strings.TrimSpace(v)
	if person == "" || len(person) > 320 || strings.ContainsFunc(person, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return nil, fmt.Errorf("%w: claim %q is %s", ErrNoPerson, c.cfg.PersonClaim, describeClaim(claims[c.cfg.PersonClaim]))
	}
	if c.cfg.PersonClaim == "email" {
		if verified, ok := claims["email_verified"]; ok && (verified == false || verified == "false") {
			return nil, fmt.Errorf("%w: %s", ErrUnverifiedEmail, person)
		}
		person = strings.ToLower(person)
	}
	id := &Identity{Person: person, Subject: sub}
	if n, _ := claims["name"].(string); n != "" {
		id.Name = n
	} else if n, _ := claims["preferred_username"].(string); n != "" {
		id.Name = n
	}
	if c.cfg.GroupsClaim != "" {
		id.Groups = groups(claims[c.cfg.GroupsClaim])
	}
	return id, nil
}

// maxGroups bounds how many groups of one person are kept.
const maxGroups = 1000

// groups reads a groups claim: an array of strings (others ignored) or a
// single string.
func groups(v any) []string {
	var out []string
	switch g := v.(type) {
	case string:
		if g != "" {
			out = append(out, g)
		}
	case []any:
		for _, x := range g {
			if s, ok := x.(string); ok && s != "" && !slices.Contains(out, s) && len(out) < maxGroups {
				out = append(out, s)
			}
		}
	}
	return out
}

func describeClaim(v any) string {
	switch x := v.(type) {
	case nil:
		return "missing"
	case string:
		if strings.TrimSpace(x) == "" {
			return "empty"
		}
		return fmt.Sprintf("%q, which has spaces or is too long", x)
	}
	return fmt.Sprintf("not a string (%T)", v)
}

// verifyRefusal names why go-oidc refused an ID token, in the order it
// checks: issuer, audience, expiry, then signature. The token's unverified
// payload is read only to choose the words; the refusal was go-oidc's.
func (c *Client) verifyRefusal(raw string, err error) error {
	var exp *gooidc.TokenExpiredError
	if errors.As(err, &exp) {
		return fmt.Errorf("%w: at %s", ErrExpired, exp.Expiry.UTC().Format("2006-01-02 15:04:05 UTC"))
	}
	var claims struct {
		Issuer   string          `json:"iss"`
		Audience json.RawMessage `json:"aud"`
	}
	if parts := strings.Split(raw, "."); len(parts) == 3 {
		if b, derr := base64.RawURLEncoding.DecodeString(parts[1]); derr == nil {
			_ = json.Unmarshal(b, &claims)
		}
	}
	if claims.Issuer != "" && claims.Issuer != c.cfg.Issuer {
		return fmt.Errorf("%w: %q, not %q", ErrWrongIssuer, claims.Issuer, c.cfg.Issuer)
	}
	var aud []string
	if json.Unmarshal(claims.Audience, &aud) != nil {
		var one string
		if json.Unmarshal(claims.Audience, &one) == nil {
			aud = []string{one}
		}
	}
	if len(claims.Audience) > 0 && !slices.Contains(aud, c.cfg.ClientID) {
		return fmt.Errorf("%w: %v, not %q", ErrWrongAudience, aud, c.cfg.ClientID)
	}
	return fmt.Errorf("%w: %v", ErrBadToken, err)
}
