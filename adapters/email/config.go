package email

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
)

// ChannelName is the channel in thread addresses and actor ids
// ("email:alice@example.com").
const ChannelName = "email"

// Config is everything the adapter needs from the operator; cmd/opsgate
// maps channels.email onto it. Zero values take the defaults noted on each
// field.
type Config struct {
	// Address is the bot's mailbox ("ops@example.com"): the envelope sender
	// and From of everything sent, and, plus-addressed, where approval
	// replies go. Required.
	Address string
	// Name is the display name in From (default "opsgate").
	Name string
	// IMAP is the mailbox watched for requests and replies.
	IMAP IMAPConfig
	// SMTP is the server mail is submitted to.
	SMTP SMTPConfig
	// TokenKey derives the per-approval reply tokens (HMAC-SHA256). Use a
	// long random secret; changing it invalidates the tokens of cards
	// already sent. Required, at least 16 bytes.
	TokenKey string
	// RequireDMARC makes approval replies (and requests) count only when
	// the topmost Authentication-Results header from AuthservID shows an
	// aligned dkim=pass or dmarc=pass.
	RequireDMARC bool
	// AuthservID is the authserv-id your receiving MX writes into
	// Authentication-Results ("mx.example.com"). Required with RequireDMARC.
	AuthservID string
	// Backfill is how far back a start without a cursor (first start, lost
	// cursor, new UIDVALIDITY) reads the mailbox; the Message-ID dedup
	// absorbs what was already handled. Default 24h.
	Backfill time.Duration
	// IdleRestart re-issues IMAP IDLE this often (default 25m; servers
	// drop an IDLE after 30 minutes, RFC 2177 says re-issue within 29).
	IdleRestart time.Duration
	// PollInterval is how often the mailbox is checked when the server
	// lacks IDLE (default 1m).
	PollInterval time.Duration
	// MaxMessageBytes skips larger messages unread (default 10 MiB).
	MaxMessageBytes int64
	// MinBackoff and MaxBackoff bound the reconnect backoff (1s, 5m).
	MinBackoff, MaxBackoff time.Duration
	// SendInterval paces mail per account (default 1s: one mail a second).
	SendInterval time.Duration
}

// IMAPConfig is the IMAP side of the mailbox.
type IMAPConfig struct {
	// Addr is host:port ("imap.example.com:993").
	Addr string
	// TLS dials implicit TLS (port 993); StartTLS upgrades a plain
	// connection (port 143). With neither, plaintext is allowed only to a
	// loopback address.
	TLS, StartTLS bool
	Username      string
	Password      string
	// Mailbox is watched (default INBOX).
	Mailbox string
}

// SMTPConfig is the submission server.
type SMTPConfig struct {
	// Addr is host:port ("smtp.example.com:587").
	Addr string
	// TLS dials implicit TLS (port 465); StartTLS upgrades (port 587).
	// With neither, plaintext is allowed only to a loopback address.
	TLS, StartTLS bool
	// Username and Password authenticate with SASL PLAIN (over TLS only,
	// or loopback); empty Username sends unauthenticated (a local relay).
	Username string
	Password string
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	// Sink records inbound events durably (the engine). Required.
	Sink core.Sink
	// Cards fetches approval cards (the engine). Required.
	Cards core.CardSource
	// Store keeps the IMAP cursor (the server's core.Store). Required: a
	// cursor in the database survives restarts and is seen by every
	// replica, where a local file was neither.
	Store CursorStore
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// Dial opens IMAP and SMTP connections (default a net.Dialer with a
	// 30 s timeout): tests and proxies plug in here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSConfig is used for TLS and STARTTLS (default: verify against the
	// system roots with the server's host name).
	TLSConfig *tls.Config
}

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("email: invalid config")

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are the keys under
// channels.email. `opsgate config check` calls exactly this, so check and
// serve cannot disagree.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// withDefaults validates c and fills defaults; every problem is reported at
// once, wrapped in ErrConfig.
func (c Config) withDefaults() (Config, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	a, err := mail.ParseAddress(c.Address)
	switch {
	case c.Address == "":
		bad("address", "missing required value (email is enabled): the bot's mail address (ops@example.com)")
	case err != nil || a.Name != "":
		bad("address", "%q is not a plain mail address (ops@example.com)", c.Address)
	default:
		c.Address = strings.ToLower(a.Address)
		if strings.Contains(localPart(c.Address), "+") {
			bad("address", "must not itself contain '+' (replies are plus-addressed)")
		}
	}
	if c.Name == "" {
		c.Name = "opsgate"
	}
	switch {
	case c.TokenKey == "":
		bad("token_key", "missing required value (email is enabled): at least 16 characters of a random secret")
	case len(c.TokenKey) < 16:
		bad("token_key", "must be at least 16 characters of a random secret")
	}
	if c.RequireDMARC && c.AuthservID == "" {
		bad("authserv_id", "missing required value (require_dmarc is true)")
	}
	probs = append(probs, checkEndpoint("imap", c.IMAP.Addr, c.IMAP.TLS, c.IMAP.StartTLS)...)
	probs = append(probs, checkEndpoint("smtp", c.SMTP.Addr, c.SMTP.TLS, c.SMTP.StartTLS)...)
	if c.IMAP.Username == "" {
		bad("imap.username", "missing required value (email is enabled)")
	}
	if c.IMAP.Mailbox == "" {
		c.IMAP.Mailbox = "INBOX"
	}
	setDur := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	setDur(&c.Backfill, 24*time.Hour)
	setDur(&c.IdleRestart, 25*time.Minute)
	setDur(&c.PollInterval, time.Minute)
	setDur(&c.MinBackoff, time.Second)
	setDur(&c.MaxBackoff, 5*time.Minute)
	setDur(&c.SendInterval, time.Second)
	if c.IdleRestart >= 29*time.Minute {
		bad("idle_restart", "must be under 29m (servers drop IDLE after 30 minutes, RFC 2177)")
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = 10 << 20
	}
	return c, core.ConfigErrorOf(ErrConfig, probs)
}

// checkEndpoint refuses an address without a port, both TLS modes at once,
// and plaintext to anything but loopback (credentials would cross the
// network in the clear).
func checkEndpoint(name, addr string, tlsOn, startTLS bool) []core.ConfigProblem {
	if addr == "" {
		return []core.ConfigProblem{{Field: name + ".addr", Message: "missing required value (email is enabled)"}}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return []core.ConfigProblem{{Field: name + ".addr", Message: fmt.Sprintf("must be host:port, not %q", addr)}}
	}
	if tlsOn && startTLS {
		return []core.ConfigProblem{{Field: name + ".starttls", Message: "tls and starttls are exclusive (tls: port 993/465; starttls: 143/587)"}}
	}
	if !tlsOn && !startTLS && !isLoopback(host) {
		return []core.ConfigProblem{{Field: name + ".tls", Message: "plaintext is only allowed to a loopback address; set tls or starttls"}}
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localPart and domainPart split an address at its last '@'.
func localPart(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[:i]
	}
	return addr
}

func domainPart(addr string) string {
	if i := strings.LastIndexByte(addr, '@'); i >= 0 {
		return addr[i+1:]
	}
	return ""
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
