package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/api"
)

// Shutdown bounds: how long in-flight HTTP requests may finish, and how long
// the whole shutdown may take before the process gives up waiting.
const (
	httpDrain     = 5 * time.Second
	readyzTimeout = 2 * time.Second
	// adminActor is who the generated token acts as; the quickstart lists it
	// as an approver.
	adminActor = "console:admin"
	// adminTokenFile is the generated token's file name under data_dir.
	adminTokenFile = "admin.token"
)

// generatedScopes are the generated admin token's: every scope there is.
var generatedScopes = []core.Scope{core.ScopeRead, core.ScopeRequest, core.ScopeDecide, core.ScopeAdmin, core.ScopeSessionRun}

func adminTokenPath(dataDir string) string { return filepath.Join(dataDir, adminTokenFile) }

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", "serve [--config FILE] [--log-format text|json] [--log-level debug|info|warn|error] [--debug-listen 127.0.0.1:PORT]",
		"Runs the server: migrates the store, then serves the API, the console, MCP and every enabled channel\non server.listen until SIGINT or SIGTERM.", stdout, stderr)
	cfgPath := fs.String("config", "", "config file (default $OPSGATE_CONFIG, ./opsgate.yaml, built-in quickstart)")
	logFormat := fs.String("log-format", "text", "log format: text or json")
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	debugListen := fs.String("debug-listen", "", "serve Go's profiler (/debug/pprof/) on this loopback host:port; off when empty")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("serve takes no arguments (use --config FILE)")
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return err
	}
	if *debugListen != "" {
		if err := checkDebugAddr(*debugListen); err != nil {
			return err
		}
	}
	path, cfg, err := loadPrepared(*cfgPath, stderr, true, log)
	if err != nil {
		return err
	}
	for _, w := range cfg.Warnings() {
		log.Warn("configuration: "+w.Message, "config", describeSource(path), "path", w.Path, "line", w.Line)
	}
	log.Info("configuration loaded", "config", describeSource(path), "store", cfg.Store.Driver,
		"tools", len(cfg.Tools), "flows", len(cfg.Flows), "mcp_servers", len(cfg.MCPServers))
	if *debugListen != "" {
		if err := startDebug(ctx, *debugListen, log); err != nil {
			return err
		}
	}
	return serve(ctx, cfg, log)
}

// newLogger builds the process logger from the --log-format and --log-level
// flags.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usagef("--log-format %q: want text or json", format)
}

// serve runs the server until ctx ends (SIGINT/SIGTERM), then shuts down in
// order: stop accepting HTTP, let the engine drain its in-flight steps
// (bounded by the engine), stop delivery, close the store.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	// loadPrepared created data_dir and installed the demo scripts.
	// Listen before anything slow, so "address already in use" is the first
	// thing an operator sees, not a timeout.
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on server.listen %s: %w", cfg.Server.Listen, err)
	}
	defer ln.Close()
	lock, err := lockStore(cfg)
	if err != nil {
		return err
	}
	defer lock.release()
	stopTraces, err := startTraces(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer stopTraces()

	st, err := openStoreWith(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate %s store: %w", cfg.Store.Driver, err)
	}
	key, err := loadAuditKey(cfg.Audit.KeyFile, true)
	if err != nil {
		return err
	}
	if err := st.AuditAdoptKey(ctx, key, time.Now()); err != nil {
		return fmt.Errorf("audit.key_file %s: %w (every replica must use the key the chain was sealed with)", cfg.Audit.KeyFile, err)
	}
	log.Info("audit chain keyed", "key_file", cfg.Audit.KeyFile)
	signer, err := loadReceiptSigner(cfg.Approvals.ReceiptKeyFile, true, cfg.Approvals.ReceiptTTL.D())
	if err != nil {
		return err
	}
	log.Info("approval receipts signed", "key_file", cfg.Approvals.ReceiptKeyFile, "kid", signer.PublicKey().KeyID)

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewGoCollector(),
	)
	// Upstream MCP servers connect in the background; their tools fail
	// their calls (never the server) while one is down. Closed after the
	// engine has drained, so in-flight calls can finish.
	up, err := buildUpstream(cfg, log)
	if err != nil {
		return err
	}
	if up != nil {
		up.Start(ctx)
		defer up.Close()
	}
	for _, n := range cfg.AgentNotices() {
		log.Info(n)
	}
	tokens := apiTokens(cfg)
	// Where a person finds a token to sign in with; never the token itself.
	tokenHint := "one of api.tokens"
	if len(tokens) == 0 {
		t, path, err := adminToken(cfg.Server.DataDir, log)
		if err != nil {
			return err
		}
		// The operator's own token holds every scope, session.run too, so
		// the Agent API's examples work on a quickstart (docs/agent-api.md).
		tokens = []api.Token{{Name: "admin (generated)", Token: t, Actor: adminActor, Scopes: generatedScopes}}
		tokenHint = "the admin token in " + path
		log.Warn(fmt.Sprintf("no api.tokens configured: using the admin token in %s (delete the file to rotate it); the CLI reads it from the file", path),
			"file", path, "actor", adminActor)
	}
	l, err := buildListener(cfg, st, tokens, serverKeys{audit: key, receipts: signer}, toolLookup(up), reg, log)
	if err != nil {
		return err
	}
	eng, sched, chans, mux := l.eng, l.sched, l.chans, l.mux()

	// Request contexts derive from baseCtx, cancelled only if requests
	// (event streams) outlive the HTTP drain.
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           rootHandler(mux),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	engDone := make(chan error, 1)
	go func() { engDone <- eng.Run(engCtx) }()
	schedDone := make(chan struct{})
	go func() {
		defer close(schedDone)
		_ = sched.Run(engCtx) // returns when engCtx ends
	}()
	go reloadOnHUP(engCtx, cfg, trustReloader{eng: eng, people: l.people}, sched, st, log)
	sinkCtx, stopSinks := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSinks()
	waitSinks, err := startAuditSinks(sinkCtx, cfg, st, eng.Owner(), reg, log)
	if err != nil {
		return err
	}

	chCtx, stopChannels := context.WithCancel(context.WithoutCancel(ctx))
	defer stopChannels()
	channels, err := startChannels(chCtx, chans, st, eng, eng.Owner(), reg, log)
	if err != nil {
		return err
	}

	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Serve(ln) }()
	console := consoleURL(cfg.Server.PublicURL, ln.Addr().String())
	log.Info(fmt.Sprintf("opsgate serving: console at %s, sign in with %s", console, tokenHint),
		"console", console, "listen", ln.Addr().String(), "version", version, "owner", eng.Owner())

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down: signal received")
	case err := <-srvDone:
		runErr = fmt.Errorf("http server: %w", err)
	case err := <-engDone:
		engDone <- err // for the wait below
		runErr = fmt.Errorf("engine stopped unexpectedly: %w", err)
	}

	// 1. Stop accepting; let in-flight requests finish, then end streams.
	sctx, cancel := context.WithTimeout(context.Background(), httpDrain)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http drain bound reached; closing remaining connections (event streams)", "bound", httpDrain)
		cancelBase()
		_ = srv.Close()
	}
	cancel()
	// 2. Let the engine finish the steps in flight (it bounds the wait);
	// the scheduler stops firing ticks.
	stopEngine()
	<-schedDone
	if err := <-engDone; err != nil && !errors.Is(err, context.Canceled) && runErr == nil {
		runErr = fmt.Errorf("engine: %w", err)
	}
	// 3. Stop delivery workers and audit sinks; 4. the store closes in the
	// deferred call.
	stopChannels()
	channels.Wait()
	stopSinks()
	waitSinks()
	log.Info("opsgate stopped")
	return runErr
}

