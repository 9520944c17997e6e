package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/opsgate/opsgate/adapters/console/oidc"
	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/auditsink"
	"github.com/opsgate/opsgate/core/engine"
)

// livePeople is who the running configuration knows, for the console's
// sign-ins at the identity provider; a reload (SIGHUP) swaps it together
// with the engine's trust, so the console and the engine judge one
// configuration.
type livePeople struct {
	now atomic.Pointer[peopleSnapshot]
}

type peopleSnapshot struct {
	dir    *approvals.Directory
	groups map[string][]string
}

func newLivePeople(t engine.Trust) *livePeople {
	l := &livePeople{}
	l.set(t)
	return l
}

func (l *livePeople) set(t engine.Trust) {
	l.now.Store(&peopleSnapshot{dir: approvals.NewDirectory(t.People, t.Groups), groups: t.Groups})
}

// Known implements web.People.
func (l *livePeople) Known(identity string) bool { return l.now.Load().dir.Known(identity) }

// ApproverGroup implements web.People.
func (l *livePeople) ApproverGroup(name string) bool {
	_, ok := l.now.Load().groups[name]
	return ok
}

// trustReloader reloads the engine's trust and the console's people as
// one.
type trustReloader struct {
	eng    reloader
	people *livePeople
}

func (r trustReloader) Reload(t engine.Trust) {
	r.eng.Reload(t)
	r.people.set(t)
}

// buildOIDC is the console's identity provider client, nil when
// channels.console.oidc is not configured.
func buildOIDC(cfg *config.Config) (*oidc.Client, error) {
	if !cfg.OIDCEnabled() {
		return nil, nil
	}
	c, err := oidc.New(cfg.ConsoleOIDCConfig())
	if err != nil {
		return nil, fmt.Errorf("channels.console.oidc: %w", err)
	}
	return c, nil
}

// startAuditSinks delivers the audit chain to audit.sinks until ctx ends;
// the returned wait blocks until every sink stopped. With no sinks it
// does nothing.
func startAuditSinks(ctx context.Context, cfg *config.Config, st auditsink.Store, owner string, reg prometheus.Registerer, log *slog.Logger) (wait func(), err error) {
	if len(cfg.Audit.Sinks) == 0 {
		return func() {}, nil
	}
	s, err := auditsink.New(cfg.AuditSinkConfigs(), auditsink.Options{Store: st, Owner: owner, Registerer: reg,
		Logger: log.With("component", "auditsink")})
	if err != nil {
		return nil, fmt.Errorf("audit.sinks: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Run(ctx)
	}()
	log.Info("audit sinks started", "sinks", len(cfg.Audit.Sinks))
	return wg.Wait, nil
}
