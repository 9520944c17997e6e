// Package discord is opsgate's Discord adapter: the interactions endpoint
// (Ed25519-verified slash commands, buttons and modals), an optional Gateway
// reader for mentions and DMs, approval cards as embeds with signed buttons,
// and the delivery.Platform that sends replies and cards through the bot
// token with Discord's limits.
//
// A slash command (`/ops command:…`, or a flow's own `/deploy service:…`)
// gets a root message and a thread started from it before it is recorded
// and acknowledged with a deferred response; the run's replies and cards go
// to that thread through the bot token, so they keep working after the
// interaction token's 15 minutes. Cards carry Approve / Reject / Edit
// buttons whose custom_id is a compact approval reference plus an HMAC tag;
// Reject and Edit open modals. After any decision, from any surface, the
// outbox edits the card in place and removes its buttons.
//
// Rate limits: the pipeline paces per channel (5 per 5 s) and per bot
// (50/s); the adapter's transport learns per-route buckets from
// X-RateLimit-* headers, waits on them, and hides them from discordgo so
// the library never sleeps silently; 429s surface as core.RateLimitError.
package discord
