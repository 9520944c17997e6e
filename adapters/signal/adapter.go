package signal

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/lease"
)

// Adapter is one Signal account behind a signal-cli daemon: the
// delivery.Platform for its outbox and the Run loop reading its events.
type Adapter struct {
	cfg    Config
	sink   core.Sink
	cards  core.CardSource
	store  StateStore
	log    *slog.Logger
	now    func() time.Time
	rpc    *rpcClient
	stream *http.Client
	reader *lease.Reader // one replica at a time reads the event stream
	groups map[string]bool
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
)

// New builds an adapter; it validates cfg (errors wrap ErrConfig) and
// makes no network call.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil || deps.Store == nil {
		return nil, fmt.Errorf("%w: Deps.Sink, Deps.Cards and Deps.Store are required", ErrConfig)
	}
	hc := deps.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	owner := deps.Owner
	if owner == "" {
		owner = lease.Owner("signal")
	}
	groups := map[string]bool{}
	for _, g := range cfg.Groups {
		groups[g] = true
	}
	a := &Adapter{cfg: cfg, sink: deps.Sink, cards: deps.Cards, store: deps.Store, log: log.With("channel", ChannelName),
		now: now, rpc: &rpcClient{url: cfg.DaemonURL, hc: hc}, stream: &http.Client{Transport: hc.Transport},
		groups: groups}
	a.reader = lease.New(deps.Store, lease.Options{Name: a.leaseName(), Key: a.lastEventKey(), Owner: owner, TTL: leaseTTL, Now: now})
	return a, nil
}

// Channel implements core.Adapter.
func (a *Adapter) Channel() string { return ChannelName }
