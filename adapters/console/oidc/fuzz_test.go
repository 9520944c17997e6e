package oidc

import (
	"encoding/base64"
	"errors"
	"testing"
)

// FuzzVerifyRefusal feeds arbitrary ID tokens to the words of a refusal:
// it reads an unverified payload, so it must never panic and always name
// one of the token sentinels.
func FuzzVerifyRefusal(f *testing.F) {
	c, err := New(Config{Issuer: "https://idp.example.com", ClientID: "opsgate", RedirectURL: "https://ops.example.com/auth/callback"})
	if err != nil {
		f.Fatal(err)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	f.Add("a." + enc(`{"iss":"https://other","aud":"opsgate"}`) + ".c")
	f.Add("a." + enc(`{"iss":"https://idp.example.com","aud":["x","y"]}`) + ".c")
	f.Add("a." + enc(`{"aud":7}`) + ".c")
	f.Add("....")
	f.Fuzz(func(t *testing.T, raw string) {
		err := c.verifyRefusal(raw, errors.New("refused"))
		if !errors.Is(err, ErrWrongIssuer) && !errors.Is(err, ErrWrongAudience) && !errors.Is(err, ErrBadToken) {
			t.Fatalf("refusal %v names no sentinel", err)
		}
	})
}

// FuzzIdentity feeds arbitrary claims (as JSON decodes them) to the
// person and groups reading: never a panic, and an accepted person is a
// usable identity.
func FuzzIdentity(f *testing.F) {
	c, err := New(Config{Issuer: "https://idp.example.com", ClientID: "opsgate", RedirectURL: "https://ops.example.com/auth/callback", GroupsClaim: "groups"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add("alice@example.com", "sre", true, "")
	f.Add(" ", "", false, "false")
	f.Add("a b", "x", true, "true")
	f.Fuzz(func(t *testing.T, person, group string, list bool, verified string) {
		claims := map[string]any{"email": person, "email_verified": verified}
		if list {
			claims["groups"] = []any{group, 3, group}
		} else {
			claims["groups"] = group
		}
		id, err := c.identity("sub", claims)
		if err != nil {
			return
		}
		if id.Person == "" || len(id.Person) > 320 {
			t.Fatalf("accepted person %q", id.Person)
		}
		for _, r := range id.Person {
			if r <= ' ' || r == 0x7f {
				t.Fatalf("accepted person %q with a space or control character", id.Person)
			}
		}
		if verified == "false" {
			t.Fatal("accepted an email the provider marks unverified")
		}
		if len(id.Groups) > 1 {
			t.Fatalf("groups %q: duplicates kept", id.Groups)
		}
	})
}
