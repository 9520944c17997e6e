package config

import (
	"errors"
	"slices"

	"github.com/opsgate/opsgate/adapters/discord"
	"github.com/opsgate/opsgate/adapters/email"
	"github.com/opsgate/opsgate/adapters/local"
	"github.com/opsgate/opsgate/adapters/matrix"
	"github.com/opsgate/opsgate/adapters/signal"
	"github.com/opsgate/opsgate/adapters/slack"
	"github.com/opsgate/opsgate/adapters/telegram"
	"github.com/opsgate/opsgate/adapters/webhook"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/router"
)

// One source of truth for channel settings: each method below maps one
// channels.<name> section onto its adapter's own Config, once. `opsgate
// config check` (Parse) validates exactly that value with the adapter's
// Validate, and cmd/opsgate builds the adapter from the same value, so
// check and serve can never disagree about a channel.
//
// The arrow points config → adapters → core: no adapter imports config,
// and core never imports either (core/imports_test.go).

// SlackConfig is channels.slack as adapters/slack takes it.
func (c *Config) SlackConfig() slack.Config {
	s := c.Channels.Slack
	return slack.Config{BotToken: s.BotToken, SigningSecret: s.SigningSecret, Mode: s.Mode, AppToken: s.AppToken, APIURL: s.APIURL}
}

// TelegramConfig is channels.telegram (and server.public_url) as
// adapters/telegram takes it.
func (c *Config) TelegramConfig() telegram.Config {
	t := c.Channels.Telegram
	return telegram.Config{BotToken: t.BotToken, Mode: t.Mode, WebhookSecret: t.WebhookSecret,
		PublicURL: c.Server.PublicURL, BotUsername: t.BotUsername, APIURL: t.APIURL}
}

// DiscordConfig is channels.discord as adapters/discord takes it, with every
// flow offered as a top-level command with one option per placeholder of its
// command pattern (`/deploy service:api`). A flow whose pattern does not
// parse is left out; Parse reports it.
func (c *Config) DiscordConfig() discord.Config {
	d := c.Channels.Discord
	out := discord.Config{BotToken: d.BotToken, ApplicationID: d.ApplicationID, PublicKey: d.PublicKey, APIURL: d.APIURL,
		GuildID: d.GuildID, Gateway: d.Gateway, MessageContent: d.MessageContent}
	for _, f := range c.Flows {
		p, err := router.ParsePattern(f.Command)
		if err != nil {
			continue
		}
		fc := discord.FlowCommand{Name: f.Name, Description: f.Description, Literals: p.Literals()}
		for _, ph := range p.Placeholders() {
			fc.Options = append(fc.Options, discord.FlowOption{Name: ph.Name, Default: ph.Default, Optional: ph.Optional})
		}
		out.Flows = append(out.Flows, fc)
	}
	return out
}

// EmailConfig is channels.email as adapters/email takes it.
func (c *Config) EmailConfig() email.Config {
	e := c.Channels.Email
	return email.Config{
		Address: e.Address, Name: e.Name, TokenKey: e.TokenKey,
		IMAP: email.IMAPConfig{Addr: e.IMAP.Addr, TLS: e.IMAP.TLS, StartTLS: e.IMAP.StartTLS,
			Username: e.IMAP.Username, Password: e.IMAP.Password, Mailbox: e.IMAP.Mailbox},
		SMTP: email.SMTPConfig{Addr: e.SMTP.Addr, TLS: e.SMTP.TLS, StartTLS: e.SMTP.StartTLS,
			Username: e.SMTP.Username, Password: e.SMTP.Password},
		RequireDMARC: e.RequireDMARC, AuthservID: e.AuthservID,
		Backfill: e.Backfill.D(), IdleRestart: e.IdleRestart.D(), PollInterval: e.PollInterval.D(),
	}
}

// LocalConfig is channels.local as adapters/local takes it.
func (c *Config) LocalConfig() local.Config { return local.Config{} }

// MatrixConfig is channels.matrix as adapters/matrix takes it.
func (c *Config) MatrixConfig() matrix.Config {
	m := c.Channels.Matrix
	return matrix.Config{HomeserverURL: m.HomeserverURL, UserID: m.UserID, AccessToken: m.AccessToken,
		Rooms: m.Rooms, DirectMessages: m.DirectMessages, Threads: m.Threads, PollTimeout: m.PollTimeout.D()}
}

// SignalConfig is channels.signal as adapters/signal takes it.
func (c *Config) SignalConfig() signal.Config {
	s := c.Channels.Signal
	return signal.Config{DaemonURL: s.DaemonURL, Account: s.Account, Groups: s.Groups}
}

// ChatRequesters is channels.<name>.requesters of every channel whose
// senders are people (everything but webhooks), by channel name: the one
// list config check, identity normalization and cmd/opsgate's gate read,
// so a new channel is gated by adding it here.
func (ch *Channels) ChatRequesters() map[string]Requesters {
	return map[string]Requesters{
		"console": ch.Console.Requesters, "slack": ch.Slack.Requesters, "telegram": ch.Telegram.Requesters,
		"discord": ch.Discord.Requesters, "email": ch.Email.Requesters, "matrix": ch.Matrix.Requesters,
		"signal": ch.Signal.Requesters, "local": ch.Local.Requesters,
	}
}

// RequesterGates says who may start runs per channel, as core/authority
// judges it (Live.MayRequest): serve's gate and config check's test of a
// schedule's thread read this one map. The chat channels and email are
// gated: without a requesters list, only identities the configuration
// knows (people, approver groups) may start runs; "anyone" opts out. The
// console (and the API, and MCP, whose messages are console messages) and
// the local channel are open to every token with scope request unless a
// list is given: the token is the authentication. Webhooks are not people:
// a hook that knows its secret may start runs, as its own actor.
func (c *Config) RequesterGates() map[string]authority.Requesters {
	out := map[string]authority.Requesters{}
	for name, list := range c.Channels.ChatRequesters() {
		switch {
		case slices.Contains(list, "anyone"):
			out[name] = authority.Requesters{Anyone: true}
		case (name != "console" && name != "local") || len(list) > 0:
			out[name] = authority.Requesters{Entries: list}
		}
	}
	return out
}

// WebhookConfig is channels.webhooks as adapters/webhook takes it.
func (c *Config) WebhookConfig() webhook.Config {
	hooks := make([]webhook.Hook, 0, len(c.Channels.Webhooks))
	for _, h := range c.Channels.Webhooks {
		hooks = append(hooks, webhook.Hook{Name: h.Name, Secret: h.Secret, Text: h.Text, Thread: h.Thread})
	}
	return webhook.Config{Hooks: hooks}
}

// adapterProblems reports the problems an adapter's Validate found, each at
// its YAML path: the field under section, or an absolute path the adapter
// names (telegram.FieldPublicURL is server.public_url).
func (c *checker) adapterProblems(section string, err error) {
	if err == nil {
		return
	}
	var ce *core.ConfigError
	if !errors.As(err, &ce) {
		c.problem(section, "%v", err)
		return
	}
	for _, p := range ce.Problems {
		path := section
		switch {
		case p.Field == telegram.FieldPublicURL:
			path = p.Field
		case p.Field == "":
		case p.Field[0] == '[':
			path += p.Field
		default:
			path += "." + p.Field
		}
		c.problem(path, "%s", p.Message)
	}
}
