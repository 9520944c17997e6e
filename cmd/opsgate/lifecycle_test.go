package main

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/opsgate/opsgate/adapters/console"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// fullPlatform offers every optional lifecycle interface.
type fullPlatform struct {
	delivery.Platform
	ran, drained bool
}

func (p *fullPlatform) Routes() map[string]http.Handler {
	return map[string]http.Handler{"POST /x/events": http.NotFoundHandler()}
}
func (p *fullPlatform) Run(context.Context) error   { p.ran = true; return nil }
func (p *fullPlatform) Drain(context.Context) error { p.drained = true; return errors.New("late") }

var (
	_ core.HTTPReceiver = (*fullPlatform)(nil)
	_ core.Runner       = (*fullPlatform)(nil)
	_ core.Drainer      = (*fullPlatform)(nil)
)

// TestNewChannelDiscoversLifecycle: what an adapter offers of the optional
// lifecycle is discovered on it, and what it does not offer stays unset.
func TestNewChannelDiscoversLifecycle(t *testing.T) {
	t.Parallel()
	p := &fullPlatform{Platform: console.New()}
	ch := newChannel(p, config.Delivery{MaxAttempts: 3})
	if _, ok := ch.handlers["POST /x/events"]; !ok || len(ch.handlers) != 1 {
		t.Errorf("handlers = %v, want the adapter's Routes", ch.handlers)
	}
	if ch.receive == nil || ch.drain == nil {
		t.Fatalf("receive %v, drain %v: want both discovered", ch.receive != nil, ch.drain != nil)
	}
	_ = ch.receive(t.Context())
	if err := ch.drain(t.Context()); err == nil || !p.ran || !p.drained {
		t.Errorf("Run called %v, Drain called %v (err %v)", p.ran, p.drained, err)
	}
	if ch.delivery.MaxAttempts != 3 || ch.platform != delivery.Platform(p) {
		t.Errorf("channel = %+v", ch)
	}
	plain := newChannel(console.New(), config.Delivery{})
	if plain.handlers != nil || plain.receive != nil || plain.drain != nil {
		t.Errorf("the console offers no lifecycle, got %+v", plain)
	}
}

// TestEveryChatChannelIsGated: each channel whose senders are people is
// in the requesters gate (unset: only identities the config knows), so a
// new chat channel cannot let strangers start runs by being left out; the
// console is gated only when a list is given.
func TestEveryChatChannelIsGated(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{}
	got := cfg.RequesterGates()
	for _, name := range []string{"slack", "telegram", "discord", "email", "matrix", "signal"} {
		rq, ok := got[name]
		if !ok || rq.Anyone {
			t.Errorf("channel %s: gate %+v (present %v), want gated by default", name, rq, ok)
		}
	}
	if _, ok := got["console"]; ok {
		t.Errorf("console gated without a list")
	}
	cfg.Channels.Matrix.Requesters = config.Requesters{"anyone"}
	if rq := cfg.RequesterGates()["matrix"]; !rq.Anyone {
		t.Errorf("matrix requesters [anyone] → %+v", rq)
	}
}
