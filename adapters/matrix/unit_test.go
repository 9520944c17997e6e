package matrix

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core"
)

type nopSink struct{}

func (nopSink) HandleEvent(context.Context, core.ChannelEvent) (core.Receipt, error) {
	return core.Receipt{}, nil
}
func (nopSink) CardByApproval(context.Context, string) (core.Card, error) {
	return core.Card{}, core.ErrNotFound
}

type nopStore struct{}

func (nopStore) StateGet(context.Context, string) ([]byte, error) { return nil, core.ErrNotFound }
func (nopStore) StatePut(context.Context, string, []byte, time.Time) error {
	return nil
}
func (nopStore) LeaseAcquire(context.Context, string, string, time.Time, time.Time) (bool, error) {
	return true, nil
}
func (nopStore) LeaseRelease(context.Context, string, string) error { return nil }

// TestLimitExceededHonoursRetryAfter: a homeserver's M_LIMIT_EXCEEDED
// becomes a RateLimitError with its retry_after_ms; other 4xx are
// permanent, 5xx retried.
func TestLimitExceededHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	status, body := 0, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	ad, err := New(Config{HomeserverURL: srv.URL, UserID: "@bot:localhost", AccessToken: "secret-token", Rooms: []string{"!r:localhost"}},
		Deps{Sink: nopSink{}, Cards: nopSink{}, Store: nopStore{}})
	if err != nil {
		t.Fatal(err)
	}
	send := func() error {
		_, err := ad.Send(context.Background(), core.Outbound{Key: "k", Kind: core.KindReply, Text: "hi",
			Thread: core.Thread{Channel: ChannelName, Key: "!r:localhost/$root"}})
		return err
	}
	status, body = 429, `{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":2500}`
	var rl *core.RateLimitError
	if err := send(); !errors.As(err, &rl) || rl.RetryAfter != 2500*time.Millisecond {
		t.Errorf("429 → %v, want RateLimitError 2.5s", err)
	}
	status, body = 403, `{"errcode":"M_FORBIDDEN","error":"not in room"}`
	var pe *core.PermanentError
	if err := send(); !errors.As(err, &pe) {
		t.Errorf("403 → %v, want PermanentError", err)
	}
	status, body = 502, `bad gateway`
	if err := send(); err == nil || errors.As(err, &pe) || errors.As(err, &rl) {
		t.Errorf("502 → %v, want a plain retryable error", err)
	}
	if err := send(); strings.Contains(err.Error(), "secret-token") {
		t.Errorf("error shows the access token: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := Config{HomeserverURL: "https://matrix.example.org", UserID: "@ops:example.org", AccessToken: "tok", Rooms: []string{"!a:example.org", "#ops:example.org"}}
	if err := good.Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, c := range map[string]struct {
		mod   func(*Config)
		field string
	}{
		"NoHomeserver":   {func(c *Config) { c.HomeserverURL = "" }, "homeserver_url"},
		"RelativeURL":    {func(c *Config) { c.HomeserverURL = "matrix.example.org" }, "homeserver_url"},
		"BadUserID":      {func(c *Config) { c.UserID = "ops" }, "user_id"},
		"NoToken":        {func(c *Config) { c.AccessToken = "" }, "access_token"},
		"NoRoomsNoDMs":   {func(c *Config) { c.Rooms = nil }, "rooms"},
		"BadRoom":        {func(c *Config) { c.Rooms = []string{"ops"} }, "rooms[0]"},
		"DuplicateRooms": {func(c *Config) { c.Rooms = []string{"!a:x", "!a:x"} }, "rooms[1]"},
	} {
		cfg := good
		c.mod(&cfg)
		err := cfg.Validate()
		var ce *core.ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v, want a ConfigError", name, err)
			continue
		}
		found := false
		for _, p := range ce.Problems {
			found = found || p.Field == c.field
		}
		if !found {
			t.Errorf("%s: problems %+v, want one at %s", name, ce.Problems, c.field)
		}
	}
	dm := good
	dm.Rooms, dm.DirectMessages = nil, true
	if err := dm.Validate(); err != nil {
		t.Errorf("direct messages only: %v", err)
	}
}

func TestRequestText(t *testing.T) {
	t.Parallel()
	ad := &Adapter{self: "@opsgate:example.org", displayName: "Ops Gate"}
	for _, c := range []struct {
		body   string
		direct bool
		want   string
		ok     bool
	}{
		{"!ops deploy api 1.2.3", false, "deploy api 1.2.3", true},
		{"!ops", false, "help", true},
		{"!opsdeploy", false, "", false},
		{"opsgate: deploy api", false, "deploy api", true},
		{"Ops Gate: status", false, "status", true},
		{"@opsgate:example.org deploy", false, "deploy", true},
		{"deploy api 1.2.3", false, "", false},
		{"deploy api 1.2.3", true, "deploy api 1.2.3", true},
	} {
		got, ok := ad.requestText(c.body, &messageContent{}, c.direct)
		if got != c.want || ok != c.ok {
			t.Errorf("requestText(%q, direct=%v) = %q, %v; want %q, %v", c.body, c.direct, got, ok, c.want, c.ok)
		}
	}
}
