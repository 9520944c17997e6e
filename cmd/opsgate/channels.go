package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/adapters/console"
	"github.com/opsgate/opsgate/adapters/console/web"
	"github.com/opsgate/opsgate/adapters/discord"
	"github.com/opsgate/opsgate/adapters/email"
	"github.com/opsgate/opsgate/adapters/local"
	"github.com/opsgate/opsgate/adapters/matrix"
	"github.com/opsgate/opsgate/adapters/signal"
	"github.com/opsgate/opsgate/adapters/slack"
	"github.com/opsgate/opsgate/adapters/telegram"
	"github.com/opsgate/opsgate/adapters/webhook"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/mcp"
)

// channel is one enabled platform as the composition root sees it: the
// Platform its delivery worker sends through, and what its adapter offers
// of the optional lifecycle (core.HTTPReceiver, core.Runner, core.Drainer),
// discovered on the adapter itself.
type channel struct {
	platform delivery.Platform
	delivery config.Delivery
	handlers map[string]http.Handler
	receive  func(ctx context.Context) error
	// drain waits for work the adapter started after acknowledging a
	// request (notices, follow-ups), so a shutdown does not cut it off.
	drain func(ctx context.Context) error
}

// newChannel wraps an adapter, discovering its optional interfaces.
func newChannel(p delivery.Platform, d config.Delivery) channel {
	ch := channel{platform: p, delivery: d}
	if r, ok := p.(core.HTTPReceiver); ok {
		ch.handlers = r.Routes()
	}
	if r, ok := p.(core.Runner); ok {
		ch.receive = r.Run
	}
	if r, ok := p.(core.Drainer); ok {
		ch.drain = r.Drain
	}
	return ch
}

// channelDeps are what every adapter may take from the server: the engine
// (as its Sink and CardSource), the store (for adapters with durable state
// of their own: the email cursor, the Slack threads the bot takes part
// in), and the logger.
type channelDeps struct {
	eng *engine.Engine
	st  core.Store
	log *slog.Logger
	// tokens are the API's tokens, for channels whose clients
	// authenticate with one (local).
	tokens *api.TokenSet
	poll   time.Duration
}

// channelSpec is one platform the binary knows: its channel name, whether
// its section is enabled, and how to build its adapter from that section
// (through config's mapping, the value config check validated).
type channelSpec struct {
	name    string
	enabled func(cfg *config.Config) bool
	build   func(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error)
}

// channelSpecs is every platform the binary knows, in start order (the
// console, always on, comes first and is not listed). Adding a channel is
// one entry here (docs/architecture.md, "Add a channel"); its lifecycle is
// discovered, not wired.
var channelSpecs = []channelSpec{
	{"slack", func(c *config.Config) bool { return c.Channels.Slack.Enabled }, buildSlack},
	{"telegram", func(c *config.Config) bool { return c.Channels.Telegram.Enabled }, buildTelegram},
	{"discord", func(c *config.Config) bool { return c.Channels.Discord.Enabled }, buildDiscord},
	{"email", func(c *config.Config) bool { return c.Channels.Email.Enabled }, buildEmail},
	{"matrix", func(c *config.Config) bool { return c.Channels.Matrix.Enabled }, buildMatrix},
	{"signal", func(c *config.Config) bool { return c.Channels.Signal.Enabled }, buildSignal},
	{"webhook", func(c *config.Config) bool { return len(c.Channels.Webhooks) > 0 }, buildWebhooks},
	{"local", func(c *config.Config) bool { return c.Channels.Local.Enabled }, buildLocal},
}

// buildChannels builds every enabled channel from the configuration. This
// file is the only place that knows concrete adapters; the core sees them
// only as a Sink caller and a delivery.Platform.
func buildChannels(cfg *config.Config, st core.Store, eng *engine.Engine, tokens []api.Token, log *slog.Logger) ([]channel, error) {
	// The console is always there: /api/v1 is its back end, and API
	// messages are console messages whether or not the web UI is enabled.
	chans := []channel{newChannel(console.New(), cfg.Channels.Console.Delivery)}
	ts, err := api.NewTokenSet(tokens)
	if err != nil {
		return nil, fmt.Errorf("channels: %w", err)
	}
	d := channelDeps{eng: eng, st: st, log: log, tokens: ts, poll: cfg.Engine.PollInterval.D()}
	for _, spec := range channelSpecs {
		if !spec.enabled(cfg) {
			continue
		}
		p, del, err := spec.build(cfg, d)
		if err != nil {
			return nil, err
		}
		chans = append(chans, newChannel(p, del))
	}
	return chans, nil
}

