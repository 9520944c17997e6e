package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"reflect"
	"syscall"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/configs"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
)

// SIGHUP reloads who may do what — people, approver groups, policy,
// requesters, self-approval, session grants — and the schedules from the same file serve
// started with, validated exactly as `opsgate config check` does. A file
// with any problem is refused (logged, audited) and the running
// configuration stays. Pending approvals are judged against the reloaded
// configuration at their next decision. Everything else (tools, flows,
// tokens, channels, store, listener) needs a restart; a reload that
// changes it says so in the log.

// reloader is what a reload needs of the engine and the store.
type reloader interface {
	Reload(t engine.Trust)
}

type auditAppender interface {
	AuditAppend(ctx context.Context, entries []approvals.AuditEntry) error
}

// scheduleSetter takes the reloaded schedules (core/schedule's Scheduler).
type scheduleSetter interface {
	Set(schedules []schedule.Schedule) error
}

// reloadOnHUP reloads on every SIGHUP until ctx ends: trust, and the
// schedules.
func reloadOnHUP(ctx context.Context, cfg *config.Config, eng reloader, sched scheduleSetter, st auditAppender, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			next, err := reloadTrust(ctx, cfg, eng, st, log) // logged and audited either way
			if err != nil {
				continue
			}
			if err := sched.Set(next.ScheduleList()); err != nil {
				log.Error("config reload: schedules not changed", "err", err) // config check refused it already
				continue
			}
			log.Info("configuration reloaded: schedules apply now", "schedules", len(next.Schedules))
		}
	}
}

// reloadTrust reads the configuration serve started with (cur) again and
// applies its trust part; what else changed is reported as needing a
// restart.
func reloadTrust(ctx context.Context, cur *config.Config, eng reloader, st auditAppender, log *slog.Logger) (*config.Config, error) {
	source := cur.Source
	var next *config.Config
	var err error
	if source == "" || source == configs.QuickstartName {
		next, err = config.Default()
	} else {
		next, err = config.Loader{}.Load(source)
	}
	audit := func(kind approvals.AuditKind, detail map[string]any) {
		b, _ := json.Marshal(detail)
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if aerr := st.AuditAppend(actx, []approvals.AuditEntry{{At: time.Now(), Kind: kind, Actor: "system", Detail: b}}); aerr != nil {
			log.Error("audit the configuration reload", "err", aerr)
		}
	}
	if err != nil {
		var ce *config.Error
		if errors.As(err, &ce) {
			for _, p := range ce.Problems {
				log.Error("config reload refused", "file", ce.File, "line", p.Line, "path", p.Path, "problem", p.Message)
			}
		}
		log.Error("config reload refused: the running configuration stays", "file", describeSource(source), "err", err)
		audit(approvals.AuditConfigRefused, map[string]any{"file": describeSource(source), "error": err.Error()})
		return nil, fmt.Errorf("reload %s: %w", describeSource(source), err)
	}
	eng.Reload(buildTrust(next))
	var restart []string
	for name, same := range map[string]bool{
		"server": reflect.DeepEqual(cur.Server, next.Server), "store": reflect.DeepEqual(cur.Store, next.Store),
		"engine": reflect.DeepEqual(cur.Engine, next.Engine), "api": reflect.DeepEqual(cur.API, next.API),
		"tools": reflect.DeepEqual(cur.Tools, next.Tools), "flows": reflect.DeepEqual(cur.Flows, next.Flows),
		"audit":         reflect.DeepEqual(cur.Audit, next.Audit),
		"approvals.ttl": cur.Approvals.TTL == next.Approvals.TTL,
		"channels":      reflect.DeepEqual(withoutRequesters(cur.Channels), withoutRequesters(next.Channels)),
	} {
		if !same {
			restart = append(restart, name)
		}
	}
	log.Info("configuration reloaded: people, groups, policy and requesters apply now", "file", describeSource(source),
		"rules", len(next.Policy.Rules), "people", len(next.People), "groups", len(next.Approvers.Groups))
	if len(restart) > 0 {
		log.Warn("configuration reload: these sections changed and apply only after a restart", "sections", restart)
	}
	audit(approvals.AuditConfigReloaded, map[string]any{"file": describeSource(source), "rules": len(next.Policy.Rules),
		"people": len(next.People), "groups": len(next.Approvers.Groups), "needs_restart": restart})
	return next, nil
}

// withoutRequesters is ch with the requesters lists (which reload) cleared,
// so comparing what needs a restart ignores them.
func withoutRequesters(ch config.Channels) config.Channels {
	ch.Console.Requesters, ch.Slack.Requesters, ch.Telegram.Requesters = nil, nil, nil
	ch.Discord.Requesters, ch.Email.Requesters = nil, nil
	return ch
}
