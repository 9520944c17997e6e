package config

import (
	"encoding/hex"
	"net"
	"strings"
)

// channels checks every channel section. An enabled channel is judged by
// its adapter's own Validate, on exactly the value serve builds it from
// (channels.go), so check and serve cannot disagree. A disabled channel is
// never built; the values it sets are still checked for form here, so a
// typo shows before someone enables it.
func (c *checker) channels() {
	ch := c.cfg.Channels
	c.delivery("channels.console", ch.Console.Delivery)
	if ch.Local.Enabled {
		c.adapterProblems("channels.local", c.cfg.LocalConfig().Validate())
	}
	c.delivery("channels.local", ch.Local.Delivery)
	if ch.Slack.Enabled {
		c.adapterProblems("channels.slack", c.cfg.SlackConfig().Validate())
	} else {
		c.optionalURL("channels.slack.api_url", ch.Slack.APIURL)
	}
	c.delivery("channels.slack", ch.Slack.Delivery)
	if ch.Telegram.Enabled {
		c.adapterProblems("channels.telegram", c.cfg.TelegramConfig().Validate())
	} else {
		c.optionalURL("channels.telegram.api_url", ch.Telegram.APIURL)
	}
	c.delivery("channels.telegram", ch.Telegram.Delivery)
	if ch.Discord.Enabled {
		c.adapterProblems("channels.discord", c.cfg.DiscordConfig().Validate())
	} else {
		if k := ch.Discord.PublicKey; k != "" {
			if b, err := hex.DecodeString(k); err != nil || len(b) != 32 {
				c.problem("channels.discord.public_key", "must be 64 hex characters (an Ed25519 public key)")
			}
		}
		c.optionalURL("channels.discord.api_url", ch.Discord.APIURL)
	}
	c.delivery("channels.discord", ch.Discord.Delivery)
	// require_dmarc defaults to true; only config knows whether the
	// operator wrote it, so this problem's wording is config's (the
	// adapter's own authserv_id check then adds nothing at that path).
	if ch.Email.RequireDMARC && ch.Email.AuthservID == "" && (ch.Email.Enabled || c.given["channels.email.require_dmarc"]) {
		why := "require_dmarc is true"
		if !c.given["channels.email.require_dmarc"] {
			why = "require_dmarc defaults to true, so approval replies and requests count only with a DKIM/DMARC pass"
		}
		c.problem("channels.email.authserv_id", "missing required value (%s): set it to the authserv-id your receiving MX writes "+
			"into Authentication-Results (e.g. mx.example.com), or set require_dmarc: false to trust From: alone (forgeable)", why)
	}
	if ch.Email.Enabled {
		c.adapterProblems("channels.email", c.cfg.EmailConfig().Validate())
	} else {
		if e := ch.Email; e.Address != "" && !strings.Contains(e.Address, "@") {
			c.problem("channels.email.address", "must be an email address, not %q", e.Address)
		}
		c.hostPort("channels.email.imap.addr", ch.Email.IMAP.Addr)
		c.hostPort("channels.email.smtp.addr", ch.Email.SMTP.Addr)
	}
	c.delivery("channels.email", ch.Email.Delivery)
	if ch.Matrix.Enabled {
		c.adapterProblems("channels.matrix", c.cfg.MatrixConfig().Validate())
	} else {
		c.optionalURL("channels.matrix.homeserver_url", ch.Matrix.HomeserverURL)
	}
	c.delivery("channels.matrix", ch.Matrix.Delivery)
	if ch.Signal.Enabled {
		c.adapterProblems("channels.signal", c.cfg.SignalConfig().Validate())
	} else {
		c.optionalURL("channels.signal.daemon_url", ch.Signal.DaemonURL)
	}
	c.delivery("channels.signal", ch.Signal.Delivery)
	// Webhooks are enabled by being listed.
	c.adapterProblems("channels.webhooks", c.cfg.WebhookConfig().Validate())
}

func (c *checker) optionalURL(p, raw string) {
	if raw != "" {
		c.httpURL(p, raw)
	}
}

func (c *checker) hostPort(p, addr string) {
	if addr == "" {
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		c.problem(p, "must be host:port (%v)", err)
	}
}

func (c *checker) delivery(p string, d Delivery) {
	if d.MaxAttempts < 0 {
		c.problem(p+".max_attempts", "must not be negative")
	}
	for name, l := range map[string]RateLimit{"conversation": d.RateLimits.Conversation, "group": d.RateLimits.Group,
		"account": d.RateLimits.Account, "global": d.RateLimits.Global} {
		if l.Burst < 0 {
			c.problem(p+".rate_limits."+name+".burst", "must not be negative")
		}
	}
	// global is the older name of the account bucket; with both set one
	// would be silently ignored (cmd applies account).
	if !d.RateLimits.Account.IsZero() && !d.RateLimits.Global.IsZero() {
		c.problem(p+".rate_limits.global", "set account or global, not both (global is the older name of account)")
	}
}
