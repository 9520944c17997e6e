// Package local is the `local` channel (docs/terminal.md): a conversation
// held from a terminal with `opsgate chat`, authenticated by an API
// token. What a person types is a ChannelEvent of channel "local" in a
// thread "local:<key>", acting as the token's actor; replies and cards are
// the thread's outbox, read back as a live stream; cards are decided in
// place with a decision event of the same channel, judged like any other
// decision.
//
// It has no platform to call: like the console, the outbox row is the
// record (a delivery.Recorder), so any replica serves any thread's stream
// and a reconnecting client loses nothing.
package local

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// Channel is the channel's name in thread addresses ("local:<key>").
const Channel = "local"

// PathPrefix is where its routes live.
const PathPrefix = "/local/v1/"

// ErrConfig is the sentinel of a configuration problem.
var ErrConfig = errors.New("local: invalid configuration")

// Config is channels.local as the adapter takes it. Enabling the channel is
// its whole configuration: who may start runs (channels.local.requesters)
// is judged by the engine, and the token is the authentication.
type Config struct{}

// Validate reports every problem as a *core.ConfigError (there is none to
// have yet; it is here so the channel is checked like every other).
func (c Config) Validate() error { return core.ConfigErrorOf(ErrConfig, nil) }

// Authenticator finds a bearer token's actor and scopes; *api.TokenSet is
// one, so the channel accepts exactly the API's tokens.
type Authenticator interface {
	MatchScopes(tok string) (core.Actor, core.Scopes, bool)
}

// Store is what the stream reads: a thread's messages and the wake-ups of
// new ones.
type Store interface {
	ThreadMessages(ctx context.Context, p core.ThreadMessagesParams) ([]core.ThreadMessage, string, error)
	Subscribe(topic string) (ch <-chan struct{}, cancel func())
}

// Deps are what the adapter takes from the server.
type Deps struct {
	Sink   core.Sink
	Cards  core.CardSource
	Store  Store
	Auth   Authenticator
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// PollInterval is the stream's fallback when no wake-up arrives
	// (default 1 s); PingInterval its keep-alive comment (default 15 s).
	PollInterval, PingInterval time.Duration
}

// Adapter is the local channel: a Recorder for delivery, and the routes
// its clients call.
type Adapter struct {
	*delivery.Recorder
	d Deps
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.HTTPReceiver = (*Adapter)(nil)
)

// New checks cfg and deps and returns the adapter.
func New(cfg Config, d Deps) (*Adapter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.Sink == nil || d.Cards == nil || d.Store == nil || d.Auth == nil {
		return nil, errors.New("local: Deps.Sink, Cards, Store and Auth are required")
	}
	if d.Logger == nil {
		d.Logger = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.PollInterval <= 0 {
		d.PollInterval = time.Second
	}
	if d.PingInterval <= 0 {
		d.PingInterval = 15 * time.Second
	}
	return &Adapter{Recorder: delivery.NewRecorder(Channel), d: d}, nil
}

// Routes implements core.HTTPReceiver.
func (a *Adapter) Routes() map[string]http.Handler {
	return map[string]http.Handler{
		"POST " + PathPrefix + "messages":  a.auth(core.ScopeRequest, a.postMessage),
		"POST " + PathPrefix + "decisions": a.auth("", a.postDecision),
		"GET " + PathPrefix + "stream":     a.auth(core.ScopeRead, a.stream),
	}
}
