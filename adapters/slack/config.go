package slack

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// Modes of receiving events from Slack.
const (
	// ModeHTTP receives events, slash commands and interactions as signed
	// POSTs on /slack/events, /slack/commands and /slack/interactivity.
	ModeHTTP = "http"
	// ModeSocket receives the same payloads over a Socket Mode websocket
	// that opsgate opens, for teams without a public URL.
	ModeSocket = "socket"
)

// DefaultAPIURL is Slack's Web API base; the trailing slash is required by
// slack-go's OptionAPIURL.
const DefaultAPIURL = "https://slack.com/api/"

// Config is the Slack adapter's own configuration; cmd/opsgate maps
// channels.slack onto it. Zero values take Slack's published limits.
type Config struct {
	// BotToken (xoxb-…) authenticates every Web API call.
	BotToken string
	// SigningSecret verifies X-Slack-Signature on the HTTP endpoints and
	// keys the HMAC tag on button payloads. Required in ModeHTTP.
	SigningSecret string
	// Mode is ModeHTTP (default) or ModeSocket.
	Mode string
	// AppToken (xapp-…, scope connections:write) opens Socket Mode.
	// Required in ModeSocket.
	AppToken string
	// APIURL overrides DefaultAPIURL (tests, GovSlack, proxies).
	APIURL string
	// Conversation paces messages per Slack channel; default 1/s burst 3
	// (chat.postMessage allows about one message a second per channel).
	Conversation delivery.Rate
	// Account paces everything the bot sends; default unlimited (Slack's
	// per-method tiers are per workspace and far above one channel's pace).
	Account delivery.Rate
	// MaxBodyBytes caps inbound request bodies; default 1 MiB.
	MaxBodyBytes int64
	// RootPostTimeout bounds the synchronous root-message post a slash
	// command makes before it is recorded; default 2s, so the ack still
	// fits Slack's 3-second deadline.
	RootPostTimeout time.Duration
	// AckBudget bounds everything done before Slack gets its answer to an
	// event, slash command or interaction (the root post, recording, a
	// modal's views.open); default 2.5s, inside Slack's 3-second deadline.
	// Work that can wait (ephemeral notices) is done after the answer.
	AckBudget time.Duration
	// BotUserID is the bot's own user id (U…). Optional: it is read from
	// each event's authorizations, or from auth.test.
	BotUserID string
	// KnownThreads bounds the in-memory set of threads the bot has posted
	// in (for follow-ups without a mention); default 10,000. With
	// Deps.Store it is a cache of the durable record; without it, it is
	// the only record, lost on restart.
	KnownThreads int
}

// Deps are what the adapter needs from the rest of opsgate.
type Deps struct {
	// Sink records inbound events before Slack is acknowledged.
	Sink core.Sink
	// Cards supplies approval cards for modals and eligibility checks.
	Cards core.CardSource
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now; tests pin it to check the signature window.
	Now func() time.Time
	// HTTPClient is used for Web API calls; default a client with a 30s
	// timeout.
	HTTPClient *http.Client
	// Store, optional, answers whether opsgate takes part in a thread
	// from what it recorded there, so follow-ups without a mention are
	// still recognized after a restart and on every replica. cmd passes
	// the server's store. Without it the adapter knows only the threads
	// it saw itself, in memory.
	Store ThreadMemory
}

// ErrConfig marks an invalid configuration, so cmd can report it as such.
var ErrConfig = errors.New("slack: invalid config")

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are the keys under
// channels.slack. `opsgate config check` calls exactly this, so check and
// serve cannot disagree.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and fills in the platform's defaults.
func (c Config) withDefaults() (Config, error) {
	var problems []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		problems = append(problems, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if c.Mode == "" {
		c.Mode = ModeHTTP
	}
	if c.BotToken == "" {
		bad("bot_token", "missing required value (slack is enabled)")
	}
	switch c.Mode {
	case ModeHTTP:
		if c.SigningSecret == "" {
			bad("signing_secret", "missing required value (slack mode is http)")
		}
	case ModeSocket:
		if c.AppToken == "" {
			bad("app_token", "missing required value (slack mode is socket)")
		} else if !strings.HasPrefix(c.AppToken, "xapp-") {
			bad("app_token", "must be an app-level token (xapp-…) in slack mode socket")
		}
	default:
		bad("mode", "%q: want http or socket", c.Mode)
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("api_url", "must be an absolute http(s) URL, not %q", c.APIURL)
	}
	if !strings.HasSuffix(c.APIURL, "/") {
		c.APIURL += "/"
	}
	if c.Conversation == (delivery.Rate{}) {
		c.Conversation = delivery.Rate{Every: time.Second, Burst: 3}
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.RootPostTimeout <= 0 {
		c.RootPostTimeout = 2 * time.Second
	}
	if c.AckBudget <= 0 {
		c.AckBudget = 2500 * time.Millisecond
	}
	if c.KnownThreads <= 0 {
		c.KnownThreads = 10000
	}
	return c, core.ConfigErrorOf(ErrConfig, problems)
}
