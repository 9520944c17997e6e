package config

// Channels configures every chat surface. A channel is off unless enabled.
type Channels struct {
	Console  Console   `yaml:"console"`
	Slack    Slack     `yaml:"slack"`
	Telegram Telegram  `yaml:"telegram"`
	Discord  Discord   `yaml:"discord"`
	Email    Email     `yaml:"email"`
	Matrix   Matrix    `yaml:"matrix"`
	Signal   Signal    `yaml:"signal"`
	Webhooks []Webhook `yaml:"webhooks"`
	Local    Local     `yaml:"local"`
}

// Delivery holds the knobs every channel shares: outbound pacing and retries.
// Zero values mean "the platform's published limits".
type Delivery struct {
	RateLimits RateLimits `yaml:"rate_limits"`
	// MaxAttempts bounds delivery retries of one outbound message; 0 means
	// the adapter's default.
	MaxAttempts int `yaml:"max_attempts"`
}

// RateLimits are token buckets at the scopes platforms limit. Unset scopes
// use the platform's defaults.
type RateLimits struct {
	Conversation RateLimit `yaml:"conversation"` // one chat, channel or thread
	Group        RateLimit `yaml:"group"`        // group chats (Telegram: 20/m)
	Account      RateLimit `yaml:"account"`      // one bot account: everything this channel sends
	// Global is the older name of Account, still accepted; config check
	// refuses a channel that sets both.
	Global RateLimit `yaml:"global"`
}

// Console is the built-in web console.
type Console struct {
	Enabled bool `yaml:"enabled"`
	// Requesters, when set, limits which token actors may start runs from
	// the console and POST /api/v1/messages; unset, any token with scope
	// request may (the token is the authentication).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
	// TokenLogin offers sign-in with an API token; default true. false
	// leaves only the identity provider (oidc, which is then required).
	TokenLogin bool `yaml:"token_login"`
	// OIDC signs people in with the company's identity provider
	// (docs/console.md); off unless issuer is set.
	OIDC ConsoleOIDC `yaml:"oidc"`
}

// ConsoleOIDC is channels.console.oidc: sign-in to the console with an
// OpenID Connect identity provider. The signed-in person acts as
// console:<value of person_claim>.
type ConsoleOIDC struct {
	// Issuer is the provider's issuer URL (its discovery document is at
	// <issuer>/.well-known/openid-configuration); setting it turns
	// sign-in with the provider on. Needs server.public_url: the redirect
	// URL registered at the provider is <public_url>/auth/callback.
	Issuer       string `yaml:"issuer"`
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// PersonClaim names the claim that names the person; default email.
	PersonClaim string `yaml:"person_claim"`
	// GroupsClaim, when set, names the claim listing the person's groups:
	// a group named like an approver group makes its member an approver of
	// that group (and someone opsgate knows).
	GroupsClaim string `yaml:"groups_claim"`
	// Scopes requested; default [openid, profile, email]. Some providers
	// (Dex, Keycloak) also need "groups" for the groups claim.
	Scopes []string `yaml:"scopes"`
}

