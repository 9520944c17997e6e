package main

import "github.com/opsgate/opsgate/config"

// enabledChannels names the channels cfg turns on, as their events and
// outbox messages are labelled, for the console home page's channel
// health (a configured channel that never saw a message still shows).
func enabledChannels(cfg *config.Config) []string {
	out := []string{"console"}
	c := cfg.Channels
	for _, ch := range []struct {
		on   bool
		name string
	}{{c.Slack.Enabled, "slack"}, {c.Telegram.Enabled, "telegram"}, {c.Discord.Enabled, "discord"},
		{c.Email.Enabled, "email"}, {len(c.Webhooks) > 0, "webhook"}} {
		if ch.on {
			out = append(out, ch.name)
		}
	}
	return out
}
