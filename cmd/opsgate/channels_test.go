package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/delivery"
)

func TestOverridePacing(t *testing.T) {
	t.Parallel()
	def := delivery.Pacing{
		Conversation: delivery.Rate{Every: time.Second, Burst: 3},
		Group:        delivery.Rate{Every: 3 * time.Second, Burst: 1},
		Account:      delivery.Rate{Every: time.Second / 30, Burst: 30},
	}
	t.Run("UnsetKeepsDefaults", func(t *testing.T) {
		if got := overridePacing(def, config.RateLimits{}); got != def {
			t.Fatalf("got %+v, want the defaults %+v", got, def)
		}
	})
	t.Run("ConfiguredScopesReplaceDefaults", func(t *testing.T) {
		got := overridePacing(def, config.RateLimits{
			Conversation: config.RateLimit{Rate: config.Rate{Events: 2, Per: time.Second}, Burst: 5},
			Global:       config.RateLimit{Rate: config.Rate{Events: 10, Per: time.Second}, Burst: 10},
		})
		if got.Conversation != (delivery.Rate{Every: 500 * time.Millisecond, Burst: 5}) {
			t.Errorf("conversation = %+v", got.Conversation)
		}
		if got.Group != def.Group {
			t.Errorf("group changed: %+v", got.Group)
		}
		if got.Account != (delivery.Rate{Every: 100 * time.Millisecond, Burst: 10}) {
			t.Errorf("global must map onto the account bucket: %+v", got.Account)
		}
	})
	t.Run("AccountWinsOverGlobal", func(t *testing.T) {
		got := overridePacing(def, config.RateLimits{
			Account: config.RateLimit{Rate: config.Rate{Events: 1, Per: time.Second}, Burst: 1},
			Global:  config.RateLimit{Rate: config.Rate{Events: 10, Per: time.Second}, Burst: 10},
		})
		if got.Account != (delivery.Rate{Every: time.Second, Burst: 1}) {
			t.Errorf("account = %+v", got.Account)
		}
	})
}

// TestChannelsAreMountedOnTheListener checks the composition root: each
// enabled channel's documented paths (docs/architecture.md) answer on the one mux, and a forged
// request is refused there.
func TestChannelsAreMountedOnTheListener(t *testing.T) {
	t.Parallel()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store.DSN = filepath.Join(t.TempDir(), "opsgate.db")
	cfg.Server.PublicURL = "https://ops.example.com"
	cfg.Channels.Slack = config.Slack{Enabled: true, BotToken: "xoxb-test", SigningSecret: "s3cret", APIURL: "http://127.0.0.1:1/api/"}
	cfg.Channels.Telegram = config.Telegram{Enabled: true, BotToken: "123456:ABC-DEF1234ghIkl-zyx57W2v1u123ew11", WebhookSecret: "hook-secret", APIURL: "http://127.0.0.1:1"}
	cfg.Channels.Discord = config.Discord{Enabled: true, BotToken: "bot", ApplicationID: "1234567890",
		PublicKey: strings.Repeat("ab", 32), APIURL: "http://127.0.0.1:1/api/v10"}
	cfg.Channels.Email = config.Email{Enabled: true, Address: "ops@example.com", TokenKey: "0123456789abcdef0123",
		IMAP: config.IMAP{Addr: "127.0.0.1:1", Username: "ops", Password: "pw", Mailbox: "INBOX"}, SMTP: config.SMTP{Addr: "127.0.0.1:1"}}
	cfg.Channels.Webhooks = []config.Webhook{{Name: "ci", Secret: "webhook-secret"}}
	cfg.Channels.Local = config.Local{Enabled: true}
	st, err := openStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	eng, err := buildEngine(cfg, st, slog.New(slog.DiscardHandler), prometheus.NewRegistry(), nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	chans, err := buildChannels(cfg, st, eng, []api.Token{{Name: "admin", Token: "t0ken", Actor: "console:admin"}}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ch := range chans {
		names = append(names, ch.platform.Channel())
	}
	if strings.Join(names, ",") != "console,slack,telegram,discord,email,webhook,local" {
		t.Fatalf("channels = %v, want console, slack, telegram, discord, email, webhook, local", names)
	}
	mux := http.NewServeMux()
	for _, ch := range chans {
		for pattern, h := range ch.handlers {
			mux.Handle(pattern, h)
		}
	}
	for _, path := range []string{"/slack/events", "/slack/commands", "/slack/interactivity", "/telegram/webhook", "/discord/interactions", "/hooks/ci"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"type":"url_verification","challenge":"x"}`))
		req.Header.Set("X-Slack-Request-Timestamp", "1")
		req.Header.Set("X-Slack-Signature", "v0=00")
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "wrong")
		req.Header.Set("X-Signature-Ed25519", strings.Repeat("00", 64))
		req.Header.Set("X-Opsgate-Signature", "sha256="+strings.Repeat("00", 32))
		req.Header.Set("X-Signature-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("POST %s with a forged signature: %d, want 401", path, rec.Code)
		}
	}
	// The local channel takes the API's tokens, and only them.
	for _, tok := range []string{"", "wrong"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/local/v1/messages", strings.NewReader(`{"thread":"x","text":"help"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Errorf("POST /local/v1/messages with token %q: %d, want 401", tok, rec.Code)
		}
	}
}
