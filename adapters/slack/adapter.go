// Package slack connects opsgate to Slack: slash commands, mentions and
// thread replies in, Block Kit approval cards and mrkdwn replies out, over
// the Events API (signed HTTP POSTs) or Socket Mode.
//
// Every inbound payload is verified and normalized into a core.ChannelEvent
// and recorded through core.Sink before Slack gets its ack. Outbound, the
// adapter is a delivery.Platform: the pipeline hands it rendered, chunked
// and paced messages, and it maps Slack's 429s to core.RateLimitError.
package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	slackapi "github.com/slack-go/slack"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// channelName is the channel in thread addresses and actor ids.
const channelName = "slack"

// Adapter is one Slack app installation. It is safe for concurrent use.
type Adapter struct {
	cfg   Config
	sink  core.Sink
	cards core.CardSource
	log   *slog.Logger
	now   func() time.Time
	api   *slackapi.Client
	// hc downloads files (url_private with the bot token).
	hc     *http.Client
	verify *verifier
	sign   signer
	// threads remembers where the bot has posted, so follow-ups in those
	// threads count as addressed to it.
	threads *threadSet
	// memory, when set, keeps the same record durably and shared by
	// replicas; threads is then its cache.
	memory ThreadMemory

	// bg tracks work that outlives the request it came from: ephemerals
	// sent after the ack and Socket Mode envelopes, so Drain can wait.
	bg tracker

	botMu     sync.Mutex
	botUserID string
	botTried  time.Time // last auth.test attempt, to not retry on every event
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.HTTPReceiver = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
	_ core.Drainer      = (*Adapter)(nil)
)

// New builds the adapter; it returns an error (wrapping ErrConfig) on a bad
// configuration and makes no network call.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil {
		return nil, fmt.Errorf("%w: Deps.Sink and Deps.Cards are required", ErrConfig)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.HTTPClient == nil {
		deps.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	opts := []slackapi.Option{
		slackapi.OptionAPIURL(cfg.APIURL),
		slackapi.OptionHTTPClient(deps.HTTPClient),
	}
	if cfg.AppToken != "" {
		opts = append(opts, slackapi.OptionAppLevelToken(cfg.AppToken))
	}
	// The SDK's retries stay off (its default): a 429 must reach the
	// delivery pipeline, which pauses the bucket and retries no earlier.
	secret := cfg.SigningSecret
	if secret == "" {
		secret = cfg.BotToken
	}
	return &Adapter{
		cfg:       cfg,
		sink:      deps.Sink,
		cards:     deps.Cards,
		log:       deps.Logger.With("channel", channelName),
		now:       deps.Now,
		api:       slackapi.New(cfg.BotToken, opts...),
		hc:        deps.HTTPClient,
		verify:    newVerifier(cfg.SigningSecret, deps.Now),
		sign:      newSigner(secret),
		threads:   newThreadSet(cfg.KnownThreads),
		memory:    deps.Store,
		botUserID: cfg.BotUserID,
	}, nil
}

// Drain waits until the adapter's background work — messages sent after
// an ack, Socket Mode envelopes being handled — has finished, or ctx ends.
// cmd calls it on shutdown (after the HTTP server and Run have stopped),
// so nothing started is cut off; every such piece of work is bounded, so
// Drain returns within that bound.
func (a *Adapter) Drain(ctx context.Context) error {
	if err := a.bg.wait(ctx); err != nil {
		return fmt.Errorf("slack: drain: %w", err)
	}
	return nil
}

// tracker counts running background goroutines. Unlike sync.WaitGroup it
// may be waited on while new work still starts (a request arriving during
// shutdown), which WaitGroup forbids once its count has reached zero.
type tracker struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n == 0
}

// Go runs fn in a goroutine that wait waits for.
func (t *tracker) Go(fn func()) {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
	go func() {
		defer t.done()
		fn()
	}()
}

func (t *tracker) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n--
	if t.n == 0 {
		close(t.idle)
		t.idle = nil
	}
}

// wait returns when no goroutine started by Go is running, or ctx ends.
func (t *tracker) wait(ctx context.Context) error {
	t.mu.Lock()
	idle := t.idle
	t.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Channel names the adapter in thread addresses and actor ids.
func (a *Adapter) Channel() string { return channelName }

// Routes implements core.HTTPReceiver: the Slack paths of
// docs/architecture.md, mounted on the one listener in either mode.
func (a *Adapter) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST /slack/events":        a.Events(),
		"POST /slack/commands":      a.Commands(),
		"POST /slack/interactivity": a.Interactivity(),
	}
}

// botUser returns the bot's own user id: configured, learned from an
// event's authorizations, or asked from auth.test once.
func (a *Adapter) botUser(ctx context.Context, env *eventEnvelope) string {
	a.botMu.Lock()
	defer a.botMu.Unlock()
	if a.botUserID != "" {
		return a.botUserID
	}
	if env != nil {
		for _, au := range env.Authorizations {
			if au.IsBot && au.UserID != "" {
				a.botUserID = au.UserID
				return a.botUserID
			}
		}
	}
	now := a.now()
	if now.Sub(a.botTried) < time.Minute {
		return ""
	}
	a.botTried = now
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := a.api.AuthTestContext(ctx)
	if err != nil {
		a.log.WarnContext(ctx, "slack: auth.test failed; bot messages are recognized by bot_id only", "err", err)
		return ""
	}
	a.botUserID = res.UserID
	return a.botUserID
}