// rootHandler is what the listener serves: every route behind the one
// input guard (core.GuardRequests).
func rootHandler(mux http.Handler) http.Handler { return core.GuardRequests(mux) }

// pinger is the part of the store /readyz needs.
type pinger interface {
	Ping(ctx context.Context) error
}

// readyz answers 200 while the store answers a ping within readyzTimeout,
// 503 otherwise, so a load balancer stops sending work to a replica that
// cannot commit it.
func readyz(st pinger, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyzTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := st.Ping(ctx); err != nil {
			log.Warn("readyz: store unreachable", "err", err)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "store unreachable\n")
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
}

// adminToken returns the admin token of <dataDir>/admin.token, kept across
// restarts so a restart neither signs everyone out of the console nor
// breaks an exported $OPSGATE_TOKEN. The file is reused only when it is
// private (no group or other permission bits) and holds a well-formed
// token; otherwise — missing, readable by others, or garbled — a new token
// is generated and written in its place. Deleting the file rotates the
// token at the next start.
func adminToken(dataDir string, log *slog.Logger) (token, path string, err error) {
	path = adminTokenPath(dataDir)
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return generateAdminToken(dataDir)
	case err != nil:
		return "", "", fmt.Errorf("admin token %s: %w", path, err)
	case !info.Mode().IsRegular():
		return "", "", fmt.Errorf("admin token %s: not a regular file", path)
	case info.Mode().Perm()&0o077 != 0:
		log.Warn("admin token file is readable by others; replacing it with a new token", "file", path, "mode", info.Mode().Perm().String())
		return generateAdminToken(dataDir)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("admin token %s: %w", path, err)
	}
	if t := strings.TrimSpace(string(b)); wellFormedAdminToken(t) {
		return t, path, nil
	}
	log.Warn("admin token file does not hold a well-formed token; replacing it with a new one", "file", path)
	return generateAdminToken(dataDir)
}

// adminTokenPrefix and adminTokenHexLen describe a generated token:
// "og_" and 32 random bytes in hex.
const (
	adminTokenPrefix = "og_"
	adminTokenHexLen = 64
)

// wellFormedAdminToken reports whether t looks like a token
// generateAdminToken wrote, so a truncated or hand-edited file is replaced
// rather than served as a weak credential.
func wellFormedAdminToken(t string) bool {
	h, ok := strings.CutPrefix(t, adminTokenPrefix)
	if !ok || len(h) != adminTokenHexLen {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// generateAdminToken makes a random token and writes it, mode 0600, to
// <dataDir>/admin.token, replacing any earlier one atomically so a reader
// never sees a half-written file.
func generateAdminToken(dataDir string) (token, path string, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("generate admin token: %w", err)
	}
	token = adminTokenPrefix + hex.EncodeToString(b[:])
	path = adminTokenPath(dataDir)
	tmp, err := os.CreateTemp(dataDir, ".admin.token-*")
	if err != nil {
		return "", "", fmt.Errorf("write admin token: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", "", fmt.Errorf("write admin token: %w", err)
	}
	if _, err := tmp.WriteString(token + "\n"); err != nil {
		tmp.Close()
		return "", "", fmt.Errorf("write admin token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", "", fmt.Errorf("write admin token: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", "", fmt.Errorf("write admin token %s: %w", path, err)
	}
	return strings.TrimSpace(token), path, nil
}

// consoleURL is the address people open: server.public_url when set, else
// the listener as a local client reaches it.
func consoleURL(publicURL, listen string) string {
	if publicURL != "" {
		return strings.TrimRight(publicURL, "/") + "/"
	}
	return serverURLFromListen(listen) + "/"
}
