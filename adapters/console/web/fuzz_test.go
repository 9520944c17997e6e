package web

import (
	"net/url"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeSession feeds arbitrary cookie values to the session check:
// it must never panic and never accept anything it did not sign.
func FuzzDecodeSession(f *testing.F) {
	s := &server{key: []byte("k")}
	s.tokens = []tokenEntry{{tag: s.tag("token", "t")}}
	good := s.encodeSession(session{ID: "id", Tag: s.tag("token", "t"), Exp: 2e9})
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("eyJzaWQiOiJ4In0.")
	f.Add(strings.Repeat("a", 2000))
	now := time.Unix(1e9, 0)
	f.Fuzz(func(t *testing.T, v string) {
		ss, _, err := s.verifyCookie(v, now)
		if err == nil && v != good {
			// Only a correctly signed payload may pass: re-signing it must
			// give back exactly v.
			if s.encodeSession(ss) != v {
				p, _, _ := strings.Cut(v, ".")
				if p+"."+s.tag("session", p) != v {
					t.Fatalf("accepted an unsigned cookie %q", v)
				}
			}
		}
	})
}

// FuzzParseEditArgs feeds arbitrary editor forms: parsing never panics, a
// refusal always names a field, and only arg: fields (plus the one new
// argument) become arguments.
func FuzzParseEditArgs(f *testing.F) {
	f.Add("arg:service=api&arg:replicas=3&argjson:replicas=1")
	f.Add("arg:x=%7B&argjson:x=1")
	f.Add("newkey=env&newvalue=prod&_csrf=z")
	f.Add("arg:=x&argjson:=1")
	f.Fuzz(func(t *testing.T, q string) {
		form, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		args, derr := parseEditArgs(form)
		if derr != nil {
			if derr.Field == "" || args != nil {
				t.Fatalf("refusal without a field: %+v", derr)
			}
			return
		}
		nk := strings.TrimSpace(form.Get("newkey"))
		for k := range args {
			if _, ok := form["arg:"+k]; !ok && k != nk {
				t.Fatalf("argument %q came from nowhere (form %v)", k, form)
			}
		}
	})
}

// FuzzLocalPath: whatever comes in, a redirect target stays on this site.
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/runs", "//evil", "/\\evil", "https://x", "/a?b=//c", "/%2F%2Fevil"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got := localPath(p, "/d")
		u, err := url.Parse(got)
		if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(got, "/") || strings.HasPrefix(got, "//") || strings.HasPrefix(got, "/\\") {
			t.Fatalf("localPath(%q) = %q leaves the site", p, got)
		}
	})
}

// FuzzDecodeAttempt feeds arbitrary attempt cookies to the callback's
// check: never a panic, and only a cookie the console signed passes.
func FuzzDecodeAttempt(f *testing.F) {
	s := &server{key: []byte("k")}
	good := s.encodeAttempt(attempt{Attempt: oidc.Attempt{State: "s", Nonce: "n", Verifier: "v"}, Next: "/chat", Exp: 2e9})
	f.Add(good)
	f.Add("")
	f.Add("x.y")
	f.Add(strings.Repeat(".", 3000))
	now := time.Unix(1e9, 0)
	f.Fuzz(func(t *testing.T, v string) {
		a, ok := s.decodeAttempt(v, now)
		if !ok {
			return
		}
		if p, _, _ := strings.Cut(v, "."); p+"."+s.tag("oidc-attempt", p) != v {
			t.Fatalf("accepted an unsigned attempt %q", v)
		}
		if a.State == "" || a.Nonce == "" || a.Verifier == "" {
			t.Fatalf("accepted an attempt without its secrets: %+v", a)
		}
	})
}
