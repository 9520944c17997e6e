package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/internal/oidctest"
)

// TestServeOIDCSignInAndAuditSink runs the binary with sign-in only
// through a real OpenID Provider (token_login: false) and an HTTP audit
// sink: a person the configuration lists signs in at the provider; a
// token sign-in is refused; a configuration reload's audit entry reaches
// the sink, and /metrics counts it.
func TestServeOIDCSignInAndAuditSink(t *testing.T) {
	e := newEnv(t)
	base := e.baseURL()
	idp := oidctest.Start(t, oidctest.Options{
		Users:   []oidctest.User{{Username: "alice", Password: "pw", Email: "alice@example.com"}},
		Clients: []oidctest.Client{{ID: "opsgate", Secret: "s3cret-s3cret", RedirectURIs: []string{base + "/auth/callback"}}},
	})
	var mu sync.Mutex
	var sunk []approvals.AuditEntry
	arrived := make(chan struct{}, 16)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			var en approvals.AuditEntry
			if err := json.Unmarshal(sc.Bytes(), &en); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			sunk = append(sunk, en)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusOK)
		arrived <- struct{}{}
	}))
	defer sink.Close()
	// public_url belongs to the server section writeConfig starts with.
	e.writeConfig("  public_url: "+base+"\n"+e.storeYAML(""), fmt.Sprintf(`channels:
  console:
    enabled: true
    token_login: false
    oidc: {issuer: %q, client_id: opsgate, client_secret: s3cret-s3cret}
people:
  alice: ["console:alice@example.com"]
audit:
  sinks:
    - {name: siem, type: http, url: %q}
`, idp.Issuer, sink.URL))
	e.start()

	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 15 * time.Second}
	res, err := hc.Get(base + "/auth/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res = idp.Login(t, hc, res, "alice", "pw")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`content="0;url=([^"]+)"`).FindSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("sign-in at the provider: %d %s", res.StatusCode, body)
	}
	res, err = hc.Get(base + string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "console:alice@example.com") {
		t.Fatalf("not signed in as console:alice@example.com: %d %s", res.StatusCode, res.Request.URL)
	}
	// Token sign-in is off.
	res, err = http.PostForm(base+"/signin", url.Values{"nonce": {strings.Repeat("n", 24)}, "token": {e.token()}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("token sign-in with token_login false: %d", res.StatusCode)
	}

	// A reload writes an audit entry; the sink gets it.
	_ = e.srv.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.After(waitBound)
	for found := false; !found; {
		select {
		case <-arrived:
		case <-deadline:
			t.Fatalf("the reload's audit entry never reached the sink; got %v", sunk)
		}
		mu.Lock()
		for _, en := range sunk {
			found = found || en.Kind == approvals.AuditConfigReloaded
		}
		mu.Unlock()
	}
	mu.Lock()
	for i, en := range sunk {
		if en.Seq != int64(i+1) || en.Hash == "" {
			t.Errorf("sink entry %d: seq %d hash %q; want seq %d with its hash", i, en.Seq, en.Hash, i+1)
		}
	}
	n := len(sunk)
	mu.Unlock()
	want := fmt.Sprintf(`opsgate_audit_sink_delivered_total{sink="siem"} %d`, n)
	for {
		res, err := http.Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if strings.Contains(string(b), want) && strings.Contains(string(b), `opsgate_audit_sink_dead_letters_total{sink="siem"} 0`) {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("/metrics lacks %q", want)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
