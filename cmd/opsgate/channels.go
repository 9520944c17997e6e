package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
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
	"github.com/opsgate/opsgate/adapters/slack"
	"github.com/opsgate/opsgate/adapters/telegram"
	"github.com/opsgate/opsgate/adapters/webhook"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/mcp"
	"github.com/opsgate/opsgate/core/router"
)

// channel is one enabled platform as the composition root sees it: the
// Platform its delivery worker sends through, the inbound handlers to mount
// on the one listener, and an optional long-lived receiver (Socket Mode,
// polling, Gateway, IMAP).
type channel struct {
	platform delivery.Platform
	delivery config.Delivery
	handlers map[string]http.Handler
	receive  func(ctx context.Context) error
	// drain waits for work the adapter started after acknowledging a
	// request (notices, follow-ups), so a shutdown does not cut it off.
	drain func(ctx context.Context)
}

// buildChannels builds every enabled channel from the configuration. This
// is the only place that knows concrete adapters; the core sees them only
// as a Sink caller and a delivery.Platform. st is the server's store, for
// adapters that keep durable state of their own (the email cursor, the
// Slack threads the bot takes part in).
func buildChannels(cfg *config.Config, st core.Store, eng *engine.Engine, log *slog.Logger) ([]channel, error) {
	// The console is always there: /api/v1 is its back end, and API
	// messages are console messages whether or not the web UI is enabled.
	chans := []channel{{platform: console.New(), delivery: cfg.Channels.Console.Delivery}}

	if c := cfg.Channels.Slack; c.Enabled {
		a, err := slack.New(slack.Config{
			BotToken: c.BotToken, SigningSecret: c.SigningSecret, Mode: c.Mode, AppToken: c.AppToken, APIURL: c.APIURL,
		}, slack.Deps{Sink: eng, Cards: eng, Store: st, Logger: log.With("channel", "slack")})
		if err != nil {
			return nil, fmt.Errorf("channels.slack: %w", err)
		}
		chans = append(chans, channel{platform: a, delivery: c.Delivery, handlers: a.Handlers(), receive: a.Run,
			drain: func(ctx context.Context) { _ = a.Drain(ctx) }})
	}
	if c := cfg.Channels.Telegram; c.Enabled {
		a, err := telegram.New(telegram.Config{
			BotToken: c.BotToken, Mode: c.Mode, WebhookSecret: c.WebhookSecret, PublicURL: cfg.Server.PublicURL,
			BotUsername: c.BotUsername, APIURL: c.APIURL,
		}, telegram.Deps{Sink: eng, Cards: eng, Logger: log.With("channel", "telegram")})
		if err != nil {
			return nil, fmt.Errorf("channels.telegram: %w", err)
		}
		ch := channel{platform: a, delivery: c.Delivery, receive: a.Run}
		if c.Mode != telegram.ModePolling {
			ch.handlers = map[string]http.Handler{"POST " + telegram.WebhookPath: a.WebhookHandler()}
		}
		chans = append(chans, ch)
	}
	if c := cfg.Channels.Discord; c.Enabled {
		flows, err := discordFlows(cfg.Flows)
		if err != nil {
			return nil, err
		}
		a, err := discord.New(discord.Config{
			BotToken: c.BotToken, ApplicationID: c.ApplicationID, PublicKey: c.PublicKey, APIURL: c.APIURL,
			GuildID: c.GuildID, Gateway: c.Gateway, MessageContent: c.MessageContent, Flows: flows,
		}, discord.Deps{Sink: eng, Cards: eng, Logger: log.With("channel", "discord")})
		if err != nil {
			return nil, fmt.Errorf("channels.discord: %w", err)
		}
		chans = append(chans, channel{platform: a, delivery: c.Delivery, receive: a.Run,
			handlers: map[string]http.Handler{"POST " + discord.InteractionsPath: a.InteractionsHandler()},
			drain:    func(context.Context) { a.Wait() }})
	}
	if c := cfg.Channels.Email; c.Enabled {
		a, err := email.New(email.Config{
			Address: c.Address, Name: c.Name, TokenKey: c.TokenKey,
			IMAP: email.IMAPConfig{Addr: c.IMAP.Addr, TLS: c.IMAP.TLS, StartTLS: c.IMAP.StartTLS,
				Username: c.IMAP.Username, Password: c.IMAP.Password, Mailbox: c.IMAP.Mailbox},
			SMTP: email.SMTPConfig{Addr: c.SMTP.Addr, TLS: c.SMTP.TLS, StartTLS: c.SMTP.StartTLS,
				Username: c.SMTP.Username, Password: c.SMTP.Password},
			RequireDMARC: c.RequireDMARC, AuthservID: c.AuthservID,
			Backfill: c.Backfill.D(), IdleRestart: c.IdleRestart.D(), PollInterval: c.PollInterval.D(),
		}, email.Deps{Sink: eng, Cards: eng, Store: st, Logger: log.With("channel", "email")})
		if err != nil {
			return nil, fmt.Errorf("channels.email: %w", err)
		}
		chans = append(chans, channel{platform: a, delivery: c.Delivery, receive: a.Run})
	}
	if len(cfg.Channels.Webhooks) > 0 {
		hooks := make([]webhook.Hook, 0, len(cfg.Channels.Webhooks))
		for _, h := range cfg.Channels.Webhooks {
			hooks = append(hooks, webhook.Hook{Name: h.Name, Secret: h.Secret, Text: h.Text, Thread: h.Thread})
		}
		a, err := webhook.New(webhook.Config{Hooks: hooks}, webhook.Deps{Sink: eng, Logger: log.With("channel", "webhook")})
		if err != nil {
			return nil, fmt.Errorf("channels.webhooks: %w", err)
		}
		chans = append(chans, channel{platform: a, handlers: map[string]http.Handler{webhook.PathPrefix: a.Handler()}})
	}
	return chans, nil
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
	o := mcp.Options{Engine: eng, Store: st, Tokens: mt, Flows: flows, Version: version,
		PublicURL: cfg.Server.PublicURL, AllowedOrigins: cfg.MCP.AllowedOrigins, InternalOrigins: cfg.MCP.InternalOrigins,
		StateKey: mcpStateKey(key), Logger: log.With("component", "mcp")}
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

// discordFlows offers every flow as a top-level Discord command with one
// option per placeholder of its command pattern (`/deploy service:api`).
func discordFlows(flows []config.Flow) ([]discord.FlowCommand, error) {
	out := make([]discord.FlowCommand, 0, len(flows))
	for _, f := range flows {
		p, err := router.ParsePattern(f.Command)
		if err != nil {
			return nil, fmt.Errorf("flows[%s].command: %w", f.Name, err)
		}
		fc := discord.FlowCommand{Name: f.Name, Description: f.Description, Literals: p.Literals()}
		for _, ph := range p.Placeholders() {
			fc.Options = append(fc.Options, discord.FlowOption{Name: ph.Name, Default: ph.Default, Optional: ph.Optional})
		}
		out = append(out, fc)
	}
	return out, nil
}

// buildConsole builds the web console, served at the site root: it signs
// people in with the same API tokens and acts through the same engine.
func buildConsole(cfg *config.Config, eng *engine.Engine, st store, tokens []api.Token, log *slog.Logger) (http.Handler, error) {
	webTokens := make([]web.Token, 0, len(tokens))
	for _, t := range tokens {
		webTokens = append(webTokens, web.Token{Name: t.Name, Token: t.Token, Actor: t.Actor, Scopes: t.Scopes})
	}
	h, err := web.New(web.Options{Engine: eng, Store: st, Tokens: webTokens, Channels: enabledChannels(cfg),
		PublicURL: strings.TrimRight(cfg.Server.PublicURL, "/"), Logger: log.With("component", "console")})
	if err != nil {
		return nil, fmt.Errorf("build console: %w", err)
	}
	return h, nil
}

// mountChannels registers every channel's inbound handlers on mux.
func mountChannels(mux *http.ServeMux, chans []channel) {
	for _, ch := range chans {
		for pattern, h := range ch.handlers {
			mux.Handle(pattern, h)
		}
	}
}

// channelSet is what startChannels started; Wait blocks until every
// receiver and delivery worker stopped after the context ends.
type channelSet struct {
	wg     sync.WaitGroup
	drains []func(ctx context.Context)
}

// Wait waits for every worker to stop, then for each adapter's work in
// flight, at most drainBound.
func (c *channelSet) Wait() {
	c.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), drainBound)
	defer cancel()
	for _, d := range c.drains {
		d(ctx)
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
		w, err := delivery.New(delivery.Options{
			Store: st, Cards: cards, Platform: plat, Owner: owner + "/" + name,
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
