package telegram

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
	"github.com/opsgate/opsgate/core/delivery"
)

// ChannelName is the channel in thread addresses and actor ids.
const ChannelName = "telegram"

// Adapter is one Telegram bot: the delivery.Platform for its outbox, the
// webhook handler, and the Run loop that registers the webhook or polls.
type Adapter struct {
	cfg     Config
	sink    core.Sink
	cards   core.CardSource
	log     *slog.Logger
	now     func() time.Time
	api     *botAPI
	buttons *approvalref.Codec // signs button payloads and prompt references
	botID   int64              // the bot's own user id: the token's numeric prefix

	mu       sync.Mutex
	username string // learned from getMe when not configured
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.HTTPReceiver = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
)

// New builds an adapter. It validates cfg (errors wrap ErrConfig) and makes
// no network call: getMe, setWebhook and deleteWebhook happen in Run.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil {
		return nil, fmt.Errorf("%w: Deps.Sink and Deps.Cards are required", ErrConfig)
	}
	m := tokenRE.FindStringSubmatch(cfg.BotToken)
	botID, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: bot_token: bot id: %v", ErrConfig, err)
	}
	buttons, err := newButtons(cfg.BotToken)
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	s := scrubber{token: cfg.BotToken}
	base := deps.Logger
	if base == nil {
		base = slog.Default()
	}
	log := slog.New(scrubHandler{next: base.Handler(), s: s}).With("channel", ChannelName)
	hc := deps.HTTPClient
	if hc == nil {
		// Longer than the long poll, so a healthy getUpdates is never cut.
		hc = &http.Client{Timeout: cfg.PollTimeout + 30*time.Second}
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	return &Adapter{
		cfg: cfg, sink: deps.Sink, cards: deps.Cards, log: log, now: now,
		api: newBotAPI(cfg, hc), buttons: buttons, botID: botID,
		username: cfg.BotUsername,
	}, nil
}

// Channel implements core.Adapter.
func (a *Adapter) Channel() string { return ChannelName }

// botUsername returns the bot's username, asking getMe once if the config
// did not name it: "/cmd@name" cannot be told apart from another bot's
// command without it.
func (a *Adapter) botUsername(ctx context.Context) (string, error) {
	a.mu.Lock()
	u := a.username
	a.mu.Unlock()
	if u != "" {
		return u, nil
	}
	var me tgUser
	if err := a.api.call(ctx, "getMe", nil, &me); err != nil {
		return "", err
	}
	if me.Username == "" {
		return "", fmt.Errorf("telegram: getMe: bot has no username")
	}
	a.mu.Lock()
	a.username = me.Username
	a.mu.Unlock()
	return me.Username, nil
}
