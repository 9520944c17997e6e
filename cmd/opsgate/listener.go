package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
	"github.com/opsgate/opsgate/core/authority"
	"github.com/opsgate/opsgate/core/engine"
	"github.com/opsgate/opsgate/core/schedule"
	"github.com/opsgate/opsgate/core/tools"
)

// mountKind says who judges the requests of a mount.
type mountKind string

const (
	// mountSurface: a surface whose every route names its action and asks
	// the engine's authority (guards lists them).
	mountSurface mountKind = "surface"
	// mountPlatform: a chat platform's own endpoint (a webhook or
	// interaction URL), authenticated by the platform's signature; what a
	// person does there reaches the engine as a verified identity, judged
	// by the authority as authority.SurfaceChat.
	mountPlatform mountKind = "platform"
	// mountOps: health and metrics, which carry no run, approval or
	// thread.
	mountOps mountKind = "ops"
)

// mount is one pattern on the listener and what guards it.
type mount struct {
	pattern string
	h       http.Handler
	kind    mountKind
	// guards lists a surface's routes with their actions.
	guards authority.Router
}

// listener is what one replica serves: the engine, its scheduler, its
// channels, and every handler on the listener. serve mounts exactly
// mounts, and the cross-surface authority table (authority_table_test.go)
// checks every one.
type listener struct {
	eng    *engine.Engine
	sched  *schedule.Scheduler
	chans  []channel
	mounts []mount
	// people is who the live configuration knows, for the console's
	// sign-ins at the identity provider; a reload swaps it with the
	// engine's trust.
	people *livePeople
}

// buildListener builds the engine, the scheduler of the configured
// schedules, the channels, the API, the console and MCP over st, each
// asking the engine's authority. The caller runs the engine and the
// scheduler.
func buildListener(cfg *config.Config, st store, tokens []api.Token, keys serverKeys, lookup tools.ToolLookup,
	reg *prometheus.Registry, log *slog.Logger) (*listener, error) {
	key := keys.audit
	// Who holds an Agent API turn's event stream: the engine's gate asks
	// it whether anyone can answer an approval (docs/agent-api.md). Holds
	// go through the store, so the replica executing a turn sees a stream
	// another replica serves.
	attendance := api.NewSharedAttendance(api.AttendanceOptions{Store: st, Log: log})
	dms := &directs{}
	var signer engine.ReceiptSigner
	var jwk json.RawMessage
	if keys.receipts != nil {
		signer = keys.receipts
		var err error
		if jwk, err = json.Marshal(keys.receipts.PublicKey()); err != nil {
			return nil, fmt.Errorf("receipt key: %w", err)
		}
	}
	eng, err := buildEngine(cfg, st, log, reg, lookup, attendance, dms.find, signer)
	if err != nil {
		return nil, err
	}
	sched, err := buildScheduler(cfg, st, eng, eng.Owner(), log)
	if err != nil {
		return nil, err
	}
	apiHandler, err := api.New(api.Options{
		Engine:       eng,
		Store:        st,
		Tokens:       tokens,
		Authority:    eng.Authority(),
		Logger:       log.With("component", "api"),
		PollInterval: cfg.Engine.PollInterval.D(),
		Agent:        agentAPIOptions(cfg, eng, st, attendance),
		ReceiptKey:   jwk,
		Schedules:    sched,
	})
	if err != nil {
		return nil, fmt.Errorf("build API: %w", err)
	}
	chans, err := buildChannels(cfg, st, eng, tokens, log)
	if err != nil {
		return nil, err
	}
	dms.add(chans)
	for _, ch := range chans {
		// Agents stream their text into the threads of channels that can
		// edit a reply in place.
		if re, ok := ch.platform.(core.ReplyEditor); ok && re.EditsReplies() {
			eng.StreamInto(ch.platform.Channel())
		}
		// Agents read the files of messages on channels whose adapter
		// fetches them.
		if f, ok := ch.platform.(core.AttachmentFetcher); ok {
			eng.FetchFilesFrom(ch.platform.Channel(), f)
		}
	}
	people := newLivePeople(buildTrust(cfg))
	consoleUI, err := buildConsole(cfg, eng, st, sched, tokens, people, log)
	if err != nil {
		return nil, err
	}
	mcpServer, err := buildMCP(cfg, eng, st, tokens, key, log)
	if err != nil {
		return nil, err
	}
	l := &listener{eng: eng, sched: sched, chans: chans, people: people}
	l.add(mountSurface, "/api/v1/", apiHandler, apiHandler.(authority.Router))
	for _, ch := range chans {
		for pattern, h := range ch.handlers {
			// A channel that asks the authority itself (the local channel)
			// is a surface; the others are platforms.
			if g, ok := h.(authority.Router); ok {
				l.add(mountSurface, pattern, h, g)
				continue
			}
			l.add(mountPlatform, pattern, h, nil)
		}
	}
	l.add(mountSurface, "/", consoleUI, consoleUI.(authority.Router))
	for path, h := range mcpServer.Routes() {
		l.add(mountSurface, path, h, mcpServer)
	}
	l.add(mountOps, "GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	}), nil)
	l.add(mountOps, "GET /readyz", readyz(st, log), nil)
	l.add(mountOps, "GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}), nil)
	return l, nil
}

func (l *listener) add(kind mountKind, pattern string, h http.Handler, guards authority.Router) {
	l.mounts = append(l.mounts, mount{pattern: pattern, h: h, kind: kind, guards: guards})
}

// mux serves every mount.
func (l *listener) mux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, m := range l.mounts {
		mux.Handle(m.pattern, m.h)
	}
	return mux
}