// Local is the local channel: `opsgate chat` from a terminal, with an API
// token (docs/terminal.md).
type Local struct {
	Enabled bool `yaml:"enabled"`
	// Requesters, when set, limits which token actors may start runs
	// here; unset, any token with scope request may (the token is the
	// authentication), as on the console.
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Slack is a Slack app, over the Events API (mode http) or Socket Mode.
type Slack struct {
	Enabled bool `yaml:"enabled"`
	// Mode is http (default: Slack POSTs to /slack/*, needs signing_secret)
	// or socket (outbound websocket, needs app_token; no public URL needed).
	Mode          string `yaml:"mode" enum:"http|socket"`
	BotToken      string `yaml:"bot_token"`
	SigningSecret string `yaml:"signing_secret"`
	AppToken      string `yaml:"app_token"`
	// APIURL overrides https://slack.com/api/ (tests, GovSlack, proxies).
	APIURL string `yaml:"api_url"`
	// Requesters limits who may start runs here (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Telegram is a Telegram bot.
type Telegram struct {
	Enabled  bool   `yaml:"enabled"`
	BotToken string `yaml:"bot_token"`
	// Mode is webhook (default; needs webhook_secret) or polling (getUpdates).
	Mode          string `yaml:"mode" enum:"webhook|polling"`
	WebhookSecret string `yaml:"webhook_secret"`
	// BotUsername is optional; it is learned from getMe when empty and used
	// to recognise "/cmd@botname" and mentions in groups.
	BotUsername string `yaml:"bot_username"`
	// APIURL overrides https://api.telegram.org (tests, a local Bot API server).
	APIURL string `yaml:"api_url"`
	// Requesters limits who may start runs here (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Discord is a Discord application (interactions over HTTP, optional Gateway).
type Discord struct {
	Enabled       bool   `yaml:"enabled"`
	BotToken      string `yaml:"bot_token"`
	ApplicationID string `yaml:"application_id"`
	// PublicKey is the hex Ed25519 key used to verify interactions.
	PublicKey string `yaml:"public_key"`
	// APIURL overrides https://discord.com/api/v10.
	APIURL string `yaml:"api_url"`
	// Gateway also reads plain messages over the Gateway websocket.
	Gateway bool `yaml:"gateway"`
	// MessageContent requests the privileged message content intent, needed
	// to read plain message text over the Gateway.
	MessageContent bool `yaml:"message_content"`
	// GuildID, when set, registers commands in one guild (instant) instead of
	// globally (which Discord propagates slowly).
	GuildID string `yaml:"guild_id"`
	// Requesters limits who may start runs here (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Email is a mailbox the bot reads (IMAP) and writes from (SMTP).
type Email struct {
	Enabled bool `yaml:"enabled"`
	// Address is the bot's address; approvals are answered by replying to it.
	Address string `yaml:"address"`
	IMAP    IMAP   `yaml:"imap"`
	SMTP    SMTP   `yaml:"smtp"`
	// RequireDMARC trusts a sender (of a request or an approval reply) only
	// when Authentication-Results from AuthservID say DKIM/DMARC passed;
	// From: alone is forgeable. Default true: set authserv_id, or
	// require_dmarc: false explicitly.
	RequireDMARC bool `yaml:"require_dmarc"`
	// AuthservID is the authserv-id of the receiving MTA whose
	// Authentication-Results header is trusted; required with require_dmarc.
	AuthservID string `yaml:"authserv_id"`
	// TokenKey keys the single-use reply tokens of approval mails (HMAC);
	// at least 16 characters of a long random secret. Changing it voids the
	// tokens of cards already sent.
	TokenKey string `yaml:"token_key"`
	// Name is the display name in From; default "opsgate".
	Name string `yaml:"name"`
	// Backfill is how far back a start without a cursor reads; default 24h.
	Backfill Duration `yaml:"backfill"`
	// IdleRestart re-issues IMAP IDLE this often; default 25m (under 29m).
	IdleRestart Duration `yaml:"idle_restart"`
	// PollInterval checks the mailbox when the server lacks IDLE; default 1m.
	PollInterval Duration `yaml:"poll_interval"`
	// Requesters limits who may start runs by mail (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Matrix is a Matrix bot account on a homeserver (docs/matrix.md).
type Matrix struct {
	Enabled bool `yaml:"enabled"`
	// HomeserverURL is the client-server API base (https://matrix.example.org).
	HomeserverURL string `yaml:"homeserver_url"`
	// UserID is the bot's account (@opsgate:example.org); AccessToken its
	// device's token. Use ${VAR}.
	UserID      string `yaml:"user_id"`
	AccessToken string `yaml:"access_token"`
	// Rooms are room ids or aliases whose messages count.
	Rooms []string `yaml:"rooms"`
	// DirectMessages also reads direct rooms (the bot and one other member).
	DirectMessages bool `yaml:"direct_messages"`
	// Threads replies in the request's thread (default true); false
	// replies with plain replies.
	Threads *bool `yaml:"threads"`
	// PollTimeout is /sync's long poll; default 30s.
	PollTimeout Duration `yaml:"poll_timeout"`
	// Requesters limits who may start runs here (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// Signal is a Signal account behind a signal-cli daemon (docs/signal.md).
type Signal struct {
	Enabled bool `yaml:"enabled"`
	// DaemonURL is signal-cli's --http address (http://127.0.0.1:8080).
	DaemonURL string `yaml:"daemon_url"`
	// Account is the bot's number (+15551234567).
	Account string `yaml:"account"`
	// Groups are the base64 group ids whose messages count; direct
	// messages always do.
	Groups []string `yaml:"groups"`
	// Requesters limits who may start runs here (see Requesters).
	Requesters Requesters `yaml:"requesters"`
	Delivery   `yaml:",inline"`
}

// IMAP is where inbound mail is read.
type IMAP struct {
	Addr     string `yaml:"addr"`     // host:port
	TLS      bool   `yaml:"tls"`      // implicit TLS (port 993)
	StartTLS bool   `yaml:"starttls"` // upgrade a plain connection (port 143)
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// Mailbox is the folder to read; default INBOX.
	Mailbox string `yaml:"mailbox"`
}

// SMTP is where outbound mail is submitted.
type SMTP struct {
	Addr     string `yaml:"addr"`     // host:port
	StartTLS bool   `yaml:"starttls"` // upgrade (port 587)
	TLS      bool   `yaml:"tls"`      // implicit TLS (port 465)
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

// Webhook is an inbound HTTP hook at POST /hooks/{name}, authenticated by an
// HMAC-SHA256 of the body with Secret.
type Webhook struct {
	Name   string `yaml:"name" cfg:"required"`
	Secret string `yaml:"secret" cfg:"required"`
	// Text, when set, is a Go template over the decoded JSON body that
	// renders the command (Alertmanager: `restart {{(index .alerts 0).labels.service}}`);
	// default: the body's "text" field.
	Text string `yaml:"text"`
	// Thread, when set, is a Go template over the body naming the thread
	// (so related alerts share one); default: the hook's name.
	Thread string `yaml:"thread"`
}
