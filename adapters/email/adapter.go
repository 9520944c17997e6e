package email

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// Adapter is one bot mailbox: the delivery.Platform for its outbox and the
// Run loop that watches the mailbox over IMAP.
type Adapter struct {
	cfg    Config
	sink   core.Sink
	cards  core.CardSource
	store  CursorStore
	log    *slog.Logger
	now    func() time.Time
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsCfg func(host string) *tls.Config
	tok    tokens
	domain string

	// sendMu and lastSend pace the answers this adapter mails directly
	// (refusals, "counted" notes) at SendInterval, like the pipeline paces
	// the outbox: one account, one rate.
	sendMu   sync.Mutex
	lastSend time.Time

	// cursorMu guards cursor, the last position handed to the sink; tests
	// read it to know when a mailbox has been drained.
	cursorMu sync.Mutex
	cursor   Cursor
}

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.Runner       = (*Adapter)(nil)
)

// New builds an adapter. It validates cfg (errors wrap ErrConfig) and makes
// no network call: IMAP starts in Run, SMTP on the first Send.
func New(cfg Config, deps Deps) (*Adapter, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if deps.Sink == nil || deps.Cards == nil || deps.Store == nil {
		return nil, fmt.Errorf("%w: Deps.Sink, Deps.Cards and Deps.Store are required", ErrConfig)
	}
	log := deps.Logger
	if log == nil {
		log = slog.Default()
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	dial := deps.Dial
	if dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		dial = d.DialContext
	}
	return &Adapter{
		cfg: cfg, sink: deps.Sink, cards: deps.Cards, store: deps.Store, log: log.With("channel", ChannelName), now: now,
		dial: dial, tlsCfg: tlsFor(deps.TLSConfig), tok: newTokens(cfg.TokenKey), domain: domainPart(cfg.Address),
	}, nil
}

// Channel implements core.Adapter.
func (a *Adapter) Channel() string { return ChannelName }

// Actor is the identity of a mail sender: "email:" and the lowercased
// address, as approver groups list it.
func Actor(address string) string { return ChannelName + ":" + strings.ToLower(address) }

// Cursor returns the mailbox position handed to the sink so far.
func (a *Adapter) Cursor() Cursor {
	a.cursorMu.Lock()
	defer a.cursorMu.Unlock()
	return a.cursor
}

func (a *Adapter) setCursor(c Cursor) {
	a.cursorMu.Lock()
	a.cursor = c
	a.cursorMu.Unlock()
}

// pace blocks until the next direct answer may leave, SendInterval after
// the previous one.
func (a *Adapter) pace(ctx context.Context) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	if wait := a.lastSend.Add(a.cfg.SendInterval).Sub(a.now()); wait > 0 {
		if err := sleep(ctx, wait); err != nil {
			return err
		}
	}
	a.lastSend = a.now()
	return nil
}
