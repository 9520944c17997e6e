package discord

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// InteractionsPath is where Routes mounts InteractionsHandler (docs/architecture.md).
const InteractionsPath = "/discord/interactions"

// DefaultAPIURL is Discord's REST API. discordgo computes its endpoints for
// an older version at package load; the adapter's transport rewrites every
// request onto APIURL, which is how api_url (and v10) take effect.
const DefaultAPIURL = "https://discord.com/api/v10"

// DefaultCommand is the catch-all slash command: `/ops command:<text>`.
const DefaultCommand = "ops"

// Config is everything the adapter needs from the operator. cmd/opsgate maps
// channels.discord (and the flows) onto it. Zero values take the defaults
// noted on each field, which are Discord's published limits.
type Config struct {
	// BotToken authenticates REST calls and the Gateway (without "Bot ").
	BotToken string
	// ApplicationID is the application's id from the developer portal;
	// commands are registered under it.
	ApplicationID string
	// PublicKey is the application's hex Ed25519 public key from the
	// developer portal; every interaction request is verified with it.
	PublicKey string
	// APIURL is the REST base (DefaultAPIURL): tests, proxies.
	APIURL string
	// GuildID, when set, registers the commands in that guild only (they
	// appear at once there); empty registers them globally.
	GuildID string
	// Command is the catch-all slash command's name (DefaultCommand).
	Command string
	// Flows are registered as top-level commands with one string option
	// per placeholder (`/deploy service:api version:1.2.3`).
	Flows []FlowCommand
	// SkipRegister leaves Discord's commands alone on start (someone else
	// manages them).
	SkipRegister bool
	// Gateway also reads plain messages that mention the bot or arrive by
	// DM, over a Gateway connection.
	Gateway bool
	// MessageContent requests the privileged MESSAGE_CONTENT intent (only
	// needed to read messages that neither mention the bot nor are DMs,
	// which opsgate ignores anyway; off by default).
	MessageContent bool
	// MaxSkew is how far an interaction's X-Signature-Timestamp may be
	// from now (default 5 minutes): older requests are replays.
	MaxSkew time.Duration
	// MaxBodyBytes caps an interaction request body (default 1 MiB).
	MaxBodyBytes int64
	// RootTimeout bounds the REST calls made before a slash command is
	// acknowledged (root message and thread), inside Discord's 3 seconds
	// (default 2s).
	RootTimeout time.Duration

	skipped []string // flows not offered as commands, and why
}

// FlowCommand is one flow offered as a top-level slash command. cmd maps
// it from the flow's config: Name and Description as they are; Literals
// and Options from router.ParsePattern(flow.Command) (Literals(),
// Placeholders()).
type FlowCommand struct {
	Name        string
	Description string
	// Literals are the pattern's literal words ("deploy"), put back in
	// front of the arguments so the router sees the flow's own syntax.
	Literals []string
	// Options are the placeholders, in pattern order.
	Options []FlowOption
}

// FlowOption is one placeholder of a flow's pattern.
type FlowOption struct {
	Name     string
	Default  string
	Optional bool
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	// Sink records inbound events durably (the engine). Required.
	Sink core.Sink
	// Cards fetches approval cards for modals and stale buttons (the
	// engine). Required.
	Cards core.CardSource
	// Logger defaults to slog.Default(); the bot token never reaches it.
	Logger *slog.Logger
	// Now defaults to time.Now; it also judges signature timestamps.
	Now func() time.Time
	// HTTPClient carries every REST call (its Transport is wrapped by the
	// adapter's rate-limit observer); default: a client with a 15s timeout.
	HTTPClient *http.Client
}

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("discord: invalid config")

var (
	snowflakeRE   = regexp.MustCompile(`^[0-9]{1,20}$`)
	commandNameRE = regexp.MustCompile(`^[-_\p{Ll}\p{N}]{1,32}$`)
)

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are the keys under
// channels.discord. `opsgate config check` calls exactly this, so check
// and serve cannot disagree. Flows Discord cannot take as commands are not
// problems: New leaves them out and logs why.
func (c Config) Validate() error {
	_, _, err := c.withDefaults()
	return err
}

// withDefaults validates c and fills defaults; every problem is reported,
// wrapped in ErrConfig.
func (c Config) withDefaults() (Config, ed25519.PublicKey, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.BotToken) == "" {
		bad("bot_token", "missing required value (discord is enabled): the bot's token from the developer portal")
	} else if strings.ContainsAny(c.BotToken, " \n\r\t") {
		bad("bot_token", "must not contain spaces: the bot's token from the developer portal")
	}
	c.BotToken = strings.TrimPrefix(c.BotToken, "Bot ")
	switch {
	case c.ApplicationID == "":
		bad("application_id", "missing required value (discord is enabled): the numeric application id")
	case !snowflakeRE.MatchString(c.ApplicationID):
		bad("application_id", "must be the numeric application id, not %q", c.ApplicationID)
	}
	key, err := hex.DecodeString(strings.TrimSpace(c.PublicKey))
	switch {
	case c.PublicKey == "":
		bad("public_key", "missing required value (discord is enabled): the application's Ed25519 public key")
	case err != nil || len(key) != ed25519.PublicKeySize:
		bad("public_key", "must be 64 hex characters (the application's Ed25519 public key)")
	}
	if c.GuildID != "" && !snowflakeRE.MatchString(c.GuildID) {
		bad("guild_id", "want a numeric guild id")
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	if u, err := url.Parse(c.APIURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		bad("api_url", "must be an absolute http(s) URL, not %q", c.APIURL)
	}
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	if c.Command == "" {
		c.Command = DefaultCommand
	}
	if !commandNameRE.MatchString(c.Command) {
		bad("command", "%q is not a valid Discord command name (lowercase, 1-32 of letters, digits, - _)", c.Command)
	}
	// A flow Discord cannot take as a command is left out (and logged by
	// New), not fatal: the flow still runs through /ops and other channels.
	seen := map[string]bool{c.Command: true}
	var flows []FlowCommand
	for i, f := range c.Flows {
		reason := ""
		switch {
		case !commandNameRE.MatchString(f.Name):
			reason = "not a valid Discord command name (lowercase, 1-32 of letters, digits, - _)"
		case seen[f.Name]:
			reason = "name already registered"
		case len(f.Options) > 25:
			reason = "more than Discord's 25 options"
		case len(flows) >= 99:
			reason = "Discord allows 100 commands including the catch-all"
		}
		for _, o := range f.Options {
			if reason == "" && !commandNameRE.MatchString(o.Name) {
				reason = fmt.Sprintf("placeholder %q is not a valid Discord option name", o.Name)
			}
		}
		if reason != "" {
			c.skipped = append(c.skipped, fmt.Sprintf("flows[%d] %q: %s", i, f.Name, reason))
			continue
		}
		seen[f.Name] = true
		flows = append(flows, f)
	}
	c.Flows = flows
	if c.MaxSkew <= 0 {
		c.MaxSkew = 5 * time.Minute
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 1 << 20
	}
	if c.RootTimeout <= 0 {
		c.RootTimeout = 2 * time.Second
	}
	if err := core.ConfigErrorOf(ErrConfig, probs); err != nil {
		return c, nil, err
	}
	return c, ed25519.PublicKey(key), nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
