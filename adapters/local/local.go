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
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/delivery"
)

// Channel is the channel's name in thread addresses ("local:<key>").
const Channel = core.LocalChannel

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

// Authenticator finds a bearer token's actor, and the token as
// core/authority judges it; *api.TokenSet is one, so the channel accepts
// exactly the API's tokens.
type Authenticator interface {
	MatchAuthority(tok string) (core.Actor, authority.Actor, bool)
}

// Store is what the stream reads: a thread's messages and the wake-ups of
// new ones.
type Store interface {
	ThreadMessages(ctx context.Context, p core.ThreadMessagesParams) ([]core.ThreadMessage, string, error)
	Subscribe(topic string) (ch <-chan struct{}, cancel func())
}

// Deps are what the adapter takes from the server.
type Deps struct {
	Sink  core.Sink
	Cards core.CardSource
	Store Store
	Auth  Authenticator
	// Authority says who may read which thread and decide what (the
	// engine's).
	Authority *authority.Authority
	Logger    *slog.Logger
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
	d   Deps
	mux *authority.Mux
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
	if d.Sink == nil || d.Cards == nil || d.Store == nil || d.Auth == nil || d.Authority == nil {
		return nil, errors.New("local: Deps.Sink, Cards, Store, Auth and Authority are required")
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
	a := &Adapter{Recorder: delivery.NewRecorder(Channel), d: d}
	a.mux = authority.NewMux(d.Authority, func(w http.ResponseWriter, _ *http.Request, ref *authority.Refusal) {
		writeErr(w, refused(ref))
	}, a.authenticate)
	route := func(pattern string, act authority.Action, h http.HandlerFunc) {
		a.mux.HandleFunc(authority.Route{Surface: authority.SurfaceLocal, Entry: pattern, Action: act}, h)
	}
	route("POST "+PathPrefix+"messages", authority.Request, a.postMessage)
	route("POST "+PathPrefix+"decisions", authority.Decide, a.postDecision)
	route("GET "+PathPrefix+"stream", authority.SeeThread, a.stream)
	return a, nil
}

// Routes implements core.HTTPReceiver: every path under PathPrefix, served
// through the authority's gate.
func (a *Adapter) Routes() map[string]http.Handler {
	out := map[string]http.Handler{}
	for _, rt := range a.mux.Guards() {
		out[rt.Entry] = a.mux
	}
	return out
}

// Guards lists the routes and the action of each (authority.Router).
func (a *Adapter) Guards() []authority.Route { return a.mux.Guards() }
