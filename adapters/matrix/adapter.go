package matrix

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
	"github.com/opsgate/opsgate/core/lease"
)

// Adapter is one Matrix bot account: the delivery.Platform for its outbox
// and the Run loop that syncs its rooms.
type Adapter struct {
	cfg    Config
	sink   core.Sink
	cards  core.CardSource
	store  StateStore
	log    *slog.Logger
	now    func() time.Time
	cli    *mautrix.Client
	self   id.UserID
	reader *lease.Reader // one replica at a time reads the account's timeline

	mu          sync.Mutex
	displayName string
	profiled    bool
	allowed     map[id.RoomID]bool // resolved from cfg.Rooms
	unresolved  []string           // aliases not resolved yet
	encrypted   map[id.RoomID]bool
	direct      map[id.RoomID]directInfo
}

type directInfo struct {
	direct bool
	at     time.Time
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
)

// New builds an adapter. It validates cfg (errors wrap ErrConfig) and makes
// no network call: the homeserver is first asked in Run.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil || deps.Store == nil {
		return nil, fmt.Errorf("%w: Deps.Sink, Deps.Cards and Deps.Store are required", ErrConfig)
	}
	cli, err := mautrix.NewClient(cfg.HomeserverURL, id.UserID(cfg.UserID), cfg.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("%w: homeserver_url: %v", ErrConfig, err)
	}
	hc := deps.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: cfg.PollTimeout + 30*time.Second}
	}
	cli.Client = hc
	// The delivery pipeline owns retries and 429 pauses (invariant 7);
	// mautrix must not sleep or retry behind its back.
	cli.DefaultHTTPRetries = 0
	cli.IgnoreRateLimit = true
	cli.Log = zerolog.Nop()
	cli.UserAgent = "opsgate"
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
		owner = lease.Owner("matrix")
	}
	a := &Adapter{
		cfg: cfg, sink: deps.Sink, cards: deps.Cards, store: deps.Store, log: log.With("channel", ChannelName),
		now: now, cli: cli, self: id.UserID(cfg.UserID),
		allowed: map[id.RoomID]bool{}, encrypted: map[id.RoomID]bool{}, direct: map[id.RoomID]directInfo{},
	}
	// The lease outlasts the long poll, so a replica that is waiting on
	// /sync still holds it.
	a.reader = lease.New(deps.Store, lease.Options{Name: a.leaseName(), Key: a.sinceKey(), Owner: owner, TTL: cfg.PollTimeout + 30*time.Second, Now: now})
	for _, r := range cfg.Rooms {
		if r[0] == '!' {
			a.allowed[id.RoomID(r)] = true
		} else {
			a.unresolved = append(a.unresolved, r)
		}
	}
	return a, nil
}

// Channel implements core.Adapter.
func (a *Adapter) Channel() string { return ChannelName }

// UserID is the bot's own account.
func (a *Adapter) UserID() string { return string(a.self) }

// learnProfile reads the bot's display name once, so a mention pill
// ("opsgate: deploy …") is recognised; a failure only means it is not.
func (a *Adapter) learnProfile(ctx context.Context) {
	a.mu.Lock()
	done := a.profiled
	a.profiled = true
	a.mu.Unlock()
	if done {
		return
	}
	resp, err := a.cli.GetDisplayName(ctx, a.self)
	if err != nil || resp == nil {
		a.log.Debug("no display name for the bot", "err", err)
		return
	}
	a.mu.Lock()
	a.displayName = resp.DisplayName
	a.mu.Unlock()
}
