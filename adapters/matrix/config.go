package matrix

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
const ChannelName = "matrix"

// Config is everything the adapter needs from the operator; config maps
// channels.matrix onto it. Zero values take the defaults noted on each
// field.
type Config struct {
	// HomeserverURL is the client-server API base ("https://matrix.example.org").
	HomeserverURL string
	// UserID is the bot's account ("@opsgate:example.org").
	UserID string
	// AccessToken authenticates the bot (a device's access token).
	AccessToken string
	// Rooms are the room ids ("!abc:example.org") or aliases
	// ("#ops:example.org") whose messages count. Aliases are resolved at
	// start. Invites to listed rooms are accepted.
	Rooms []string
	// DirectMessages lets any direct room (the bot and one other member)
	// count too, and accepts invites marked is_direct.
	DirectMessages bool
	// Threads replies in the request's thread (m.thread); false replies
	// with a plain reply (m.in_reply_to) to the request. Default true.
	Threads *bool
	// PollTimeout is /sync's long-poll timeout; default 30s.
	PollTimeout time.Duration
}

// Deps are the adapter's collaborators, supplied by cmd/opsgate.
type Deps struct {
	// Sink records inbound events durably (the engine). Required.
	Sink core.Sink
	// Cards fetches approval cards (the engine). Required.
	Cards core.CardSource
	// Store keeps the sync position and the sync lease (the server's
	// core.Store). Required.
	Store StateStore
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Now defaults to time.Now.
	Now func() time.Time
	// HTTPClient defaults to a client whose timeout outlasts the long poll.
	HTTPClient *http.Client
	// Owner names this replica for the sync lease; default a random id.
	Owner string
}

// StateStore is the durable state the adapter keeps: the sync position
// and lease of a pulling adapter (core/lease), and the notices it sent.
// Every opsgate store implements it.
type StateStore = lease.Store

// ErrConfig marks a configuration the adapter cannot start with.
var ErrConfig = errors.New("matrix: invalid config")

var (
	// userIDRE is a Matrix user id: @localpart:server. Localparts are the
	// historical grammar (anything printable but ':'); the server part has
	// no spaces or slashes.
	userIDRE = regexp.MustCompile(`^@[^:\s]+:[^\s/]+$`)
	roomIDRE = regexp.MustCompile(`^![^:\s]+:[^\s/]+$`)
	aliasRE  = regexp.MustCompile(`^#[^:\s]+:[^\s/]+$`)
)

// ValidUserID reports whether s is a Matrix user id ("@ops-lead:example.org"),
// the part after "matrix:" in an identity.
func ValidUserID(s string) bool { return userIDRE.MatchString(s) }

// Validate reports every problem of c that New would refuse, as a
// *core.ConfigError (matching ErrConfig) whose fields are the keys under
// channels.matrix. `opsgate config check` calls exactly this.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

func (c Config) withDefaults() (Config, error) {
	var probs []core.ConfigProblem
	bad := func(field, format string, args ...any) {
		probs = append(probs, core.ConfigProblem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	u, err := url.Parse(c.HomeserverURL)
	switch {
	case c.HomeserverURL == "":
		bad("homeserver_url", "missing required value (matrix is enabled): the client-server API base, e.g. https://matrix.example.org")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Contains(c.HomeserverURL, "%"):
		bad("homeserver_url", "%q is not an absolute http(s) URL", c.HomeserverURL)
	}
	c.HomeserverURL = strings.TrimRight(c.HomeserverURL, "/")
	switch {
	case c.UserID == "":
		bad("user_id", "missing required value (matrix is enabled): the bot's account, e.g. @opsgate:example.org")
	case !userIDRE.MatchString(c.UserID):
		bad("user_id", "want a Matrix user id like @opsgate:example.org, not %q", c.UserID)
	}
	switch {
	case c.AccessToken == "":
		bad("access_token", "missing required value (matrix is enabled)")
	case strings.ContainsFunc(c.AccessToken, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		bad("access_token", "must not contain spaces or control characters")
	}
	if len(c.Rooms) == 0 && !c.DirectMessages {
		bad("rooms", "list at least one room (!id:server or #alias:server), or set direct_messages: true; otherwise no message counts")
	}
	seen := map[string]bool{}
	for i, r := range c.Rooms {
		switch {
		case !roomIDRE.MatchString(r) && !aliasRE.MatchString(r):
			bad(fmt.Sprintf("rooms[%d]", i), "want a room id like !abc:example.org or an alias like #ops:example.org, not %q", r)
		case seen[r]:
			bad(fmt.Sprintf("rooms[%d]", i), "%q is listed twice", r)
		}
		seen[r] = true
	}
	if c.Threads == nil {
		t := true
		c.Threads = &t
	}
	if c.PollTimeout <= 0 {
		c.PollTimeout = 30 * time.Second
	}
	return c, core.ConfigErrorOf(ErrConfig, probs)
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
