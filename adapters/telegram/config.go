package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// Modes of receiving updates.
const (
	// ModeWebhook has Telegram POST updates to PublicURL+WebhookPath.
	ModeWebhook = "webhook"
	// ModePolling reads updates with getUpdates; no public URL needed.
	ModePolling = "polling"
)

// WebhookPath is where Routes mounts WebhookHandler (docs/architecture.md).
const WebhookPath = "/telegram/webhook"

// DefaultAPIURL is the public Bot API.
const DefaultAPIURL = "https://api.telegram.org"

// Config is everything the adapter needs from the operator. cmd/opsgate maps
// channels.telegram (and server.public_url) onto it. Zero values take the
// defaults noted on each field.
type Config struct {
	// BotToken is the token @BotFather issued ("123456:ABC-DEF…"). The bot's
	// user id is its numeric prefix.
	BotToken string
	// Mode is ModeWebhook (default) or ModePolling.
	Mode string
	// WebhookSecret is sent to Telegram as setWebhook's secret_token and
	// required in X-Telegram-Bot-Api-Secret-Token on every webhook request:
	// 1–256 characters of A–Z, a–z, 0–9, '_' and '-'. Required in webhook mode.
	WebhookSecret string
	// PublicURL is server.public_url; the webhook is PublicURL+WebhookPath.
	// Required in webhook mode (https, as Telegram demands).
	PublicURL string
	// BotUsername (without '@') recognises "/cmd@name" and "@name" in
	// groups; learned from getMe when empty.
	BotUsername string
	// APIURL is the Bot API base (DefaultAPIURL): tests, a local Bot API
	// server.
	APIURL string
	// PollTimeout is getUpdates' long-poll timeout; default 30s.
	PollTimeout time.Duration
	// MaxBodyBytes caps a webhook request body; default 1 MiB.
	MaxBodyBytes int64
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	// Sink records inbound events durably (the engine). Required.
	Sink core.Sink
	// Cards fetches approval cards for prompts and stale buttons (the
	// engine). Required.
	Cards core.CardSource
	// Logger defaults to slog.Default(); the adapter scrubs the token
	// from everything it logs through it.
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// HTTPClient defaults to a client with a timeout longer than the
	// long poll.
	HTTPClient *http.Client
}

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("telegram: invalid config")

var (
	tokenRE  = regexp.MustCompile(`^([0-9]{1,20}):[A-Za-z0-9_-]{20,}$`)
	secretRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
)

// FieldPublicURL is the field of PublicURL's problems: it is
// server.public_url in the configuration, outside channels.telegram.
const FieldPublicURL = "server.public_url"

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are the keys under
// channels.telegram (FieldPublicURL for PublicURL). `opsgate config check`
// calls exactly this, so check and serve cannot disagree.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and fills defaults; every problem is reported,
// wrapped in ErrConfig, never logged and exited on.
func (c Config) withDefaults() (Config, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if c.Mode == "" {
		c.Mode = ModeWebhook
	}
	switch {
	case c.BotToken == "":
		bad("bot_token", "missing required value (telegram is enabled)")
	case !tokenRE.MatchString(c.BotToken):
		bad("bot_token", "want the token @BotFather gave (\"<bot id>:<secret>\")")
	}
	switch c.Mode {
	case ModeWebhook:
		switch {
		case c.WebhookSecret == "":
			bad("webhook_secret", "missing required value (telegram mode is webhook)")
		case !secretRE.MatchString(c.WebhookSecret):
			bad("webhook_secret", "must be 1-256 characters of A-Z a-z 0-9 _ - (telegram mode is webhook)")
		}
		u, err := url.Parse(c.PublicURL)
		switch {
		case c.PublicURL == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
			bad(FieldPublicURL, "missing required value (telegram mode is webhook): Telegram must reach "+WebhookPath+" over https")
		case u.Scheme != "https":
			bad(FieldPublicURL, "telegram webhooks need an https URL, not %q", c.PublicURL)
		}
	case ModePolling:
	default:
		bad("mode", "%q is neither webhook nor polling", c.Mode)
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if u, err := url.Parse(c.APIURL); err != nil || u.Host == "" || strings.Contains(c.APIURL, "%") {
		bad("api_url", "%q is not an absolute URL", c.APIURL)
	}
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	c.BotUsername = strings.TrimPrefix(c.BotUsername, "@")
	if c.PollTimeout <= 0 {
		c.PollTimeout = 30 * time.Second
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	return c, core.ConfigErrorOf(ErrConfig, probs)
}

// webhookURL is where Telegram is told to POST updates.
func (c Config) webhookURL() string {
	return strings.TrimRight(c.PublicURL, "/") + WebhookPath
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