func buildSlack(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Slack
	a, err := slack.New(cfg.SlackConfig(), slack.Deps{Sink: d.eng, Cards: d.eng, Store: d.st, Logger: d.log.With("channel", "slack")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.slack: %w", err)
	}
	return a, c.Delivery, nil
}

func buildTelegram(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Telegram
	a, err := telegram.New(cfg.TelegramConfig(), telegram.Deps{Sink: d.eng, Cards: d.eng, Logger: d.log.With("channel", "telegram")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.telegram: %w", err)
	}
	return a, c.Delivery, nil
}

func buildDiscord(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Discord
	a, err := discord.New(cfg.DiscordConfig(), discord.Deps{Sink: d.eng, Cards: d.eng, Logger: d.log.With("channel", "discord")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.discord: %w", err)
	}
	return a, c.Delivery, nil
}

func buildEmail(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Email
	a, err := email.New(cfg.EmailConfig(), email.Deps{Sink: d.eng, Cards: d.eng, Store: d.st, Logger: d.log.With("channel", "email")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.email: %w", err)
	}
	return a, c.Delivery, nil
}

func buildMatrix(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Matrix
	a, err := matrix.New(cfg.MatrixConfig(), matrix.Deps{Sink: d.eng, Cards: d.eng, Store: d.st, Logger: d.log.With("channel", "matrix")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.matrix: %w", err)
	}
	return a, c.Delivery, nil
}

func buildSignal(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Signal
	a, err := signal.New(cfg.SignalConfig(), signal.Deps{Sink: d.eng, Cards: d.eng, Store: d.st, Logger: d.log.With("channel", "signal")})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.signal: %w", err)
	}
	return a, c.Delivery, nil
}

// buildWebhooks builds the webhook channel (enabled by listing a hook).
func buildWebhooks(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	a, err := webhook.New(cfg.WebhookConfig(), webhook.Deps{Sink: d.eng, Logger: d.log.With("channel", "webhook")})
	if err != nil {
		return nil, config.Delivery{}, fmt.Errorf("channels.webhooks: %w", err)
	}
	return a, config.Delivery{}, nil
}

// buildLocal builds the local channel (`opsgate chat`): its clients use
// the API's tokens.
func buildLocal(cfg *config.Config, d channelDeps) (delivery.Platform, config.Delivery, error) {
	c := cfg.Channels.Local
	a, err := local.New(cfg.LocalConfig(), local.Deps{Sink: d.eng, Cards: d.eng, Store: d.st, Auth: d.tokens, Authority: d.eng.Authority(),
		Logger: d.log.With("channel", "local"), PollInterval: d.poll})
	if err != nil {
		return nil, c.Delivery, fmt.Errorf("channels.local: %w", err)
	}
	return a, c.Delivery, nil
}

// buildMCP builds opsgate's MCP endpoints: the API's tokens (plus the
// internal ones, which only the internal endpoints take), the engine and
// the flows. The state key (request states, owner tokens) is derived from
// the audit key, which every replica shares.
func buildMCP(cfg *config.Config, eng *engine.Engine, st store, tokens []api.Token, key []byte, log *slog.Logger) (*mcp.Server, error) {
	mt := make([]mcp.Token, 0, len(tokens))
	for _, t := range tokens {
		mt = append(mt, mcp.Token{Name: t.Name, Token: t.Token, Actor: t.Actor, Scopes: t.Scopes})
	}
	for _, t := range internalTokens(cfg) {
		mt = append(mt, mcp.Token{Name: t.Name, Token: t.Token, Actor: t.Actor, Scopes: t.Scopes, Internal: true})
	}
	flows := make([]mcp.Flow, 0, len(cfg.Flows))
	for _, f := range cfg.Flows {
		mf := mcp.Flow{Name: f.Name, Description: f.Description, Command: f.Command}
		for _, s := range f.Steps {
			mf.Stages = append(mf.Stages, s.Stage())
		}
		flows = append(flows, mf)
	}
	o := mcp.Options{Engine: eng, Store: st, Authority: eng.Authority(), Tokens: mt, Flows: flows, Version: version,
		PublicURL: cfg.Server.PublicURL, AllowedOrigins: cfg.MCP.AllowedOrigins, InternalOrigins: cfg.MCP.InternalOrigins,
		StateKey: mcpStateKey(key), Logger: log.With("component", "mcp"), Questions: mcpQuestions{eng}}
	if a := cfg.MCP.OAuth; a != nil {
		o.OAuth = &mcp.OAuth{AuthorizationServers: a.AuthorizationServers, ScopesSupported: a.ScopesSupported}
	}
	h, err := mcp.New(o)
	if err != nil {
		return nil, fmt.Errorf("build MCP server: %w", err)
	}
	return h, nil
}

// mcpStateKey derives the MCP state key from the audit key (never the key
// itself, so neither can stand in for the other).
func mcpStateKey(auditKey []byte) []byte {
	m := hmac.New(sha256.New, auditKey)
	m.Write([]byte("opsgate mcp state key v1"))
	return m.Sum(nil)
}

// buildConsole builds the web console, served at the site root: it signs
// people in with the same API tokens and acts through the same engine.
func buildConsole(cfg *config.Config, eng *engine.Engine, st store, sched web.Schedules, tokens []api.Token, people web.People, log *slog.Logger) (http.Handler, error) {
	webTokens := make([]web.Token, 0, len(tokens))
	for _, t := range tokens {
		webTokens = append(webTokens, web.Token{Name: t.Name, Token: t.Token, Actor: t.Actor, Scopes: t.Scopes})
	}
	idp, err := buildOIDC(cfg)
	if err != nil {
		return nil, err
	}
	h, err := web.New(web.Options{Engine: eng, Store: st, Authority: eng.Authority(), Tokens: webTokens, Channels: enabledChannels(cfg), Schedules: sched,
		PublicURL: strings.TrimRight(cfg.Server.PublicURL, "/"), Logger: log.With("component", "console"),
		OIDC: idp, People: people, NoTokenLogin: !cfg.Channels.Console.TokenLogin})
	if err != nil {
		return nil, fmt.Errorf("build console: %w", err)
	}
	return h, nil
}

// channelSet is what startChannels started; Wait blocks until every
// receiver and delivery worker stopped after the context ends.
type channelSet struct {
	wg     sync.WaitGroup
	drains []func(ctx context.Context) error
}

// Wait waits for every worker to stop, then for each adapter's work in
// flight, at most drainBound.
func (c *channelSet) Wait() {
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), drainBound)
	defer cancel()
	for _, d := range c.drains {
		_ = d(ctx) // bounded by ctx; a timeout only means shutdown stops waiting
	}
}

// drainBound caps how long shutdown waits for adapters' post-ack work;
// every such piece of work is bounded well below it.
const drainBound = 15 * time.Second

// startChannels starts, per channel, its receiver (if any) and the delivery
// worker that drains its outbox, with the operator's rate_limits applied
// over the platform's defaults. Everything runs until ctx ends.
func startChannels(ctx context.Context, chans []channel, st core.Store, cards core.CardSource, owner string, reg prometheus.Registerer, log *slog.Logger) (*channelSet, error) {
	cs := &channelSet{}
	for _, ch := range chans {
		name := ch.platform.Channel()
		plat := delivery.WithPacing(ch.platform, overridePacing(ch.platform.Pacing(), ch.delivery.RateLimits))
		qs, _ := cards.(core.QuestionSource) // the engine: questions get buttons where the platform can
		w, err := delivery.New(delivery.Options{
			Store: st, Cards: cards, Questions: qs, Platform: plat, Owner: owner + "/" + name,
			MaxAttempts: ch.delivery.MaxAttempts, Subscribe: st.Subscribe, Registerer: reg,
			Logger: log.With("component", "delivery", "channel", name),
		})
		if err != nil {
			return nil, fmt.Errorf("delivery for %s: %w", name, err)
		}
		cs.wg.Add(1)
		go func() {
			defer cs.wg.Done()
			if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("delivery worker stopped", "channel", name, "err", err)
			}
		}()
		if ch.drain != nil {
			cs.drains = append(cs.drains, ch.drain)
		}
		if ch.receive != nil {
			cs.wg.Add(1)
			go func() {
				defer cs.wg.Done()
				if err := ch.receive(ctx); err != nil && !errors.Is(err, context.Canceled) {
					log.Error("receiver stopped", "channel", name, "err", err)
				}
			}()
		}
	}
	return cs, nil
}

// overridePacing applies a channel's configured rate_limits over the
// platform's published defaults; unset scopes keep the default. Global is
// the account bucket in delivery's terms (everything one bot sends).
func overridePacing(p delivery.Pacing, rl config.RateLimits) delivery.Pacing {
	rate := func(l config.RateLimit) *delivery.Rate {
		if l.IsZero() {
			return nil
		}
		return &delivery.Rate{Every: l.Rate.Interval(), Burst: l.EffectiveBurst()}
	}
	account := rate(rl.Account)
	if account == nil {
		account = rate(rl.Global)
	}
	return delivery.OverridePacing(p, rate(rl.Conversation), rate(rl.Group), account)
}

// mcpQuestions serves the ask_user questions of agent runs to core/mcp.
type mcpQuestions struct{ eng *engine.Engine }

func (q mcpQuestions) PendingQuestions(ctx context.Context, runID string) ([]mcp.Question, error) {
	ps, err := q.eng.PendingQuestions(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := make([]mcp.Question, 0, len(ps))
	for _, p := range ps {
		raw, err := json.Marshal(p.Ask)
		if err != nil {
			return nil, err
		}
		out = append(out, mcp.Question{ID: p.ActionID, RunID: p.RunID, Questions: raw, ExpiresAt: p.ExpiresAt})
	}
	return out, nil
}

func (q mcpQuestions) Answer(ctx context.Context, actor core.Actor, channel, runID, actionID string, answer json.RawMessage) error {
	return q.eng.Answer(ctx, actor, channel, runID, actionID, answer)
}
