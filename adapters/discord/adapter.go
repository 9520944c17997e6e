package discord

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	discordapi "github.com/bwmarrin/discordgo"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/approvalref"
	"github.com/opsgate/opsgate/core/delivery"
)

// ChannelName is the channel in thread addresses and actor ids.
const ChannelName = "discord"

// Adapter is one Discord application: the delivery.Platform for its outbox,
// the interactions handler, and the Run loop that registers commands and
// (optionally) reads the Gateway.
type Adapter struct {
	cfg   Config
	pub   ed25519.PublicKey
	sink  core.Sink
	cards core.CardSource
	log   *slog.Logger
	now   func() time.Time
	api   *discordapi.Session
	rt    *rateTransport
	// cdn downloads attachments (signed CDN URLs; no bot token).
	cdn     *http.Client
	buttons *approvalref.Codec // signs custom_ids
	seen    *recentIDs

	wg sync.WaitGroup // follow-ups running after an ack

	mu    sync.Mutex
	botID string // learned from READY; mentions of it address the bot
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.HTTPReceiver = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
	_ core.Drainer      = (*Adapter)(nil)
)

// New builds an adapter. It validates cfg (errors wrap ErrConfig) and makes
// no network call: command registration and the Gateway happen in Run.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, pub, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil {
		return nil, fmt.Errorf("%w: Deps.Sink and Deps.Cards are required", ErrConfig)
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("channel", ChannelName)
	for _, why := range cfg.skipped {
		log.Warn("flow not registered as a slash command; it still runs through /"+cfg.Command, "flow", why)
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	var next http.RoundTripper
	timeout := 15 * time.Second
	if deps.HTTPClient != nil {
		next = deps.HTTPClient.Transport
		if deps.HTTPClient.Timeout > 0 {
			timeout = deps.HTTPClient.Timeout
		}
	}
	rt, err := newRateTransport(next, cfg.APIURL)
	if err != nil {
		return nil, fmt.Errorf("%w: api_url: %v", ErrConfig, err)
	}
	s, err := discordapi.New("Bot " + cfg.BotToken)
	if err != nil {
		return nil, fmt.Errorf("discord: session: %w", err)
	}
	buttons, err := newButtons(cfg.BotToken)
	if err != nil {
		return nil, fmt.Errorf("discord: %w", err)
	}
	s.Client = &http.Client{Transport: rt, Timeout: timeout}
	// The delivery pipeline owns retries: a 429 must reach it (never a
	// silent sleep in the library) and a 502 is retried with its backoff.
	s.ShouldRetryOnRateLimit = false
	s.MaxRestRetries = 0
	s.StateEnabled = false
	s.LogLevel = discordapi.LogError
	s.Identify.Intents = intents(cfg)
	return &Adapter{
		cfg: cfg, pub: pub, sink: deps.Sink, cards: deps.Cards, log: log, now: now,
		api: s, rt: rt, buttons: buttons, seen: newRecentIDs(4096, 15*time.Minute),
		cdn: &http.Client{Transport: rt.next, Timeout: time.Minute},
	}, nil
}

// Channel implements core.Adapter.
func (a *Adapter) Channel() string { return ChannelName }

// Drain implements core.Drainer: it waits until the follow-ups started
// after acknowledging interactions are done, or ctx ends.
func (a *Adapter) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("discord: drain: %w", ctx.Err())
	}
}

// Routes implements core.HTTPReceiver: interactions arrive over HTTP in
// every mode.
func (a *Adapter) Routes() map[string]http.Handler {
	return map[string]http.Handler{"POST " + InteractionsPath: a.InteractionsHandler()}
}

// intents asks for the least the Gateway reader needs: guild and DM
// messages (content of mentions and DMs arrives without MESSAGE_CONTENT),
// plus MESSAGE_CONTENT only when configured.
func intents(cfg Config) discordapi.Intent {
	i := discordapi.IntentsGuildMessages | discordapi.IntentsDirectMessages
	if cfg.MessageContent {
		i |= discordapi.IntentMessageContent
	}
	return i
}

// recentIDs remembers ids seen lately (interaction and message ids), so a
// redelivered request does not post a second root message before the
// store's dedup recognises it. The store remains the authority.
type recentIDs struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	at    map[string]time.Time
	order []string
}

func newRecentIDs(max int, ttl time.Duration) *recentIDs {
	return &recentIDs{max: max, ttl: ttl, at: map[string]time.Time{}}
}

// add records id and reports whether it was new.
func (r *recentIDs) add(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.at[id]; ok && now.Sub(t) < r.ttl {
		return false
	}
	r.at[id] = now
	r.order = append(r.order, id)
	for len(r.order) > r.max {
		delete(r.at, r.order[0])
		r.order = r.order[1:]
	}
	return true
}

// forget drops id, so a request that failed before being recorded can be
// tried again.
func (r *recentIDs) forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.at, id)
}
