package signal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/lease"
)

// ChannelName is the channel in thread addresses and actor ids.
const ChannelName = "signal"

// Config is everything the adapter needs from the operator; config maps
// channels.signal onto it.
type Config struct {
	// DaemonURL is signal-cli's --http address ("http://127.0.0.1:8080").
	DaemonURL string
	// Account is the bot's number (+E164) as signal-cli knows it; it names
	// the account in every call (multi-account daemons) and tells the
	// bot's own messages apart.
	Account string
	// Groups are the base64 group ids whose messages count; direct
	// messages always do (requesters decide who may ask).
	Groups []string
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	Sink   core.Sink
	Cards  core.CardSource
	Store  StateStore
	Logger *slog.Logger
	Now    func() time.Time
	// HTTPClient is used for JSON-RPC calls (default 30s timeout); the
	// event stream uses a client without a timeout of its own.
	HTTPClient *http.Client
	// Owner names this replica for the stream lease.
	Owner string
}

// StateStore is the durable state the adapter keeps: the stream position
// and lease of a pulling adapter (core/lease), approval codes and sent
// cards. Every opsgate store implements it.
type StateStore = lease.Store

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("signal: invalid config")

var (
	e164RE = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// ValidIdentity reports whether s is a Signal user as identities name
// them: a +E164 number or an ACI uuid (lower case).
func ValidIdentity(s string) bool { return e164RE.MatchString(s) || uuidRE.MatchString(s) }

// Validate reports every problem New would refuse, as a *core.ConfigError
// whose fields are the keys under channels.signal.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	u, err := url.Parse(c.DaemonURL)
	switch {
	case c.DaemonURL == "":
		bad("daemon_url", "missing required value (signal is enabled): signal-cli's --http address, e.g. http://127.0.0.1:8080")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Contains(c.DaemonURL, "%"):
		bad("daemon_url", "%q is not an absolute http(s) URL", c.DaemonURL)
	}
	c.DaemonURL = strings.TrimRight(c.DaemonURL, "/")
	switch {
	case c.Account == "":
		bad("account", "missing required value (signal is enabled): the bot's number, e.g. +15551234567")
	case !e164RE.MatchString(c.Account):
		bad("account", "want the bot's number in E.164 form (+15551234567), not %q", c.Account)
	}
	for i, g := range c.Groups {
		if !groupIDRE.MatchString(g) {
			bad(fmt.Sprintf("groups[%d]", i), "want a base64 group id as signal-cli listGroups shows it, not %q", g)
		}
	}
	return c, core.ConfigErrorOf(ErrConfig, probs)
}

var groupIDRE = regexp.MustCompile(`^[A-Za-z0-9+/_-]{16,128}={0,2}$`)

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
