package main

import (
	"strings"
	"sync"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
)

// withLadders gives the policy its escalation ladders: the default one
// (approvals.escalation) and each rule's own (config.Ladder).
func withLadders(p *approvals.Policy, cfg *config.Config) *approvals.Policy {
	p.Escalation = config.Ladder(cfg.Approvals.Escalation)
	for i := range p.Rules {
		if i < len(cfg.Policy.Rules) {
			p.Rules[i].Escalation = config.Ladder(cfg.Policy.Rules[i].Escalation)
		}
	}
	return p
}

// directs finds the direct conversation with an identity through the
// channels whose adapter is a core.DirectMessenger (escalation's
// reminders and cards to escalated approvers). The engine is built before
// the channels, so it is filled once they are, before the engine runs.
type directs struct {
	mu sync.RWMutex
	by map[string]core.DirectMessenger
}

// add registers the channels that offer direct messages.
func (d *directs) add(chans []channel) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.by == nil {
		d.by = map[string]core.DirectMessenger{}
	}
	for _, ch := range chans {
		if dm, ok := ch.platform.(core.DirectMessenger); ok {
			d.by[ch.platform.Channel()] = dm
		}
	}
}

// find implements engine.Options.Direct.
func (d *directs) find(identity string) (core.Thread, bool) {
	channel, user, ok := strings.Cut(identity, ":")
	if !ok || user == "" {
		return core.Thread{}, false
	}
	d.mu.RLock()
	dm := d.by[channel]
	d.mu.RUnlock()
	if dm == nil {
		return core.Thread{}, false
	}
	return dm.DirectThread(user)
}
