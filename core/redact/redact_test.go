package redact

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"unicode"
)

func TestURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"https://h/x", "https://h/x"},
		{"https://user:pw@h/x", "https://user:****@h/x"},
		{"https://user@h/x", "https://user@h/x"},
		{"https://h/x?api_key=1&env=prod", "https://h/x?api_key=****&env=prod"},
		{"https://h/x?token=1&password=2&key=3&secret=4&signature=5&sig=6&access_token=7&client_secret=8&apikey=9&X-Amz-Credential=10",
			"https://h/x?token=****&password=****&key=****&secret=****&signature=****&sig=****&access_token=****&client_secret=****&apikey=****&X-Amz-Credential=****"},
		{"https://h/cb#access_token=abc&state=s", "https://h/cb#access_token=****&state=s"},
		{"https://hooks.slack.com/services/T0/B0/abcdef", "https://hooks.slack.com/services/T0/B0/****"},
		{"https://discord.com/api/webhooks/123/tok-en", "https://discord.com/api/webhooks/123/****"},
		{"https://api.telegram.org/bot123:AAE-x_y/sendMessage", "https://api.telegram.org/bot****/sendMessage"},
		{"https://h/x?Idempotency_Key=run/0", "https://h/x?Idempotency_Key=run/0"},
	}
	for _, c := range cases {
		if got := URL(c.in); got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestDSN(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"postgres://app:s3cret@db:5432/opsgate?sslmode=disable", "postgres://app:****@db:5432/opsgate?sslmode=disable"},
		{"postgres://app@db/opsgate?password=s3cret&sslmode=require", "postgres://app@db/opsgate?password=****&sslmode=require"},
		{"postgresql://db/opsgate?user=app&sslpassword=k3y", "postgresql://db/opsgate?user=app&sslpassword=****"},
		{"host=db user=app password=s3cret dbname=opsgate", "host=db user=app password=**** dbname=opsgate"},
		{"host=db password='s3 cret' dbname=x", "host=db password=**** dbname=x"},
		{"./data/opsgate.db", "./data/opsgate.db"},
		{"file:./data/opsgate.db?_pragma=busy_timeout(5000)", "file:./data/opsgate.db?_pragma=busy_timeout(5000)"},
	}
	for _, c := range cases {
		if got := DSN(c.in); got != c.want {
			t.Errorf("DSN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`http GET https://h/x?api_key=K: Get "https://h/x?api_key=K": dial tcp 127.0.0.1:1: connect: connection refused`,
			`http GET https://h/x?api_key=****: Get "https://h/x?api_key=****": dial tcp 127.0.0.1:1: connect: connection refused`},
		{`cannot parse "postgres://u:pw@h%zz/db"`, `cannot parse "postgres://u:****@h%zz/db"`},
		{"failed: token=abc, next", "failed: token=****, next"},
		{"exit status 3", "exit status 3"},
		{"retries=3 env=prod", "retries=3 env=prod"},
	}
	for _, c := range cases {
		if got := Text(c.in); got != c.want {
			t.Errorf("Text(%q)\n = %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	t.Parallel()
	sentinel := errors.New("sentinel")
	inner := &url.Error{Op: "Get", URL: "https://h/x?token=T", Err: sentinel}
	err := Error(fmt.Errorf("http: %w", inner))
	if strings.Contains(err.Error(), "token=T") || !strings.Contains(err.Error(), "token=****") {
		t.Fatalf("message not masked: %v", err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatal("errors.Is lost the sentinel")
	}
	plain := errors.New("nothing secret")
	if Error(plain) != plain || Error(nil) != nil {
		t.Fatal("an error with nothing to mask must be returned as it is")
	}
}

// FuzzText: masking never panics, leaves text without URLs or pairs
// alone, and a planted credential never survives, whatever text surrounds
// it.
func FuzzText(f *testing.F) {
	f.Add("Get \"https://h/x?a=1\": EOF", "K")
	f.Add("postgres://u:p@h/db?password=", "s3cret")
	f.Add("x=y&&==", "a b")
	f.Fuzz(func(t *testing.T, around, secret string) {
		out := Text(around)
		if !strings.Contains(around, "=") && !strings.Contains(around, "://") && out != around {
			t.Fatalf("text without a URL or a pair changed: %q -> %q", around, out)
		}
		// Secrets are taken to be URL-safe tokens without spaces.
		if len(secret) < 4 || strings.ContainsAny(secret, "&=#?/\"'<>`;,.)%@:+*") || strings.ContainsFunc(secret, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) || strings.Contains(around, secret) {
			return
		}
		for _, planted := range []string{
			"https://h/x?api_key=" + secret,
			"https://u:" + secret + "@h/x",
			"password=" + secret,
		} {
			got := Text(around + " " + planted + " " + around)
			// The text around may show the secret's characters by itself
			// (re-escaped); the planted copy must not add to them.
			if strings.Count(got, secret) > 2*strings.Count(out, secret) {
				t.Fatalf("secret %q survives in %q", secret, got)
			}
		}
	})
}
