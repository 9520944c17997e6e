package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
)

// ==== Channel adapters and their delivery workers start here. ====
//
// startChannels is the one place that builds the platform adapters from
// configuration and starts an outbox delivery worker per channel. Platform
// adapters (adapters/slack, adapters/telegram, ...) and the delivery
// pipeline (core/delivery) plug in here as they land: build the adapter
// from cfg.Channels.<name>, mount its inbound handlers on mux, and start a
// delivery worker draining that channel's outbox.
//
// Until core/delivery has a worker, only the console is wired, with the
// minimal recorder below.

// channelSet is what startChannels started; Wait blocks until every worker
// stopped after the context ends.
type channelSet struct {
	wg sync.WaitGroup
}

// Wait waits for every worker to stop.
func (c *channelSet) Wait() { c.wg.Wait() }

// startChannels starts the delivery side of every enabled channel. Workers
// run until ctx ends.
func startChannels(ctx context.Context, cfg *config.Config, st core.Store, owner string, log *slog.Logger) *channelSet {
	cs := &channelSet{}
	for name, enabled := range map[string]bool{
		"slack":    cfg.Channels.Slack.Enabled,
		"telegram": cfg.Channels.Telegram.Enabled,
		"discord":  cfg.Channels.Discord.Enabled,
		"email":    cfg.Channels.Email.Enabled,
	} {
		if enabled {
			log.Warn("channel enabled in the config but this build has no adapter for it yet; its messages stay queued in the outbox",
				"channel", name)
		}
	}
	// The console is always served: /api/v1 is its back end, and API
	// messages are console messages whether or not the web UI is enabled.
	rec := &consoleRecorder{store: st, owner: owner + "/console", poll: cfg.Engine.PollInterval.D(), log: log.With("component", "delivery", "channel", "console")}
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		rec.run(ctx)
	}()
	return cs
}

// consoleRecorder is the console's delivery worker. The console has no
// platform to send to: its replies and cards are read from the store by the
// API and the web console, so "sending" a console message is recording that
// it was delivered. Claiming through the outbox (rather than skipping it)
// keeps the console on the same path as every other channel.
type consoleRecorder struct {
	store core.Store
	owner string
	poll  time.Duration
	log   *slog.Logger
}

const (
	consoleBatch = 100
	consoleLease = 30 * time.Second
)

func (r *consoleRecorder) run(ctx context.Context) {
	wake, cancel := r.store.Subscribe(core.TopicOutbox)
	defer cancel()
	poll := r.poll
	if poll <= 0 {
		poll = time.Second
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		for r.drain(ctx) {
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

// drain records one batch and reports whether there may be more.
func (r *consoleRecorder) drain(ctx context.Context) bool {
	now := time.Now().UTC()
	batch, err := r.store.OutboxClaim(ctx, core.OutboxClaimParams{
		Channel: "console", Owner: r.owner, Limit: consoleBatch, Now: now, LeaseUntil: now.Add(consoleLease),
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("claim console outbox", "err", err)
		}
		return false
	}
	for _, d := range batch {
		if err := r.store.OutboxDone(ctx, d.ID, r.owner, time.Now().UTC()); err != nil {
			if ctx.Err() == nil {
				r.log.Error("record console message delivered", "id", d.ID, "err", err)
			}
			return false
		}
	}
	// A claim hands out only the oldest message of each thread, so a
	// thread's next message is claimable only now: go round again.
	return len(batch) > 0
}
